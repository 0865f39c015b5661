"""What every model endpoint adapter (embedder, LLM, reranker) checks of its call options, and how
it holds its key.

Kept apart from the adapters, like ``redact``, so that a light one (the reranker) does not import
the openai SDK to use it."""

from __future__ import annotations

from pydantic import SecretStr


def check_call_options(
    *, timeout_s: float, max_attempts: int, backoff_initial_s: float, backoff_max_s: float
) -> None:
    """Raise ValueError, naming the option, for a timeout, attempt count or backoff that cannot work."""
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
    if backoff_initial_s < 0 or backoff_max_s < backoff_initial_s:
        raise ValueError("need 0 <= backoff_initial_s <= backoff_max_s")


def api_key_or_none(api_key: SecretStr | str | None) -> SecretStr | None:
    """The key as a SecretStr, or None when it is unset or empty (no Authorization header then)."""
    if isinstance(api_key, str):
        api_key = SecretStr(api_key)
    return api_key if api_key is not None and api_key.get_secret_value() else None
