"""Where the write path asks the LLM, each with the rule-based answer as its fallback.

The LLM proposes; the rules' structure stays: cue keys, slots and entities are always computed
by the rules, so recall never depends on what a model chose to return. Any failure (no answer,
invalid JSON, wrong schema) keeps the rule-based result for that turn.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from shared.events import Role, TurnPublished
from shared.ingest.answers import answer_context
from shared.ingest.conflicts import Judge, Relation, Verdict, judge_by_rules
from shared.ingest.extraction import extract, is_instruction, timing, without_instruction
from shared.ingest.plans import PLAN_TAG, as_said, word_carrier
from shared.language import cues
from shared.language.plan_words import PLAN_PREFIX
from shared.language.slot_rules import slot_for
from shared.llm import (
    INSTRUCTIONS,
    LLM,
    ExtractionAnswer,
    ImportanceAnswer,
    JudgeAnswer,
    LLMOperation,
)
from shared.models import Extraction, Memory, MemoryDraft, MemoryType

log = logging.getLogger(__name__)

# Weight of the LLM's importance when both sources answer (the rules stay in the mix so that a
# model that rates everything 10 cannot flood long-term memory).
LLM_WEIGHT = 0.6


def extract_with_llm(
    event: TurnPublished, threshold: float, llm: LLM | None, asked: str | None = None
) -> Extraction:
    """Rules, then (with an LLM) one scoring call and, for a turn worth keeping, one extraction call.

    The importance is the weighted mean of the rules' and the model's score; a turn under the
    threshold costs one call, not two. Every failure falls back to the rule-based result. The
    assistant's preceding question (``asked``) reaches the rules, and its cue keys and tags the
    model's first draft too (``shared.ingest.answers``).
    """
    rules = extract(event, 0.0, asked)
    if llm is None:
        return extract(event, threshold, asked)
    scored = llm.ask(
        LLMOperation.SCORING,
        INSTRUCTIONS[LLMOperation.SCORING],
        {"turn": event.content, "role": event.role.value},
        ImportanceAnswer,
    )
    if scored is None:
        log.info("event %s: LLM scoring unavailable, rule-based result kept", event.event_id)
        return extract(event, threshold, asked)
    importance = round(LLM_WEIGHT * scored.importance + (1 - LLM_WEIGHT) * rules.importance, 2)
    reasons = (*rules.reasons, f"llm:{scored.importance:g}")
    if importance < threshold:
        return Extraction(importance=importance, drafts=(), reasons=reasons)
    answer = llm.ask(
        LLMOperation.EXTRACTION,
        INSTRUCTIONS[LLMOperation.EXTRACTION],
        {"turn": event.content, "role": event.role.value},
        ExtractionAnswer,
    )
    if answer is None or not answer.memories:
        drafts = tuple(replace(d, importance=max(d.importance, importance)) for d in rules.drafts)
        return Extraction(importance=importance, drafts=drafts, reasons=reasons)
    drafts_list = []
    for proposed in answer.memories:
        # An instruction to remember ("请记住") the model proposed as a memory is none; one it left
        # in a memory's words ("Remember this: …") is cut, as the rules cut it.
        content = without_instruction(proposed.content)
        if is_instruction(proposed.content) or not content:
            continue
        entities = tuple(dict.fromkeys([*cues.entities(content), *(e.lower() for e in proposed.entities)]))
        tags = tuple(dict.fromkeys([*cues.lexicon_tags(content), *(t.lower() for t in proposed.tags)]))
        memory_type = MemoryType(proposed.type)
        # The slot comes from the rules, as the cue keys do (and, when the words name none, from
        # the statement's meaning in the embed stage); a plan for a slot is a task of the plan's
        # slot, as on the rules path, so that it never replaces the slot's present value.
        slot = slot_for(content, memory_type, tags, entities)
        if event.role is Role.USER and slot is not None:
            slot = as_said(content, slot, event.at, word_carrier(slot, memory_type))
            if slot is not None and slot.startswith(PLAN_PREFIX):
                memory_type = MemoryType.TASK
                tags = tuple(dict.fromkeys((*tags, PLAN_TAG)))
        # Times as the rules resolve them, in the zone of the turn's own offset; a task whose words
        # the model rewrote without its time falls due when the turn's own words say.
        time_refs, due_at = timing(content, memory_type, event.at, said=event.content)
        drafts_list.append(
            MemoryDraft(
                type=memory_type,
                content=content,
                importance=round(LLM_WEIGHT * proposed.importance + (1 - LLM_WEIGHT) * rules.importance, 2),
                tags=tags,
                entities=entities,
                cues=cues.cues_for_memory(content, tags, entities),
                slot=slot,
                time_refs=time_refs,
                due_at=due_at,
            )
        )
    if not drafts_list:  # the model proposed instructions only: the rules' drafts stand
        drafts = tuple(replace(d, importance=max(d.importance, importance)) for d in rules.drafts)
        return Extraction(importance=importance, drafts=drafts, reasons=reasons)
    context = answer_context(asked) if asked and event.role is Role.USER else None
    drafts = tuple(drafts_list) if context is None else context.onto(tuple(drafts_list))
    return Extraction(importance=importance, drafts=drafts, reasons=(*reasons, "llm-extraction"))


def llm_judge(llm: LLM | None, fallback: Judge = judge_by_rules) -> Judge:
    if llm is None:
        return fallback

    def judge(older: Memory, newer: Memory) -> Verdict:
        answer = llm.ask(
            LLMOperation.JUDGING,
            INSTRUCTIONS[LLMOperation.JUDGING],
            {"existing": older.content, "new": newer.content},
            JudgeAnswer,
        )
        if answer is None:
            return fallback(older, newer)
        return Verdict(Relation(answer.relation), answer.reason, "llm", answer.merged_content)

    return judge
