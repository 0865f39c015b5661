"""API keys: one tenant each, shown once, stored only as a hash.

A key reads ``cm_<prefix>_<secret>``. The prefix (8 hex characters) is not secret: it is stored in
clear to find the row and to let an operator recognise a key in ``cuemem keys list``. The secret
is 32 random bytes, so a plain SHA-256 of the whole key is enough (no slow KDF: nothing to
brute-force in 256 bits), and the comparison is constant-time (``hmac.compare_digest``).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from shared.public import public_fields

KEY_PREFIX = "cm_"
_KEY_SHAPE = re.compile(r"^cm_([0-9a-f]{8})_([A-Za-z0-9_-]{20,200})$")
MAX_NAME_CHARS = 200


@dataclass(frozen=True)
class ApiKey:
    """A stored key, without its secret."""

    id: str
    tenant_id: str
    name: str
    prefix: str
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def to_public(self) -> dict[str, Any]:
        return public_fields(self, "id tenant_id name prefix created_at revoked_at")


@dataclass(frozen=True)
class IssuedKey:
    """A new key: the record to store, its hash, and the key itself (shown once, never stored)."""

    record: ApiKey
    key_hash: str
    key: str


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def issue_key(
    tenant_id: str, name: str, now: datetime, token: Callable[[int], str] = secrets.token_urlsafe
) -> IssuedKey:
    prefix = secrets.token_hex(4)
    key = f"{KEY_PREFIX}{prefix}_{token(32)}"
    record = ApiKey(str(uuid.uuid4()), tenant_id, name, prefix, now)
    return IssuedKey(record, hash_key(key), key)


def key_prefix(key: str) -> str | None:
    """The lookup prefix of a well-formed key, or None (a malformed key never reaches the database)."""
    match = _KEY_SHAPE.match(key)
    return match.group(1) if match else None


def matches(key: str, key_hash: str) -> bool:
    return hmac.compare_digest(hash_key(key), key_hash)


class ApiKeyRepository(Protocol):
    """API keys (``shared/api_keys.py``): records and hashes, never the keys themselves."""

    def add(self, key: ApiKey, key_hash: str) -> None: ...

    def by_prefix(self, prefix: str) -> list[tuple[ApiKey, str]]:
        """Keys with this lookup prefix (normally one), revoked ones included, with their hashes."""

    def list(self, tenant_id: str | None) -> list[ApiKey]: ...

    def revoke(self, key_id: str, at: datetime) -> ApiKey | None:
        """Revoke (once: a second revoke keeps the first time); None for an unknown id."""
