"""Stage 1, the deterministic answer: an exact key, and the memories and turns sharing cues with
the query.

An exact key (a memory id, an event id) answers alone. Otherwise the user's memories that share
cue keys with the query (entities, lexicon tags, keywords) score by those cues, each weighted by
its rarity among the user's memories; a memory of a type the query hints at gains a little; the
conversation's working memory is scored the same way, so a turn published a moment ago is found
before any worker ran (read-your-writes). A second cue hop follows the naming links of the user's
memories ("我儿子叫乐乐"): a query about one side ("我儿子…") also looks up the other ("乐乐"),
its hits scoring ``LINK_FACTOR`` of a direct match. The cue scores are features of the relevance
model (``shared.recall.features``): no cue match answers by itself.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

from shared.events import TurnPublished, is_safe_id
from shared.language.cues import (
    ENTITY_WEIGHT,
    KEYWORD_WEIGHT,
    QueryCues,
    links,
    text_cues,
)
from shared.language.links import LINK_PREFIX
from shared.language.text import keywords
from shared.models import Memory
from shared.ports import WorkingMemory
from shared.recall.request import Candidate, Pool, RecallRequest, memory_item, turn_item
from shared.storage import UnitOfWork

MAX_QUERY_CUES = 16
# A cue held by more of the user's memories than this fetches none of them: the cue query keeps
# the best-scored ``candidates`` of the memories it reads, and of that many holders of one word
# those are no pick by the query but by score alone (the searches find the ones meant). It still
# weighs in the score of every memory a rarer cue fetches. Bounds the rows the query reads, so
# stage 1 stays milliseconds at 1M memories; users below it are untouched.
MAX_CUE_MEMORIES = 2000
TYPE_BOOST = 0.5  # the query hints at the memory's type ("忌口" -> preference)
EXACT_KEY_SCORE = 100.0
# The link hop: a memory reached through a link counts this much of what the same match would
# count were the linked name in the query. Bounded: memories read for links, names followed,
# memories read for the names.
LINK_FACTOR = 0.8
MAX_LINK_SOURCES = 8
MAX_LINKS = 3
MAX_HOP_CANDIDATES = 20
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def exact_key(uow: UnitOfWork, request: RecallRequest) -> list[Candidate]:
    """A query that is a memory id, or an event id (`event:ID` or a bare id a memory cites)."""
    key = request.query.strip()
    if not key or any(ch.isspace() for ch in key) or len(key) > 512:
        return []
    found: list[Memory] = []
    if _UUID.match(key):
        memory = uow.memories.get(request.tenant_id, request.user_id, key.lower())
        if memory is not None and memory.status in request.statuses:
            found.append(memory)
    event_id = key.removeprefix("event:")
    # Every stored event id is in the safe alphabet (``validate_turn`` checks it at every door,
    # imports too): a key outside it names no event, and the read is skipped. A question in Chinese
    # has no space ("我不吃什么？"), so it used to cost nearly every one of them a Postgres read.
    if not found and is_safe_id(event_id):
        found = uow.memories.by_source(request.tenant_id, request.user_id, event_id, request.statuses)
    return [
        Candidate(memory_item(m), EXACT_KEY_SCORE, [f"key:{key}"], paths=["key"], memory=m) for m in found
    ]


def rarity(df: int, total: int) -> float:
    """1 for a cue only one memory holds, falling towards 0 as more of the user's memories hold it."""
    if df <= 1 or total <= 1:
        return 1.0
    return max(math.log1p(total / df) / math.log1p(total), 0.05)


def cue_match(weights: dict[str, float], cues: Iterable[str]) -> tuple[float, list[str]]:
    matched = sorted(set(weights).intersection(cues))
    return sum(weights[c] for c in matched), matched


def turn_cues(turn: TurnPublished) -> tuple[str, ...]:
    """A raw turn's cue keys, as extraction would give the memory made of it."""
    return text_cues(turn.content)


def cue_matches(uow: UnitOfWork, request: RecallRequest, cues: QueryCues) -> tuple[dict[str, float], Pool]:
    """The query's cue weights, and a pool of the user's memories holding its rarest cues.

    A cue's weight falls with how many of the user's memories hold it (a name on every turn
    proves nothing)."""
    base = cues.keys()
    # The link keys are counted in the same read: most queries name no side of any link, and then
    # ``link_hop`` reads nothing more.
    counted = [*base, *link_keys(cues)]
    total, df = uow.memories.cue_counts(request.tenant_id, request.user_id, counted, request.statuses)
    weights = {c: w * rarity(df.get(c, 0), total) for c, w in base.items()}
    present = fetched(base, df)
    pool = Pool()
    pool.cue_df = dict(df)
    for memory in uow.memories.by_cues(
        request.tenant_id, request.user_id, present, request.statuses, request.candidates
    ):
        score, matched = cue_match(weights, memory.cues)
        pool[memory.id] = Candidate(memory_item(memory), score, matched, paths=["cue"], memory=memory)
    return weights, pool


def fetched(cues: Iterable[str], df: dict[str, int]) -> list[str]:
    """The cues whose memories the cue query reads: held by some memory but at most
    ``MAX_CUE_MEMORIES``, the rarest ``MAX_QUERY_CUES`` of them."""
    held = (c for c in cues if 0 < df.get(c, 0) <= MAX_CUE_MEMORIES)
    return sorted(held, key=lambda c: (df[c], c))[:MAX_QUERY_CUES]


def linked_sides(sources: Iterable[Memory], asked: Sequence[str]) -> dict[str, str]:
    """The other side of each naming link of ``sources`` one of whose sides the query ``asked``
    about, mapped to that query word (at most ``MAX_LINKS``, the best-scored memories' first)."""
    hops: dict[str, str] = {}
    for memory in sorted(sources, key=lambda m: (-m.score, m.id)):
        for link in links(memory.content):
            for here, there in ((link.role, link.name), (link.name, link.role)):
                if here in asked and there not in asked and there not in hops and len(hops) < MAX_LINKS:
                    hops[there] = here
    return hops


def _link_words(cues: QueryCues) -> list[str]:
    """The query's words a link may name as one of its sides."""
    return list(dict.fromkeys([*cues.entities, *cues.keywords]))[:MAX_QUERY_CUES]


def link_keys(cues: QueryCues) -> list[str]:
    """The cue keys of the memories that name a query word as a link side."""
    return [LINK_PREFIX + word for word in _link_words(cues)]


def link_hop(
    uow: UnitOfWork,
    request: RecallRequest,
    cues: QueryCues,
    weights: dict[str, float],
    pool: Pool,
    notes: list[str],
) -> None:
    """The second cue hop: the user's memories that tie a query word to another name ("我儿子叫乐乐"
    for "我儿子喜欢什么运动？"), then the memories holding that name, added to ``pool``.

    A hop hit scores ``LINK_FACTOR`` × what it would score had the query named the linked side
    itself (the side's cue keys added to the query's, weighted as the query's are), and says
    ``link:儿子->乐乐`` among its matched cues; a memory the first hop already found keeps the
    better of its two scores. The memories stating the links keep their first-hop score: they are
    found by what they share with the query.
    """
    asked = _link_words(cues)
    tenant, user, statuses = request.tenant_id, request.user_id, request.statuses
    named = [key for key in link_keys(cues) if pool.cue_df.get(key, 0) > 0]  # counted by cue_matches
    if not named:
        return
    sources = uow.memories.by_cues(tenant, user, named, statuses, MAX_LINK_SOURCES)
    hops = linked_sides(sources, asked)
    if not hops:
        return
    # A side's cue keys as a query naming it would have them: an English name is an entity and a
    # keyword, a Chinese name a keyword.
    sides = {t: {f"e:{t}": ENTITY_WEIGHT, **{f"k:{k}": KEYWORD_WEIGHT for k in keywords(t)}} for t in hops}
    added = {key: w for side in sides.values() for key, w in side.items() if key not in weights}
    total, df = uow.memories.cue_counts(tenant, user, sorted(added), statuses)
    hop_weights = weights | {key: w * rarity(df.get(key, 0), total) for key, w in added.items()}
    source_ids = {m.id for m in sources}
    reached = 0
    for memory in uow.memories.by_cues(tenant, user, fetched(added, df), statuses, MAX_HOP_CANDIDATES):
        if memory.id in source_ids:
            continue
        held = added.keys() & set(memory.cues)
        there = next(t for t, side in sides.items() if held & side.keys())
        score, matched = cue_match(hop_weights, memory.cues)
        matched.append(f"link:{hops[there]}->{there}")
        known = pool.get(memory.id)
        if known is None:
            pool[memory.id] = Candidate(
                memory_item(memory), LINK_FACTOR * score, matched, paths=["link"], memory=memory
            )
        elif LINK_FACTOR * score > known.cue_score:
            known.cue_score, known.matched = LINK_FACTOR * score, matched
            known.paths.append("link")
        reached += 1
    found = ", ".join(f"{here}->{there}" for there, here in hops.items())
    notes.append(f"link hop: {found} ({reached} memories)")


def boost_type_hints(pool: Pool, cues: QueryCues) -> None:
    for cand in pool.values():
        if cand.item.type in cues.type_hints:
            cand.cue_score += TYPE_BOOST
            cand.matched.append(f"type:{cand.item.type}")


def working_turns(
    uow: UnitOfWork, request: RecallRequest, working_memory: WorkingMemory | None, notes: list[str]
) -> list[TurnPublished]:
    """Recent turns: the current session's, or (without one) the user's newest; which of them are
    offered is :func:`add_working_turns`'s to say."""
    if working_memory is not None:
        try:
            return working_memory.recent(
                request.tenant_id, request.user_id, request.session_id, request.working_turns
            )
        except Exception as exc:  # Redis down: the event log still knows the recorded turns
            notes.append(
                f"working memory unavailable ({type(exc).__name__}); read recent turns from the event log"
            )
    stored = uow.events.recent(request.tenant_id, request.user_id, request.working_turns, request.session_id)
    return [s.event for s in stored]


def add_working_turns(
    uow: UnitOfWork, request: RecallRequest, pool: Pool, turns: list[TurnPublished], weights: dict[str, float]
) -> int:
    """Add the recent turns that share a cue with the query and are not already in the pool as
    the long-term memory made of them; return how many were added.

    Without a session, only the turns the pipeline has not finished: a finished turn outside the
    current session already answers through long-term memory, or was judged not worth keeping;
    offering it again would only add noise. Their stages are read for the turns that match only:
    most queries match none of the recent turns, and reading the stages of all of them cost every
    recall a round trip to Postgres (docs/BENCHMARKS.md: stage 1 p50 0.76 ms lower without it)."""
    long_term_sources = {s["event_id"] for c in pool.values() for s in c.item.sources}
    matching = []
    for turn in turns:
        if turn.event_id in long_term_sources:
            continue
        score, matched = cue_match(weights, turn_cues(turn))
        if score > 0:
            matching.append((turn, score, matched))
    if request.session_id is None and matching:
        stages = uow.events.stages([turn.ref for turn, _, _ in matching])
        matching = [
            (turn, score, matched) for turn, score, matched in matching if stages.get(turn.ref) != "done"
        ]
    for turn, score, matched in matching:
        pool[f"event:{turn.event_id}"] = Candidate(turn_item(turn), score, matched, paths=["working"])
    return len(matching)


def ranked_by_cues(pool: Pool) -> list[Candidate]:
    """The cue list: every candidate with a cue score, best first, ties as ``Candidate.tie``."""
    ranked = sorted(pool.values(), key=lambda c: (-c.cue_score, *c.tie(), c.item.id))
    return [c for c in ranked if c.cue_score > 0]
