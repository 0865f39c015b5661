"""Masking secrets in text that leaves the process (logs, dead letters, recall traces).

Kept apart from the adapters so that a light one (the reranker) does not import the openai SDK
to use it."""

from __future__ import annotations

from pydantic import SecretStr


def scrub(text: str, secret: SecretStr | None) -> str:
    """``text`` with ``secret`` masked: servers echo the key they were sent in error messages
    (OpenAI's 401 quotes it), and those messages go to logs, dead letters and recall traces."""
    if secret is not None:
        value = secret.get_secret_value()
        if len(value) >= 4:
            text = text.replace(value, "***")
    return text
