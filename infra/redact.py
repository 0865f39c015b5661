"""Masking secrets in text that leaves the process (logs, dead letters, recall traces), and
endpoint URLs without their credentials.

Kept apart from the adapters so that a light one (the reranker) does not import the openai SDK
to use it, and in the I/O commons so that any process's code may mask a URL it logs."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from pydantic import SecretStr


def scrub(text: str, secret: SecretStr | None) -> str:
    """``text`` with ``secret`` masked: servers echo the key they were sent in error messages
    (OpenAI's 401 quotes it), and those messages go to logs, dead letters and recall traces."""
    if secret is not None:
        value = secret.get_secret_value()
        if len(value) >= 4:
            text = text.replace(value, "***")
    return text


def redact_url(url: str) -> str:
    """``url`` without credentials or query string, for logs and error messages."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path, "", ""))
    except ValueError:
        return "<unparseable url>"
