"""Per-user Redis keys written before the injective encoding (``infra/redis_layout.py``), renamed.

Before it, a user's keys carried the raw ids, ``{<tenant>:<user>}`` and a raw session id, so tenant
``ac`` with user ``me:bob`` and tenant ``ac:me`` with user ``bob`` shared one key. ``upgrade_keys``
walks the seq counters, working memories and session lists once and moves every old key it can
attribute to the key the encoding gives it:

- a tag with exactly one ``:`` names one (tenant, user): the key is renamed, or merged into a key
  already under the new name (a seq counter keeps the larger value, a working memory or session
  list the union, with the longer time to live), then deleted. Nothing is lost: the counter
  continues where it was, the turns stay readable;
- a tag with more than one ``:`` could be either user's (or both users' turns in one key): it is
  left where it is, under a name nothing reads any more, counted and logged, never given to
  either user. Its working memory and session list expire on their time to live; a stale seq
  counter is never read again (the recorder renumbers should a seq be handed out twice), and
  either user's privacy delete deletes it (``RedisUserKeys``, by ``legacy_pattern``).

Safe to run any number of times and by several starters at once: a key already in the new form
is left alone, and each move is one Lua script (the old and the new key share the user's tag, so
one cluster slot, whenever the ids are valid ones). Run by ``cuemem migrate`` and every embedded
start, after the Postgres schema (docs/RELIABILITY.md, "Redis key encoding").
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from urllib.parse import unquote

import redis

from infra import redis_layout

log = logging.getLogger(__name__)

# KEYS: the old key, the new key. Returns 0: the old key is gone (another starter moved it);
# 1: renamed; 2: merged into an existing new key; -1: not a counter or a sorted set, left.
_MOVE = """
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then return 0 end
local existed = redis.call('EXISTS', KEYS[2])
if kind == 'string' then
  local old = redis.call('GET', KEYS[1])
  if tonumber(old) == nil then return -1 end
  local new = tonumber(redis.call('GET', KEYS[2]) or '0')
  if new == nil then return -1 end
  if tonumber(old) > new then redis.call('SET', KEYS[2], old) end
elseif kind == 'zset' then
  local ttl_old = redis.call('PTTL', KEYS[1])
  local ttl_new = redis.call('PTTL', KEYS[2])
  redis.call('ZUNIONSTORE', KEYS[2], 2, KEYS[2], KEYS[1], 'AGGREGATE', 'MAX')
  if ttl_old ~= -1 and ttl_new ~= -1 then
    local ttl = math.max(ttl_old, ttl_new)
    if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
  end
else
  return -1
end
redis.call('DEL', KEYS[1])
return 1 + existed
"""

_GLOB = re.compile(r"([*?\[\]\\])")


def _glob_escaped(value: str) -> str:
    return _GLOB.sub(r"\\\1", value)


def legacy_pattern(family: str, tenant_id: str, user_id: str) -> str:
    """``SCAN MATCH`` pattern of the keys written for this user before the encoding (raw ids in
    the tag). Where an id holds ``:`` such a key may also be another user's."""
    tail = ":*" if family in redis_layout.CONVERSATION_FAMILIES else ""
    return f"{redis_layout.PREFIX}:{family}:{{{_glob_escaped(tenant_id)}:{_glob_escaped(user_id)}}}{tail}"


@dataclass
class KeyUpgrade:
    renamed: int = 0
    merged: int = 0
    ambiguous: list[str] = field(default_factory=list)  # left: could be either of two users'
    left: list[str] = field(default_factory=list)  # left: not a key this product writes

    def to_public(self) -> dict[str, object]:
        return {
            "renamed": self.renamed,
            "merged": self.merged,
            "ambiguous": len(self.ambiguous),
            "left": len(self.left),
        }


def _is_encoded(value: str) -> bool:
    return redis_layout.part(unquote(value, errors="surrogatepass")) == value


def _target(family: str, key: str) -> tuple[str | None, str]:
    """The new key of an old one (None when there is none to give), and why not."""
    rest = key[len(f"{redis_layout.PREFIX}:{family}:") :]
    close = rest.find("}")
    if not rest.startswith("{") or close < 0:
        return None, "left"
    tag, tail = rest[1:close], rest[close + 1 :]
    session: str | None = None
    if family in redis_layout.CONVERSATION_FAMILIES:
        if not tail.startswith(":"):
            return None, "left"
        session = tail[1:]
    elif tail:
        return None, "left"
    ids = tag.split(":")
    if len(ids) > 2:
        return None, "ambiguous"
    if len(ids) < 2:
        return None, "left"
    tenant, user = ids
    if all(_is_encoded(v) for v in (tenant, user, *([session] if session is not None else []))):
        return None, "current"
    return redis_layout.family_key(family, tenant, user, session), "moved"


def upgrade_keys(client: redis.Redis) -> KeyUpgrade:
    """Move every old-form per-user key to its new name (see the module's docstring)."""
    move = client.register_script(_MOVE)
    report = KeyUpgrade()
    for family in redis_layout.USER_FAMILIES:
        for raw in client.scan_iter(match=f"{redis_layout.PREFIX}:{family}:{{*", count=1000):
            key = raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else str(raw)
            new, why = _target(family, key)
            if new is None or new == key:
                if why == "ambiguous":
                    report.ambiguous.append(key)
                elif why == "left":
                    report.left.append(key)
                continue
            try:
                done = int(move(keys=[raw, new]))
            except redis.exceptions.ResponseError as exc:  # e.g. two cluster slots: left as is
                log.warning("Redis key %r not moved to %r: %s", key, new, exc)
                report.left.append(key)
                continue
            if done == 1:
                report.renamed += 1
            elif done == 2:
                report.merged += 1
            elif done < 0:
                report.left.append(key)
    if report.ambiguous:
        log.warning(
            "%d Redis keys of the old form name two possible users (an id holds ':'): left unread "
            "under their old names, e.g. %s (docs/RELIABILITY.md, 'Redis key encoding')",
            len(report.ambiguous), report.ambiguous[:3],
        )  # fmt: skip
    if report.renamed or report.merged:
        log.info("Redis keys moved to the injective encoding: %s", report.to_public())
    return report
