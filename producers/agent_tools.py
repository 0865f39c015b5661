"""Memory as agent tools: function-calling schemas and their handler.

    from producers.agent_tools import TOOL_SCHEMAS, MemoryTools
    from producers.backends import ApiBackend
    from producers.client import CuememClient

    tools = MemoryTools.over(ApiBackend(CuememClient()), user_id="u42", session_id="chat-7")
    # in-process instead (service.operations.library_backend):
    # MemoryTools.over(LibraryBackend(container, publisher), "u42", "chat-7"),
    # or the original form: MemoryTools(recall, publisher, "u42", "chat-7") with
    # recall = lambda query, k, session_id: recall_for(container, "u42", query, k=k, session_id=session_id)
    client.chat.completions.create(..., tools=TOOL_SCHEMAS)
    # for each tool call in the reply:
    reply = tools.handle(call.function.name, call.function.arguments)   # JSON text for the tool message

With ``format: "prompt"`` the block is :func:`shared.recall.prompt.prompt_block` over the recall's
items, dated in the user's zone the recall result gives (``user_offset_s``), as the API's own block.

``search_memory`` is read-only: a search changes no memory. A backend built with
``reinforce=True`` (``ApiBackend(client, reinforce=True)``, ``LibraryBackend(..., reinforce=True)``)
counts the memories each search returns as used, for an agent that puts what it finds to use.

``handle`` never raises: bad arguments, an unknown tool, or a failing recall or publish come back
as ``{"error": "..."}`` JSON naming the problem, so the model can correct itself and the agent
loop goes on. This module imports nothing from ``workers``: memory is reached through a backend
(:mod:`producers.backends`: the HTTP API or a recall callable and a publisher;
:mod:`service.operations.library_backend`: the library).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from producers.backends import (
    CallableBackend,
    ForgetUnsupported,
    MemoryBackend,
    PublisherLike,
    RecallFn,
)
from shared.events import MAX_ID_CHARS_CEILING, SAFE_ID_TEXT, InvalidEvent, InvalidInput, is_safe_id
from shared.recall.prompt import DEFAULT_PROMPT_BUDGET, prompt_block
from shared.recall.request import parse_recall

log = logging.getLogger(__name__)

SEARCH_MEMORY = "search_memory"
REMEMBER = "remember"
K_MIN, K_MAX, K_DEFAULT = 1, 20, 5
CONTENT_MAX_CHARS = 2000
FORMATS = ("items", "prompt")
KINDS = ("preference", "fact", "profile", "task")

TOOL_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": SEARCH_MEMORY,
            "description": (
                "Search the user's long-term memory (preferences, profile, facts, tasks, past "
                "conversations) and the current conversation. Call it before answering whenever the "
                "answer may depend on something the user said before. Each item says why it was found."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "minLength": 1,
                        "description": "What to look for, in the user's words (Chinese or English).",
                    },
                    "k": {
                        "type": "integer",
                        "minimum": K_MIN,
                        "maximum": K_MAX,
                        "default": K_DEFAULT,
                        "description": "How many memories to return at most.",
                    },
                    "session_id": {
                        "type": "string",
                        "description": "The conversation whose recent turns to include; "
                        "defaults to the current one.",
                    },
                    "format": {
                        "type": "string",
                        "enum": list(FORMATS),
                        "default": "items",
                        "description": "'items': a JSON list with explanations; 'prompt': a text block "
                        "grouped by memory type, ready to put in context.",
                    },
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": REMEMBER,
            "description": (
                "Store something the user explicitly asked to be remembered, as one short, "
                "self-contained statement (e.g. 'I am allergic to peanuts', '我不吃香菜'). It is "
                "searchable at once."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "content": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": CONTENT_MAX_CHARS,
                        "description": "The statement to remember, in the user's language.",
                    },
                    "kind": {
                        "type": "string",
                        "enum": list(KINDS),
                        "description": "What kind of memory it is, when clear.",
                    },
                    "session_id": {
                        "type": "string",
                        "description": "The conversation it belongs to; defaults to the current one.",
                    },
                },
                "required": ["content"],
                "additionalProperties": False,
            },
        },
    },
]

_PARAMETERS = {s["function"]["name"]: s["function"]["parameters"] for s in TOOL_SCHEMAS}


class ToolArgumentError(ValueError):
    """A tool call's arguments do not match its schema; the message names the argument."""


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, default=str)


def _error(message: str) -> str:
    return _dumps({"error": message})


def _decode(tool: str, arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}  # some models send "" for a call without arguments
    if isinstance(arguments, str):
        try:
            decoded = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise ToolArgumentError(
                f"{tool}: arguments are not valid JSON ({exc.msg} at {exc.pos})"
            ) from None
    else:
        decoded = arguments
    if not isinstance(decoded, Mapping):
        raise ToolArgumentError(f"{tool}: arguments must be a JSON object, got {type(decoded).__name__}")
    data = dict(decoded)
    known = _PARAMETERS[tool]["properties"]
    unknown = sorted(str(k) for k in data if k not in known)
    if unknown:
        raise ToolArgumentError(f"{tool}: unknown argument {unknown[0]!r} (expected: {', '.join(known)})")
    return data


def _typed_string(tool: str, data: Mapping[str, Any], name: str, *, required: bool) -> str | None:
    """The argument if it is a string (None when absent and not ``required``): the JSON shape only;
    what a recall's values must be is :func:`shared.recall.request.parse_recall`'s to say."""
    value = data.get(name)
    if value is None:
        if required:
            raise ToolArgumentError(f"{tool}: argument {name!r} is required")
        return None
    if not isinstance(value, str):
        raise ToolArgumentError(f"{tool}: argument {name!r} must be a string, got {type(value).__name__}")
    return value


def _string(
    tool: str, data: Mapping[str, Any], name: str, *, required: bool, max_chars: int | None = None
) -> str | None:
    value = _typed_string(tool, data, name, required=required)
    if value is None:
        return None
    if not value.strip():
        raise ToolArgumentError(f"{tool}: argument {name!r} must not be empty")
    if max_chars is not None and len(value) > max_chars:
        raise ToolArgumentError(
            f"{tool}: argument {name!r} is {len(value)} characters long; the limit is {max_chars}"
        )
    return value


def _choice(tool: str, data: Mapping[str, Any], name: str, choices: tuple[str, ...]) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or value not in choices:
        raise ToolArgumentError(
            f"{tool}: argument {name!r} must be one of {', '.join(choices)}, got {value!r}"
        )
    return value


def _k(tool: str, data: Mapping[str, Any]) -> int:
    """``k`` as an integer (its bounds are parse_recall's, with the schema's maximum)."""
    value = data.get("k")
    if value is None:
        return K_DEFAULT
    # JSON has one number type: 5.0 is the integer 5; a bool is not a number here.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolArgumentError(
            f"{tool}: argument 'k' must be an integer from {K_MIN} to {K_MAX}, got {value!r}"
        )
    return value


def _session(tool: str, data: Mapping[str, Any], default: str) -> str:
    session = _string(tool, data, "session_id", required=False)
    if session is None:
        return default
    if not is_safe_id(session):
        raise ToolArgumentError(
            f"{tool}: argument 'session_id' {session[:40]!r} must use only {SAFE_ID_TEXT}"
        )
    return session


def _user_offset(result: Mapping[str, Any]) -> int | None:
    """The user's zone a recall result carries (``user_offset_s``, seconds east of UTC), which the
    prompt block dates its items in; None (dates as the items' UTC instants) when it has none."""
    offset = result.get("user_offset_s")
    return offset if isinstance(offset, int) else None


class MemoryTools:
    """Handles ``search_memory`` and ``remember`` calls for one user in one conversation.

    ``MemoryTools(recall, publisher, user_id, session_id)`` is the original form (a recall
    callable bound to the user, and a publisher); :meth:`over` takes any
    :class:`producers.backends.MemoryBackend` (the HTTP API or the library).
    """

    def __init__(
        self,
        recall: RecallFn,
        publisher: PublisherLike,
        user_id: str,
        session_id: str,
        *,
        prompt_budget_tokens: int = DEFAULT_PROMPT_BUDGET,
    ):
        self._setup(CallableBackend(recall, publisher), user_id, session_id, prompt_budget_tokens)

    @classmethod
    def over(
        cls,
        backend: MemoryBackend,
        user_id: str,
        session_id: str,
        *,
        prompt_budget_tokens: int = DEFAULT_PROMPT_BUDGET,
    ) -> MemoryTools:
        tools = cls.__new__(cls)
        tools._setup(backend, user_id, session_id, prompt_budget_tokens)
        return tools

    def _setup(
        self, backend: MemoryBackend, user_id: str, session_id: str, prompt_budget_tokens: int
    ) -> None:
        self.backend = backend
        self.user_id = user_id
        self.session_id = session_id
        self.prompt_budget_tokens = prompt_budget_tokens

    @property
    def schemas(self) -> list[dict[str, Any]]:
        return TOOL_SCHEMAS

    def handle(self, name: str, arguments: str | Mapping[str, Any] | None) -> str:
        """Run one tool call; always returns JSON text (the result, or ``{"error": ...}``)."""
        if name not in _PARAMETERS:
            return _error(f"unknown tool {name!r} (available: {', '.join(_PARAMETERS)})")
        try:
            data = _decode(name, arguments)
            if name == SEARCH_MEMORY:
                return self._search(data)
            return self._remember(data)
        except ToolArgumentError as exc:
            return _error(str(exc))
        except (InvalidEvent, InvalidInput) as exc:  # the publisher's or recall's checks, naming the field
            return _error(f"{name}: {exc}")
        except Exception as exc:  # never raise into the agent loop
            log.exception("memory tool %s failed", name)
            return _error(f"{name} failed: {type(exc).__name__}: {exc}")

    def _search(self, data: Mapping[str, Any]) -> str:
        tool = SEARCH_MEMORY
        query = _typed_string(tool, data, "query", required=True)
        assert query is not None
        k = _k(tool, data)
        session = _typed_string(tool, data, "session_id", required=False)
        fmt = _choice(tool, data, "format", FORMATS) or "items"
        # The rules of a recall, as the API, the CLI and the library check them; the schema offers
        # a model at most K_MAX items, so that is this tool's bound of k.
        asked = parse_recall(
            user_id=self.user_id,
            query=query,
            k=k,
            session_id=self.session_id if session is None else session,
            max_k=K_MAX,
            # The server's own limit (``Settings.max_id_chars``) is not known here: the most any
            # server allows, as ``remember`` does, and the server checks its own.
            max_id_chars=MAX_ID_CHARS_CEILING,
        )
        result = self.backend.search(asked.user_id, asked.query, asked.k, asked.session_id)
        items = list(result.get("items") or [])[: asked.k]
        if fmt == "prompt":
            block = prompt_block(
                items,
                query=query,
                budget_tokens=self.prompt_budget_tokens,
                offset_s=_user_offset(result),
            )
            return _dumps({"prompt": block})
        return _dumps({"items": items})

    def _remember(self, data: Mapping[str, Any]) -> str:
        tool = REMEMBER
        content = _string(tool, data, "content", required=True, max_chars=CONTENT_MAX_CHARS)
        assert content is not None
        kind = _choice(tool, data, "kind", KINDS)
        session = _session(tool, data, self.session_id)
        published = self.backend.remember(self.user_id, session, content, {"remember": True, "kind": kind})
        return _dumps({"event_id": published.event_id, "seq": published.seq})

    def forget(self, memory_id: str) -> str:
        """Forget one of the user's memories (a soft delete, kept for the audit); JSON text like
        :meth:`handle`, never raising. Not one of :data:`TOOL_SCHEMAS`: an app offers it to a
        model deliberately (the MCP server does)."""
        tool = "forget"
        try:
            memory = _string(tool, {"memory_id": memory_id}, "memory_id", required=True)
            assert memory is not None
            return _dumps(dict(self.backend.forget(self.user_id, memory)))
        except ToolArgumentError as exc:
            return _error(str(exc))
        except (ForgetUnsupported, LookupError) as exc:  # LookupError: no such memory for this user
            return _error(f"{tool}: {exc}")
        except Exception as exc:  # never raise into the agent loop
            log.exception("memory tool %s failed", tool)
            return _error(f"{tool} failed: {type(exc).__name__}: {exc}")
