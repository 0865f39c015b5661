"""Times as a person reads them: in the user's zone.

Times are stored as instants (UTC in Postgres, ISO instants in the JSON API). A person reads
them in the zone of the user they belong to: the UTC offset the user's latest turn was sent with
(``EventRepository.user_offset``; a user who travels is shown where they wrote from last), the
rule the inspector's timeline follows too (``service/http/static/zones.js``). Pure: no clock, no
I/O.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone


def user_zone(offset_s: int | None) -> timezone:
    """The zone of a user whose latest turn had this offset (UTC when they have none)."""
    return UTC if not offset_s else timezone(timedelta(seconds=offset_s))


def zone_name(offset_s: int | None) -> str:
    """ "UTC+08:00", "UTC-05:00", or "UTC"."""
    if not offset_s:
        return "UTC"
    sign = "-" if offset_s < 0 else "+"
    minutes = abs(offset_s) // 60
    return f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def local_time(at: datetime | str | None, offset_s: int | None) -> str:
    """``at`` (an aware datetime or an ISO time) as the user reads it: "2026-10-14 15:00", in
    their zone (``offset_s``); "—" for none."""
    if at is None or at == "":
        return "—"
    when = datetime.fromisoformat(at) if isinstance(at, str) else at
    return when.astimezone(user_zone(offset_s)).strftime("%Y-%m-%d %H:%M")
