"""The one error shape of the API, and the mapping from domain exceptions to it.

Every error answers ``{"error": {"code", "message", "fields": [{"field", "problem"}]}}`` with a
4xx status that fits (503 when a backing service is down); bad input never gives a 500.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from shared.erasure import ErasureFailed
from shared.events import FieldError, InvalidEvent, InvalidInput
from shared.lifecycle.curation import MemoryNotFound, Refused
from shared.ports import EmbeddingModelMismatch, IndexUnavailable
from shared.transfer import ImportRefused

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid_input",
    503: "unavailable",
}


class ApiError(Exception):
    def __init__(
        self, status: int, message: str, *, code: str | None = None, fields: Sequence[FieldError] = ()
    ):
        self.status = status
        self.code = code or _CODES.get(status, "error")
        self.message = message
        self.fields = list(fields)
        super().__init__(message)


def printable(text: str) -> str:
    """``text`` that can be written as UTF-8: a lone surrogate of the input (JSON allows
    ``"\\ud800"``, UTF-8 does not) shown as its escape. A field name echoed from a body may hold
    one, and an answer that cannot be encoded was a 500 after a batch had been published."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def error_body(code: str, message: str, fields: Iterable[FieldError] = ()) -> dict[str, Any]:
    return {
        "error": {
            "code": code,
            "message": printable(message),
            "fields": [{"field": printable(f.field), "problem": printable(f.problem)} for f in fields],
        }
    }


def error_response(
    status: int,
    code: str,
    message: str,
    fields: Iterable[FieldError] = (),
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(error_body(code, message, fields), status_code=status, headers=headers)


def _field_name(loc: Sequence[Any]) -> str:
    """("body", "events", 3, "role") -> "events[3].role"; ("query", "limit") -> "limit"."""
    parts = list(loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc)
    if not parts:
        return "body"
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def validation_fields(errors: Sequence[Any]) -> list[FieldError]:
    fields = []
    for err in errors:
        if err.get("type") == "json_invalid":
            # FastAPI puts the byte offset where a field name goes: ("body", 12).
            loc = err.get("loc", ())
            at = f" at position {loc[1]}" if len(loc) > 1 else ""
            reason = (err.get("ctx") or {}).get("error", "JSON decode error")
            fields.append(FieldError("body", f"is not valid JSON: {reason}{at}"))
            continue
        name = _field_name(err.get("loc", ()))
        if err.get("type") == "extra_forbidden":
            problem = (
                "is set by the API key's tenant; a request never names one"
                if name.endswith("tenant_id")
                else "is not a known field"
            )
        else:
            problem = str(err.get("msg", "is invalid"))
        fields.append(FieldError(name, problem))
    return fields


def install(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return error_response(exc.status, exc.code, exc.message, exc.fields, headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            fields = validation_fields(errors)
            return error_response(400, "malformed_json", f"the body {fields[0].problem}", fields)
        fields = validation_fields(errors)
        return error_response(422, "invalid_input", "; ".join(str(f) for f in fields), fields)

    @app.exception_handler(InvalidEvent)
    async def invalid_event(_: Request, exc: InvalidEvent) -> JSONResponse:
        return error_response(422, "invalid_input", str(exc), exc.errors)

    @app.exception_handler(InvalidInput)
    async def invalid_input(_: Request, exc: InvalidInput) -> JSONResponse:
        return error_response(422, "invalid_input", str(exc), exc.errors)

    @app.exception_handler(MemoryNotFound)
    async def not_found(_: Request, exc: MemoryNotFound) -> JSONResponse:
        return error_response(404, "not_found", str(exc), [FieldError("memory_id", "no such memory")])

    @app.exception_handler(Refused)
    async def refused(_: Request, exc: Refused) -> JSONResponse:
        return error_response(409, "conflict", str(exc))

    @app.exception_handler(ImportRefused)
    async def import_refused(_: Request, exc: ImportRefused) -> JSONResponse:
        field = f"line {exc.line}" if exc.line else "body"
        return error_response(
            422, "invalid_input", f"{exc}; nothing was imported", [FieldError(field, exc.problem)]
        )

    @app.exception_handler(ErasureFailed)
    async def erasure_failed(_: Request, exc: ErasureFailed) -> JSONResponse:
        return error_response(409, "erasure_failed", f"{exc}; nothing of it was committed: try again")

    @app.exception_handler(IndexUnavailable)
    async def index_down(_: Request, exc: IndexUnavailable) -> JSONResponse:
        return error_response(503, "index_unavailable", str(exc))

    @app.exception_handler(EmbeddingModelMismatch)
    async def model_mismatch(_: Request, exc: EmbeddingModelMismatch) -> JSONResponse:
        return error_response(503, "embedding_model_mismatch", str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _CODES.get(exc.status_code, "error")
        message, fields = str(exc.detail), http_error_fields(request, exc)
        if exc.status_code == 400 and fields and fields[0].field == "body":
            message = f"the body could not be parsed: it {fields[0].problem}"
        return error_response(exc.status_code, code, message, fields, getattr(exc, "headers", None))


def http_error_fields(request: Request, exc: StarletteHTTPException) -> list[FieldError]:
    """The field an HTTP-level error is about, so that every 4xx names one: the body (too large, or
    not parsable: FastAPI answers a body that is not UTF-8 or nested too deep for the JSON parser
    with a bare 400, the parser's exception as its cause), the method, or the path."""
    if exc.status_code == 413:
        return [FieldError("body", str(exc.detail))]
    if exc.status_code == 400:
        cause = exc.__cause__
        if isinstance(cause, UnicodeDecodeError):
            return [FieldError("body", f"is not UTF-8 (byte {cause.start})")]
        if isinstance(cause, RecursionError):
            return [FieldError("body", "is nested too deeply")]
        if cause is not None:
            return [FieldError("body", f"is not valid JSON ({type(cause).__name__})")]
        return [FieldError("body", str(exc.detail))]
    if exc.status_code == 405:
        return [FieldError("method", f"{request.method} is not allowed here")]
    if exc.status_code == 404:
        return [FieldError("path", "no such route or resource")]
    return []


def internal_error() -> JSONResponse:
    """A 500: service/http/app.py's RequestMiddleware logs the exception with the request id."""
    return error_response(500, "internal", "internal error; the server log has the details")
