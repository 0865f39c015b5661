"""The list of API calls, once, for both clients.

Each call is a :class:`Call` around its builder in :mod:`producers.client.requests`. Read from a
client, it is a method with the builder's signature that hands the built request to the client's
``_send``: the blocking client answers the result, the asyncio client a coroutine of it (its
``_send`` is ``async``). The overloads of ``__get__`` tell the type checker which.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, overload

from producers.client import requests
from producers.client.requests import Request

if TYPE_CHECKING:
    from producers.client.async_ import AsyncCuememClient
    from producers.client.sync import CuememClient

P = ParamSpec("P")
T = TypeVar("T")


class Call(Generic[P, T]):
    """One API call as a method: ``client.name(*args)`` sends ``build(*args)``."""

    def __init__(self, build: Callable[P, Request[T]]):
        self.build = build
        self.__doc__ = build.__doc__  # help() on the class shows what the call does
        # What help() and inspect show for the method: the builder's parameters; the answer type
        # is the type checker's business (the overloads below).
        self.signature = inspect.signature(build).replace(return_annotation=inspect.Signature.empty)

    @overload
    def __get__(self, client: None, owner: type) -> Call[P, T]: ...

    @overload
    def __get__(self, client: AsyncCuememClient, owner: type) -> Callable[P, Coroutine[Any, Any, T]]: ...

    @overload
    def __get__(self, client: CuememClient, owner: type) -> Callable[P, T]: ...

    def __get__(self, client: Any, owner: type) -> Any:
        if client is None:
            return self
        build = self.build

        @functools.wraps(build)
        def send(*args: P.args, **kwargs: P.kwargs) -> Any:
            return client._send(build(*args, **kwargs))

        send.__signature__ = self.signature  # type: ignore[attr-defined]
        return send


class Calls:
    """Every call of the ``/v1`` API; both clients inherit them and differ only in ``_send``."""

    publish = Call(requests.publish)
    publish_batch = Call(requests.publish_batch)
    recall = Call(requests.recall)
    recall_prompt = Call(requests.recall_prompt)
    memories = Call(requests.memories)
    memory = Call(requests.memory)
    edit = Call(requests.edit)
    invalidate = Call(requests.invalidate)
    restore = Call(requests.restore)
    forget = Call(requests.forget)
    history = Call(requests.history)
    health = Call(requests.health)
    ready = Call(requests.ready)
