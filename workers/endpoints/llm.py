"""The :class:`shared.llm.LLM` port over any OpenAI-compatible ``/v1/chat/completions`` endpoint.

One JSON-mode chat completion per question, at temperature 0: the system message is the
operation's instructions, :data:`shared.llm.SYSTEM_GUARD` and the answer's JSON schema; the
user message is nothing but :func:`shared.llm.delimit` blocks. The answer is parsed from the raw
body here (the installed client accepts broken bodies without complaint), stripped of markdown
fences or a leading ``<think>`` block, and validated against the schema.

Retries follow the embedder's policy (``workers.endpoints.embedders.openai_compat``): 429, 5xx, timeouts
and connection failures, exponential backoff with jitter, ``Retry-After`` honoured up to the cap.
Other 4xx and unusable answers are not retried (at temperature 0 the same question gets the same
answer). Every attempt is reported to the usage sink, with the tokens the endpoint reported,
including attempts whose answer then failed to parse. Whatever goes wrong, :meth:`ask` logs it
(operation, model, cause; never the API key or the user content) and returns ``None``, and the
caller keeps its rule-based result.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from collections.abc import Mapping
from typing import Any, TypeVar

import openai
from openai.types.chat import ChatCompletionMessageParam
from pydantic import BaseModel, SecretStr, ValidationError

from infra import tracing
from infra.redact import redact_url, scrub
from shared.llm import LLMOperation, LLMUsage, UsageSink, delimit, system_prompt
from workers.endpoints.call_options import CallOptions, ClientPerProcess, api_key_or_none, verdict
from workers.endpoints.embedders.openai_compat import (
    describe,
    is_transient,
    openai_client,
    retry_after_s,
)

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)

DEFAULT_MODEL = "gpt-4o-mini"
_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\r?\n?(.*?)\r?\n?[ \t]*```\Z", re.DOTALL)
_THINK = re.compile(r"\A<think>.*?</think>", re.DOTALL)


class AnswerError(ValueError):
    """The endpoint answered, but not with a usable answer. The message holds no user content."""


class _Reply:
    """An HTTP 200 answer: its body and the tokens it reports."""

    def __init__(self, body: bytes, latency_ms: float) -> None:
        self.body = body
        self.latency_ms = latency_ms
        self.payload: Any = None
        with contextlib.suppress(ValueError):  # JSONDecodeError and UnicodeDecodeError
            self.payload = json.loads(body)
        usage = self.payload.get("usage") if isinstance(self.payload, dict) else None
        self.prompt_tokens = _count(usage, "prompt_tokens")
        self.completion_tokens = _count(usage, "completion_tokens")


class OpenAIJsonLLM:
    """Structured answers from an OpenAI-compatible chat endpoint, one model per operation.
    Building it opens no connection (``ClientPerProcess``); the key is never logged.
    """

    def __init__(
        self,
        base_url: str,
        api_key: SecretStr | str | None,
        models: Mapping[LLMOperation, str],
        timeout_s: float,
        max_attempts: int = 4,
        usage_sink: UsageSink | None = None,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 10.0,
        *,
        max_output_tokens: int | None = None,
    ) -> None:
        if not base_url:
            raise ValueError("base_url is required")
        missing = [op.value for op in LLMOperation if not models.get(op)]
        if missing:
            raise ValueError(f"no model configured for operation(s): {', '.join(missing)}")
        self._call = CallOptions(timeout_s, max_attempts, backoff_initial_s, backoff_max_s)
        if max_output_tokens is not None and max_output_tokens < 1:
            raise ValueError(f"max_output_tokens must be >= 1, got {max_output_tokens}")
        self._base_url = base_url
        self._api_key = api_key_or_none(api_key)
        self._models = {op: models[op] for op in LLMOperation}
        self._usage_sink = usage_sink
        self._max_output_tokens = max_output_tokens
        self._where = f"LLM endpoint {redact_url(base_url)}"
        self._client = ClientPerProcess(lambda: openai_client(base_url, self._api_key, self._call.timeout_s))

    def __repr__(self) -> str:
        models = {op.value: model for op, model in self._models.items()}
        return f"OpenAIJsonLLM(base_url={redact_url(self._base_url)!r}, models={models!r})"

    @property
    def models(self) -> Mapping[LLMOperation, str]:
        return dict(self._models)

    def ask(
        self, operation: LLMOperation, instructions: str, data: Mapping[str, str], schema: type[T]
    ) -> T | None:
        operation = LLMOperation(operation)
        model = self._models[operation]
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": system_prompt(instructions, schema)},
            {"role": "user", "content": delimit(data)},
        ]
        what = f"{self._where}: {operation.value} with model {model!r}"
        retrying = self._call.retrying(
            is_transient, retry_after_s, self._call.log_retries(log, what, self._describe)
        )
        try:
            reply: _Reply = retrying(self._attempt, operation, model, messages)
        except openai.APIError as exc:
            ended = verdict(retrying, is_transient(exc))
            log.warning("%s %s: %s; falling back to rules", what, ended, self._describe(exc))
            return None
        except Exception as exc:  # a failure the client did not wrap: still only a fallback
            log.warning("%s failed unexpectedly (%s); falling back to rules", what, type(exc).__name__)
            return None
        try:
            answer = parse_answer(reply.payload, schema)
        except AnswerError as exc:
            error = self._scrub(str(exc))
            self._record(operation, model, reply, ok=False, error=error)
            log.warning("%s answered unusably: %s; falling back to rules", what, error)
            return None
        self._record(operation, model, reply, ok=True, error=None)
        return answer

    # -- internals ------------------------------------------------------------------------------

    def _attempt(
        self, operation: LLMOperation, model: str, messages: list[ChatCompletionMessageParam]
    ) -> _Reply:
        """One request. Failed requests are recorded here; answered ones once they are parsed."""
        started = time.perf_counter()
        traced = (
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": model,
                "gen_ai.request.temperature": 0,
                "cuemem.llm.operation": operation.value,
            }
            if tracing.enabled()
            else None
        )
        with tracing.span(f"chat {model}", traced, tracing.CLIENT) as current:
            reply = self._request(operation, model, messages, started)
            tracing.set_attributes(
                current,
                {
                    "gen_ai.usage.input_tokens": reply.prompt_tokens,
                    "gen_ai.usage.output_tokens": reply.completion_tokens,
                },
            )
        return reply

    def _request(
        self, operation: LLMOperation, model: str, messages: list[ChatCompletionMessageParam], started: float
    ) -> _Reply:
        try:
            raw = self._client.get().chat.completions.with_raw_response.create(
                model=model,
                messages=messages,
                response_format={"type": "json_object"},
                temperature=0,
                max_tokens=openai.omit if self._max_output_tokens is None else self._max_output_tokens,
            )
            body = bytes(raw.content)
        except Exception as exc:
            latency_ms = (time.perf_counter() - started) * 1000
            error = self._describe(exc) if isinstance(exc, openai.APIError) else type(exc).__name__
            self._emit(LLMUsage(operation, model, 0, 0, False, error, latency_ms))
            raise
        return _Reply(body, (time.perf_counter() - started) * 1000)

    def _record(
        self, operation: LLMOperation, model: str, reply: _Reply, *, ok: bool, error: str | None
    ) -> None:
        usage = LLMUsage(
            operation, model, reply.prompt_tokens, reply.completion_tokens, ok, error, reply.latency_ms
        )
        self._emit(usage)

    def _emit(self, usage: LLMUsage) -> None:
        if self._usage_sink is None:
            return
        try:
            self._usage_sink.record(usage)
        except Exception as exc:  # accounting must never cost the answer
            log.warning(
                "%s: could not record usage of %s (%s)", self._where, usage.operation, type(exc).__name__
            )

    def _scrub(self, text: str) -> str:
        """``text`` with the API key masked, should a server have echoed it in an error."""
        return scrub(text, self._api_key)

    def _describe(self, exc: BaseException) -> str:
        """Why a call failed, with the key masked should the server have echoed it."""
        return self._scrub(describe(exc, self._call.timeout_s))


def parse_answer(payload: Any, schema: type[T]) -> T:
    """The validated answer in a chat completion body (already JSON-decoded), or :class:`AnswerError`.

    ``payload`` is ``None`` when the body was not JSON. Error messages name what is wrong
    (field paths, JSON error positions) but never repeat the content, which may echo user text.
    """
    if payload is None:
        raise AnswerError("response body is not valid JSON")
    choices = payload.get("choices") if isinstance(payload, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise AnswerError("response JSON has no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise AnswerError("first choice has no message")
    if message.get("refusal"):
        raise AnswerError("the model refused to answer")
    content = message.get("content")
    if not isinstance(content, str) or not content.strip():
        raise AnswerError("the message has no content")
    truncated = " (answer cut off: finish_reason length)" if choice.get("finish_reason") == "length" else ""
    text = unwrap(content)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AnswerError(f"content is not valid JSON ({exc.msg} at char {exc.pos}){truncated}") from None
    if not isinstance(value, dict):
        raise AnswerError(f"content is JSON {type(value).__name__}, not an object{truncated}")
    try:
        return schema.model_validate(value)
    except ValidationError as exc:
        problems = exc.errors(include_url=False, include_input=False, include_context=False)
        shown = "; ".join(f"{_loc(p['loc'])}: {p['msg']}" for p in problems[:3])
        more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
        raise AnswerError(f"content does not match {schema.__name__}: {shown}{more}") from None


def unwrap(content: str) -> str:
    """``content`` without a leading ``<think>...</think>`` block or surrounding markdown fences."""
    text = content.strip().lstrip("\ufeff")
    text = _THINK.sub("", text, count=1).strip()
    fenced = _FENCE.match(text)
    return fenced.group(1).strip() if fenced else text


def _loc(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(answer)"


def _count(usage: Any, name: str) -> int:
    value = usage.get(name) if isinstance(usage, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return 0


def build_llm(settings: Any, usage_sink: UsageSink | None = None) -> OpenAIJsonLLM | None:
    """The LLM ``settings`` configure, or ``None`` (the rule-based path) without ``llm_base_url``.

    Reads ``llm_base_url``, ``llm_api_key``, ``llm_model`` (default for every operation),
    ``llm_model_<operation>`` (per-operation override), ``llm_timeout_s`` and
    ``llm_max_attempts``; nothing is contacted until the first question.
    """
    base_url = getattr(settings, "llm_base_url", None)
    if not base_url:
        return None
    default_model = getattr(settings, "llm_model", None) or DEFAULT_MODEL
    models = {op: getattr(settings, f"llm_model_{op.value}", None) or default_model for op in LLMOperation}
    return OpenAIJsonLLM(
        base_url=base_url,
        api_key=getattr(settings, "llm_api_key", None),
        models=models,
        timeout_s=float(getattr(settings, "llm_timeout_s", 20.0)),
        max_attempts=int(getattr(settings, "llm_max_attempts", 4)),
        usage_sink=usage_sink,
    )
