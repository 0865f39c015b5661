"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint.

The official ``openai`` client does the HTTP; its own retries are off (``max_retries=0``) so
that one policy, here, decides what is retried: rate limits (429), server errors (5xx),
timeouts and connection failures, with exponential backoff and jitter and a cap on attempts.
Other 4xx answers are configuration errors (bad key, unknown model, input too long) and fail
at once. Every answer is validated before it can reach the index.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from typing import Any

import openai
from pydantic import SecretStr

from infra.redact import redact_url, scrub
from workers.endpoints.call_options import CallOptions, ClientPerProcess, api_key_or_none, verdict
from workers.endpoints.embedders import EmbeddingError

log = logging.getLogger(__name__)

# Sent when no key is configured: the client insists on one and local servers ignore it.
# Passing it explicitly also keeps the client from silently picking up OPENAI_API_KEY.
PLACEHOLDER_API_KEY = "not-needed"
DEFAULT_BATCH_SIZE = 64


class OpenAIEmbedder:
    """Embeds through an OpenAI-compatible endpoint; ``model_name`` is ``openai:<model>``.
    Building it opens no connection (``ClientPerProcess``); the key is never logged.
    """

    def __init__(
        self,
        base_url: str,
        api_key: SecretStr | str | None,
        model: str,
        dim: int,
        timeout_s: float,
        max_attempts: int = 5,
        *,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 20.0,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if not base_url:
            raise ValueError("base_url is required")
        if not model:
            raise ValueError("model is required")
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self._call = CallOptions(timeout_s, max_attempts, backoff_initial_s, backoff_max_s)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self._base_url = base_url
        self._api_key = api_key_or_none(api_key)
        self._model = model
        self._dim = dim
        self._batch_size = batch_size
        self._where = f"embedding endpoint {redact_url(base_url)} (model {model!r})"
        self._client = ClientPerProcess(lambda: openai_client(base_url, self._api_key, self._call.timeout_s))

    def __repr__(self) -> str:
        url = redact_url(self._base_url)
        return f"OpenAIEmbedder(base_url={url!r}, model={self._model!r}, dim={self._dim})"

    @property
    def model_name(self) -> str:
        return f"openai:{self._model}"

    @property
    def dim(self) -> int:
        return self._dim

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        if isinstance(texts, str):
            raise TypeError("embed_passages takes a sequence of texts, not one str")
        out: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            out.extend(self._embed_batch(list(texts[start : start + self._batch_size])))
        return out

    def embed_query(self, text: str) -> list[float]:
        # OpenAI-style endpoints take no query/passage distinction; models that want a prefix
        # are expected to be served behind an endpoint that adds it.
        return self._embed_batch([text])[0]

    # -- internals ----------------------------------------------------------------------------

    def _post(self, texts: list[str]) -> bytes:
        raw = self._client.get().embeddings.with_raw_response.create(
            model=self._model,
            input=texts,
            # Floats are what every compatible server supports; base64 (the client's default)
            # is not universal.
            encoding_format="float",
        )
        # Parsed here rather than by the client, which accepts malformed bodies without complaint.
        return bytes(raw.content)

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        retrying = self._call.retrying(
            is_transient, retry_after_s, self._call.log_retries(log, self._where, self._describe)
        )
        try:
            content = retrying(self._post, texts)
        except openai.APIError as exc:
            # `from None`: the openai error's own text holds the server's whole body, which may
            # quote the key (OpenAI's 401 does); chained, it reached the worker log's traceback.
            transient = is_transient(exc)
            message = f"{self._where} {verdict(retrying, transient)}: {self._describe(exc)}"
            raise EmbeddingError(message, transient=transient) from None
        try:
            return parse_embeddings(content, expected=len(texts), dim=self._dim)
        except EmbeddingError as exc:
            raise EmbeddingError(f"{self._where} answered unusably: {exc}") from None

    def _describe(self, exc: BaseException) -> str:
        """Why a call failed, with the key masked should the server have echoed it."""
        return scrub(describe(exc, self._call.timeout_s), self._api_key)


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: timeouts, connection failures, 429 and 5xx. Other 4xx are not."""
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


def openai_client(base_url: str, api_key: SecretStr | None, timeout_s: float) -> openai.OpenAI:
    """The SDK's client for an OpenAI-compatible endpoint; its own retries off (ours decide)."""
    key = api_key.get_secret_value() if api_key else PLACEHOLDER_API_KEY
    return openai.OpenAI(base_url=base_url, api_key=key, timeout=timeout_s, max_retries=0)


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms`` or numeric ``Retry-After``)."""
    if not isinstance(exc, openai.APIStatusError):
        return None
    headers = exc.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue  # an HTTP date: rare enough to fall back to plain backoff
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    return None


def describe(exc: BaseException, timeout_s: float) -> str:
    """A short, secret-free account of a failed request."""
    if isinstance(exc, openai.APITimeoutError):
        return f"no answer within {timeout_s:g}s"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        return f"connection failed ({type(cause).__name__ if cause else 'unknown cause'})"
    if isinstance(exc, openai.APIStatusError):
        message = _server_message(exc.body)
        return f"HTTP {exc.status_code}" + (f": {message}" if message else "")
    return type(exc).__name__


def _server_message(body: object) -> str:
    # OpenAI-style errors are {"error": {"message": ...}}; others vary, so show a short excerpt.
    if isinstance(body, dict):
        err = body.get("error", body)
        text = err.get("message") if isinstance(err, dict) else err
        body = text if text is not None else body
    text = str(body) if body is not None else ""
    return text[:200]


def parse_embeddings(content: bytes, *, expected: int, dim: int) -> list[list[float]]:
    """Vectors from an embeddings response body, in input order, or :class:`EmbeddingError`.

    Checks: valid JSON with a ``data`` list, one vector per input, indices (when given) a
    permutation of the inputs, every vector ``dim`` long and made of finite numbers.
    """
    try:
        payload: Any = json.loads(content)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        excerpt = content[:80].decode("utf-8", "replace")
        raise EmbeddingError(f"response body is not valid JSON ({exc}); body starts {excerpt!r}") from None
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        raise EmbeddingError("response JSON has no 'data' list")
    if len(data) != expected:
        raise EmbeddingError(f"got {len(data)} vectors for {expected} inputs")
    if not all(isinstance(item, dict) for item in data):
        raise EmbeddingError("'data' holds something other than embedding objects")
    indices = [item.get("index") for item in data]
    if any(i is not None for i in indices):
        if sorted(i if _is_int(i) else -1 for i in indices) != list(range(expected)):
            raise EmbeddingError(f"vector indices {indices} are not 0..{expected - 1}")
        data = sorted(data, key=lambda item: item["index"])
    vectors: list[list[float]] = []
    for pos, item in enumerate(data):
        vec = item.get("embedding")
        if not isinstance(vec, list):
            raise EmbeddingError(f"vector {pos} is not a list of numbers (got {type(vec).__name__})")
        if len(vec) != dim:
            raise EmbeddingError(f"vector {pos} has {len(vec)} dimensions, expected {dim}")
        row: list[float] = []
        for x in vec:
            if isinstance(x, bool) or not isinstance(x, int | float):
                raise EmbeddingError(f"vector {pos} holds {x!r}, not a number")
            try:
                value = float(x)
            except OverflowError:  # an integer too large for a float
                value = math.inf
            if not math.isfinite(value):
                raise EmbeddingError(f"vector {pos} holds {x!r}, not a finite number")
            row.append(value)
        vectors.append(row)
    return vectors


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
