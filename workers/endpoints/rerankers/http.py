"""A cross-encoder behind an HTTP rerank endpoint: Text-Embeddings-Inference, Jina, Cohere and
the many servers that copy them.

Request: ``POST {url}/rerank`` (``url`` may already end in ``/rerank``) with

* no model configured (TEI serves one model): ``{"query": q, "texts": [...]}``;
* a model configured (Jina, Cohere): ``{"model": m, "query": q, "documents": [...]}``.

Response, either shape: ``[{"index": i, "score": s}, ...]`` (TEI) or
``{"results": [{"index": i, "relevance_score": s}, ...]}`` (Jina, Cohere). Results may come sorted
by score; they are put back in document order by ``index``, which must cover every document once.

Rate limits (429), server errors (5xx), timeouts and connection failures are retried with
exponential backoff and jitter (honouring ``Retry-After``), up to ``max_attempts``; other 4xx
fail at once. The API key comes from the environment (``CUEMEM_RERANK_API_KEY``) and is sent as a
bearer token, never logged.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from typing import Any

import httpx
from pydantic import SecretStr

from infra.redact import redact_url, scrub
from workers.endpoints.call_options import CallOptions, ClientPerProcess, api_key_or_none, verdict
from workers.endpoints.rerankers import RerankError

log = logging.getLogger(__name__)


class _StatusError(Exception):
    """A non-2xx answer, kept apart from httpx's own errors so the retry policy sees the code."""

    def __init__(self, status: int, headers: httpx.Headers, body: bytes) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.headers = headers
        self.body = body


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, httpx.TransportError):  # timeouts, connection refused or reset
        return True
    return isinstance(exc, _StatusError) and (exc.status == 429 or exc.status >= 500)


def rerank_endpoint(url: str) -> str:
    """``{url}/rerank``, unless ``url`` already names the rerank route."""
    base = url.rstrip("/")
    return base if base.endswith("/rerank") else f"{base}/rerank"


class HttpReranker:
    """Scores documents against a query through a rerank endpoint (see the module docstring)."""

    def __init__(
        self,
        url: str,
        api_key: SecretStr | str | None = None,
        model: str | None = None,
        timeout_s: float = 5.0,
        max_attempts: int = 3,
        *,
        backoff_initial_s: float = 0.2,
        backoff_max_s: float = 2.0,
    ) -> None:
        if not url:
            raise ValueError("url is required")
        self._call = CallOptions(timeout_s, max_attempts, backoff_initial_s, backoff_max_s)
        self._endpoint = rerank_endpoint(url)
        self._api_key = api_key_or_none(api_key)
        self._model = model or None
        self._where = f"reranker {redact_url(self._endpoint)}" + (f" (model {model!r})" if model else "")
        self._client = ClientPerProcess(self._new_client)

    def __repr__(self) -> str:
        return f"HttpReranker(url={redact_url(self._endpoint)!r}, model={self._model!r})"

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """One score per document, in document order; :class:`RerankError` on failure."""
        if isinstance(documents, str):
            raise TypeError("rerank takes a sequence of documents, not one str")
        if not documents:
            return []
        body: dict[str, Any] = {"query": query}
        if self._model:
            body |= {"model": self._model, "documents": list(documents)}
        else:
            body["texts"] = list(documents)
        retrying = self._call.retrying(
            _is_transient, _retry_after_of, self._call.log_retries(log, self._where, self._describe)
        )
        try:
            content = retrying(self._post, body)
        except (httpx.TransportError, _StatusError) as exc:
            transient = _is_transient(exc)
            message = f"{self._where} {verdict(retrying, transient)}: {self._describe(exc)}"
            raise RerankError(message, transient=transient) from None
        try:
            return parse_scores(content, expected=len(documents))
        except RerankError as exc:
            raise RerankError(f"{self._where} answered unusably: {exc}") from None

    def close(self) -> None:
        client = self._client.take()
        if client is not None:
            client.close()

    # -- internals ----------------------------------------------------------------------------

    def _new_client(self) -> httpx.Client:
        headers = {"Accept": "application/json"}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key.get_secret_value()}"
        return httpx.Client(timeout=self._call.timeout_s, headers=headers)

    def _post(self, body: dict[str, Any]) -> bytes:
        response = self._client.get().post(self._endpoint, json=body)
        if response.status_code >= 300:
            raise _StatusError(response.status_code, response.headers, response.content)
        return response.content

    def _describe(self, exc: BaseException) -> str:
        if isinstance(exc, httpx.TimeoutException):
            return f"no answer within {self._call.timeout_s:g}s"
        if isinstance(exc, httpx.TransportError):
            return f"connection failed ({type(exc).__name__})"
        if isinstance(exc, _StatusError):
            # Scrubbed: a refusing server may quote the key, and this text reaches recall traces.
            excerpt = scrub(exc.body[:2000].decode("utf-8", "replace"), self._api_key)[:200].strip()
            return f"HTTP {exc.status}" + (f": {excerpt}" if excerpt else "")
        return type(exc).__name__


def _retry_after_of(exc: BaseException) -> float | None:
    return _retry_after_s(exc.headers) if isinstance(exc, _StatusError) else None


def _retry_after_s(headers: httpx.Headers) -> float | None:
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: rare enough to fall back to plain backoff
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def parse_scores(content: bytes, *, expected: int) -> list[float]:
    """Scores in document order from either response shape, or :class:`RerankError`."""
    try:
        payload: Any = json.loads(content)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        excerpt = content[:80].decode("utf-8", "replace")
        raise RerankError(f"response body is not valid JSON ({exc}); body starts {excerpt!r}") from None
    if isinstance(payload, dict) and isinstance(payload.get("results"), list):
        results, score_key = payload["results"], "relevance_score"  # Jina, Cohere
    elif isinstance(payload, list):
        results, score_key = payload, "score"  # TEI
    else:
        raise RerankError("expected a list of {index, score} or an object with a 'results' list")
    if len(results) != expected:
        raise RerankError(f"got {len(results)} results for {expected} documents")
    scores: list[float | None] = [None] * expected
    for pos, item in enumerate(results):
        if not isinstance(item, dict):
            raise RerankError(f"result {pos} is not an object")
        index, score = item.get("index"), item.get(score_key)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < expected:
            raise RerankError(f"result {pos} has index {index!r}, not 0..{expected - 1}")
        if scores[index] is not None:
            raise RerankError(f"index {index} appears twice")
        if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
            raise RerankError(f"result {pos} has {score_key} {score!r}, not a finite number")
        scores[index] = float(score)
    return [s for s in scores if s is not None]
