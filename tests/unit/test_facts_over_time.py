"""Plans, changes and merges (issue 31, items 2, 3 and 6), on the pure core with fakes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from shared.events import Role, TurnPublished
from shared.ingest import slot_meaning
from shared.ingest.conflicts import Relation, judge_by_rules, merge_text
from shared.ingest.embed import meaning_slot
from shared.ingest.extraction import extract, is_plan
from shared.ingest.llm_paths import extract_with_llm
from shared.ingest.slot_meaning import NOTHING, Prototypes, gives_a_value, slot_by_meaning
from shared.llm import ExtractionAnswer, ImportanceAnswer
from shared.models import MemoryStatus, MemoryType
from shared.recall.slots import asked_slot
from tests.support.pipeline import Harness

CST = timezone(timedelta(hours=8))
AT = datetime(2026, 6, 6, 21, 0, tzinfo=CST)


def _turn(text: str, user: str = "u1") -> TurnPublished:
    return TurnPublished(f"e-{user}-{text}", "default", user, "s1", 1, Role.USER, text, AT, {})


def _draft(text: str) -> Any:
    [draft] = extract(_turn(text)).drafts
    return draft


# -- 2. a plan is not the present -------------------------------------------------------------------


def test_a_plan_for_a_slot_is_a_task_of_the_plans_slot_due_at_the_end_of_its_time() -> None:
    plan = _draft("我们计划明年春天搬到苏州")
    assert (plan.type, plan.slot) == (MemoryType.TASK, "plan:profile:home")
    assert "plan" in plan.tags and not plan.change
    assert plan.due_at == datetime(2027, 12, 31, 23, 59, 59, tzinfo=CST)
    soon = _draft("我下个月要搬到深圳了")
    assert soon.slot == "plan:profile:home" and soon.due_at == datetime(2026, 7, 31, 23, 59, 59, tzinfo=CST)
    assert _draft("我打算明年换工作").slot == "plan:profile:job"


def test_the_present_and_the_past_are_no_plans() -> None:
    assert _draft("我住在杭州西湖区").slot == "profile:home"
    assert _draft("我上个月搬到深圳了").slot == "profile:home"
    assert _draft("我主要用 Python").slot == "profile:primary_language"  # "主要" is no "要"
    assert not is_plan("我上个月搬到深圳了", AT)
    assert not is_plan("我去年要搬到深圳", AT)  # a time already over


# Turns of LoCoMo (public benchmark text) and of our own, labelled: the plan words must govern the
# clause that carries the slot's value, never an "I'll" elsewhere in the turn.
MUST_BE_PLANS = {
    "我们计划明年春天搬到苏州": "plan:profile:home",
    "我打算下个月辞职，搬回老家": "plan:profile:home",  # the second clause goes on the plan's
    "我下个月就要去新公司上班了": "plan:profile:job",
    "I'm going to start a new job at Google in May": "plan:profile:job",
    "I will start my new job at the clinic next Monday": "plan:profile:job",
    "I'm going to move to Suzhou next spring": "plan:profile:home",
    "I will start at Google in May": "plan:profile:job",
    "We're moving to Denver next year": "plan:profile:home",  # a progressive of a future time
    "I'm starting at Stripe next month": "plan:profile:job",
    # LongMemEval's: a move in the progressive with no time, or only "soon", has not happened yet.
    "I'm moving to Munich soon": "plan:profile:home",
    "I'm about to move to Denver": "plan:profile:home",
    "We're about to relocate to Spain": "plan:profile:home",
}
MUST_NOT_BE_PLANS = {  # turn: its slot (None: no value of the speaker's)
    "Sure! I'm lactose intolerant, so I'll just need the dairy-free recipe! ": "preference:diet",
    "I wish I wasn't allergic! I would get two turtles today if I could! I found out recently I'm"
    " allergic to cockroaches as well, so who knows if I'll ever get a pet.": "preference:diet",
    "Thanks! It's been tough going since I lost my job, but I'm sure investing my time in my business"
    " will pay off eventually. I really appreciate your help.": "profile:job",
    "Good idea, Nate! I'll think about it and maybe get pets of my own soon if I can find any I'm not"
    " allergic to. Have you been up to anything recently?": None,  # only a condition
    "Searching for the perfect dance studio's a tough job, Jon. Hang in there and you'll find it soon!": None,
    "I'm lactose intolerant so I'll just need the dairy-free recipe": "preference:diet",
    "I'm vegetarian so I'll bring my own lunch tomorrow": "preference:diet",
    "我是素食者，所以明天会自己带饭": "preference:diet",
    "我住在杭州，明年要搬到苏州": "profile:home",  # the newer statement of the present home
    "If I get a new job, I'll move to Denver": None,
    "如果我换了新工作，就搬到深圳": None,
    "Let's move to the next topic": None,  # "move to" names no place
    # A move or a start to come fills no slot but the plan's, and only when it names a place or an
    # employer: never the present value, never another slot of the same turn.
    "I'm a data analyst at Alibaba and hope to move to the Zurich office": "profile:job",
    "I live in Hangzhou, my classes start at 8": "profile:home",
    "I work as a nurse and I'd love to move to the ICU someday": "profile:job",
    "I'm moving to Denver because my lease ended last month": None,
    "We're moving to Slack for team chat": None,
    "We're moving to Plan B": None,
    "I'll start at Central Park and run": None,
    "I will start at Costco to buy the groceries": None,
    # Someone else's home or job, in the words people use ("我妈", not only "我妈妈").
    "我妈住在北京": None,
    "我爸在腾讯上班": None,
    "我姐现在住上海": None,
    "I work out every morning": None,  # a routine, not a job
}


@pytest.mark.parametrize("text", list(MUST_BE_PLANS))
def test_a_plan_is_read_from_the_clause_that_carries_the_value(text: str) -> None:
    plan = _draft(text)
    assert (plan.type, plan.slot) == (MemoryType.TASK, MUST_BE_PLANS[text])


@pytest.mark.parametrize("text", list(MUST_NOT_BE_PLANS))
def test_a_future_word_in_another_clause_makes_no_plan(text: str) -> None:
    drafts = extract(_turn(text)).drafts
    slot = MUST_NOT_BE_PLANS[text]
    assert [d.slot for d in drafts if d.slot] == ([slot] if slot else [])
    assert all(d.type is not MemoryType.TASK for d in drafts)


def test_starting_from_a_place_is_no_plan_to_move() -> None:
    drafts = extract(_turn("I'm starting from my hometown, and I'm thinking of heading out west")).drafts
    assert not [d for d in drafts if d.slot and d.slot.startswith("plan:")], drafts


ASKED_SLOTS = {
    "Where do I work?": "profile:job",
    "我现在住哪？": "profile:home",
    "What is my phone number?": "profile:phone",
    "我们打算什么时候搬家？": "plan:profile:home",  # asks for the plan, not the present home
    "What was my previous job?": None,  # history, not the current value
    "我以前住哪？": None,
    "Where did I live in 2019?": None,  # the past
    "Where does Caroline work?": None,  # someone else's
    "Which US state do Audrey and Andrew potentially live in?": None,  # "US" is no "us"
    "What is my favorite hobby?": None,  # a topic of many values has no one current value
    "我妈住哪？": None,  # someone else's
    "我爸在哪上班？": None,
    "我在哪里工作？": "profile:job",
    # Pay is beside the job: the job's value does not answer it, though "工资" is a word of work.
    "我工资多少？": None,
    "What is my salary?": None,
    "How much do I get paid at work?": None,
    "Where do I live and how much rent do I pay?": "profile:home",
}


@pytest.mark.parametrize("query", list(ASKED_SLOTS))
def test_a_question_about_the_users_own_slot_asks_for_its_current_value(query: str) -> None:
    assert asked_slot(query) == ASKED_SLOTS[query]


def test_a_plan_in_a_later_clause_is_no_plan_of_the_value_before_it() -> None:
    yoga = extract(_turn(
        "I've been into yoga and meditation lately. It helps me recharge. Doing different poses relieves"
        " tension and calms my mind. I've already shared my newfound love for yoga with my partner, and"
        " we're planning to go on a meditation retreat together to enhance our practice together."
    )).drafts  # fmt: skip
    assert [d.slot for d in yoga if d.slot] == ["preference:hobby:yoga"]


# A new job or home is a change only when it is the speaker's own and obtained.
MUST_CHANGE_JOB = (
    "I started a new job at Google",
    "I got a new job at the clinic",
    "Loving my new job at the vet clinic",
    "I am loving the new job!",
    "我换了新工作",
    "我在新公司的第一周",
)
MUST_NOT_CHANGE_JOB = (
    "Congrats on the new job! So I got these new collars and tags for my dogs - so cute!",
    "It's been a bit of a rough patch lately. The company downsized, and I was part of that. I'm"
    " currently on the hunt for a new job, which hasn't been easy, but I'm keeping my spirits up and"
    " staying hopeful.",
    "Way to go, John! Congrats on achieving that major career milestone.",
    "Congrats on your new job!",
    "Good luck with the new job!",
    "I'm looking for a new job",
    "I want a new job",
    "If I get a new job, I'll move to Denver",
    "恭喜你换了新工作",
    "我在找新工作",
    "我想换工作",
)


@pytest.mark.parametrize("text", MUST_CHANGE_JOB)
def test_the_speakers_own_new_job_is_a_change_of_job(text: str) -> None:
    assert [d.slot for d in extract(_turn(text)).drafts] == ["profile:job"]


@pytest.mark.parametrize("text", MUST_NOT_CHANGE_JOB)
def test_a_new_job_sought_congratulated_or_conditional_is_no_change(text: str) -> None:
    assert not [d for d in extract(_turn(text)).drafts if d.slot and "job" in d.slot]


def test_first_week_at_the_new_place_is_a_profile_fact() -> None:
    assert _draft("First week at the new place!").type is MemoryType.PROFILE  # its slot: by meaning


def _said(h: Harness, *texts: str, user: str = "u1") -> None:
    for i, text in enumerate(texts):
        at = AT + timedelta(days=30 * i)
        h.drain({**_event(text, i + 1, user), "at": at.isoformat()})


def _event(text: str, seq: int, user: str) -> dict[str, Any]:
    from tests.support.pipeline import turn

    return {**turn(seq, text), "user_id": user, "event_id": f"e-{user}-{seq}"}


def _by(h: Harness, word: str) -> Any:
    [m] = [m for m in h.state.memories.values() if word in m.content]
    return m


def test_a_plan_leaves_the_present_current_and_is_superseded_when_it_happens() -> None:
    h = Harness()
    _said(h, "我住在杭州西湖区", "我们计划明年春天搬到苏州")
    home, plan = _by(h, "杭州"), _by(h, "计划")
    assert home.status is MemoryStatus.ACTIVE and plan.status is MemoryStatus.ACTIVE
    _said(h, "我住在杭州西湖区", "我们计划明年春天搬到苏州", "我们搬到苏州了", user="u10")
    moved = _by(h, "我们搬到苏州了")
    assert moved.status is MemoryStatus.ACTIVE
    for word in ("杭州",):
        [old] = [m for m in h.state.memories.values() if word in m.content and m.user_id == "u10"]
        assert old.status is MemoryStatus.SUPERSEDED and old.superseded_by == moved.id
    [old_plan] = [m for m in h.state.memories.values() if "计划" in m.content and m.user_id == "u10"]
    assert old_plan.status is MemoryStatus.SUPERSEDED and old_plan.superseded_by == moved.id
    # u1's state is untouched by u10's move.
    assert _by_user(h, "u1") == {("我住在杭州西湖区", "active"), ("我们计划明年春天搬到苏州", "active")}


def _by_user(h: Harness, user: str) -> set[tuple[str, str]]:
    return {(m.content, m.status.value) for m in h.state.memories.values() if m.user_id == user}


def test_the_judge_lets_a_fact_end_its_plan_but_never_a_plan_end_its_fact() -> None:
    h = Harness()
    _said(h, "我住在杭州西湖区", "我们计划明年春天搬到苏州", "我们搬到苏州了")
    home, plan, moved = _by(h, "杭州"), _by(h, "计划"), _by(h, "我们搬到苏州了")
    for m in (home, plan, moved):
        m.status = MemoryStatus.ACTIVE
    assert judge_by_rules(home, plan).relation is Relation.UNRELATED
    assert judge_by_rules(plan, moved).relation is Relation.SUPERSEDE


# -- 3. a change in English words; a slot from meaning ---------------------------------------------


def test_a_change_of_home_or_job_in_english_is_a_profile_fact_of_the_slot() -> None:
    assert (_draft("I now live in Seattle").type, _draft("I now live in Seattle").slot) == (
        MemoryType.PROFILE,
        "profile:home",
    )
    assert _draft("I now work at Swedish Medical Center").slot == "profile:job"
    assert _draft("Loving the new job at the vet clinic!").slot == "profile:job"
    assert _draft("I'm a pharmacist in Leeds.").type is MemoryType.PROFILE  # its slot: by meaning


def test_i_now_live_in_seattle_supersedes_boston_with_its_history() -> None:
    h = Harness()
    _said(h, "I live in Boston", "I'm a nurse at Mass General", "I now live in Seattle")
    boston, seattle = _by(h, "Boston"), _by(h, "Seattle")
    assert boston.status is MemoryStatus.SUPERSEDED and boston.superseded_by == seattle.id
    assert _by(h, "Mass General").status is MemoryStatus.ACTIVE
    assert ("superseded", seattle.id) in [
        (e.action, e.related_id) for e in h.state.history if e.memory_id == boston.id
    ]


class _WordEmbedder:
    """Vectors from words: job words on one axis, home words on another, the rest on a third."""

    model_name = "fake-words"
    dim = 3

    def __init__(self) -> None:
        self.calls = 0

    def _one(self, text: str) -> list[float]:
        lowered = text.lower()
        job = sum(
            w in lowered
            for w in ("job", "work", "nurse", "engineer", "hired", "工作", "上班", "护士", "公司")
        )
        home = sum(w in lowered for w in ("live", "home", "moved", "apartment", "住", "搬", "家"))
        return [float(job), float(home), 1.0]

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


def test_a_slot_by_meaning_needs_a_margin_over_nothing_and_over_the_next_slot() -> None:
    known = Prototypes(
        "m",
        {
            "profile:job": ((1.0, 0.0, 0.0), (0.9, 0.1, 0.0)),
            "profile:home": ((0.0, 1.0, 0.0), (0.1, 0.9, 0.0)),
            NOTHING: ((0.0, 0.0, 1.0), (0.1, 0.1, 1.0)),
        },
    )
    assert slot_by_meaning([1.0, 0.05, 0.1], known) == "profile:job"
    assert slot_by_meaning([0.0, 1.0, 0.2], known) == "profile:home"
    assert slot_by_meaning([0.1, 0.1, 1.0], known) is None  # about nothing in particular
    assert slot_by_meaning([1.0, 1.0, 0.0], known) is None  # two slots alike: none stands out
    assert slot_by_meaning(None, known) is None and slot_by_meaning([1.0, 0.0], known) is None


def test_prototypes_are_embedded_once_per_model() -> None:
    embedder = _WordEmbedder()
    first = slot_meaning.prototypes(embedder)
    again = slot_meaning.prototypes(embedder)
    assert first is again and embedder.calls == 1
    assert set(first.vectors) == set(slot_meaning.PROTOTYPES)
    assert slot_by_meaning(embedder._one("Got hired as a nurse"), first) == "profile:job"


def test_the_embed_stage_reads_a_slot_by_meaning_from_the_users_own_clauses_only() -> None:
    """Read whole, "我姐姐在深圳安家了，我们过年去看她" means a home; the home is the sister's,
    and the user's clause ("我们过年去看她") gives none."""
    slots = {}
    for said in ("我姐姐在深圳安家了，我们过年去看她", "我在深圳安家了，我们过年回老家"):
        h = Harness()
        h.embedder = _WordEmbedder()  # type: ignore[assignment]
        h.say(said)
        [memory] = h.state.memories.values()
        slots[said] = memory.slot
    assert slots == {
        "我姐姐在深圳安家了，我们过年去看她": None,
        "我在深圳安家了，我们过年回老家": "profile:home",
    }


def test_the_meaning_chooses_a_slot_only_for_a_statement_whose_words_give_a_value() -> None:
    embedder = _WordEmbedder()  # its "meaning": job for any work word, home for any home word
    said = "I'm a nurse at the county hospital"
    assert meaning_slot(said, embedder._one(said), embedder, AT) == "profile:job"
    for memory in (
        "I've been playing new games, a great way to relax after work",  # close to job, no value
        "I have a photo of my dad on my desk at work",
        "Last month I visited my mom's home",
        "我妈妈家的院子很漂亮",
    ):
        assert meaning_slot(memory, embedder._one(memory), embedder, AT) is None, memory
    for value in (
        "I'm a pharmacist in Leeds",
        "I'm an electrician for a small contractor",
        "First week at the new place",
        "We're settled in Portland now",
        "我现在是一名兽医",
        "我换到了一家律所",
        "我们搬进了新房子",
        "I no longer work at the bank",  # a change
    ):
        assert gives_a_value(value), value
    for memory in (
        "I'm a big believer in hard work",  # "in" a named place only
        "I'm a huge fan of jazz",
        "Reminds me of when I used to play games with my husband",
        "I'm also working on an online platform",
        "I've been thinking about my mom",
        "My partner",
        "我想起了我妈妈",
        "我老公很会做饭",
    ):
        assert not gives_a_value(memory), memory


# -- the LLM path: slots from the rules, plans as plans ---------------------------------------------


class _ProposingLLM:
    def __init__(self, memory_type: str) -> None:
        self.memory_type = memory_type

    def ask(self, operation: Any, instructions: str, data: Any, schema: Any) -> Any:
        if schema is ImportanceAnswer:
            return schema.model_validate({"importance": 8})
        if schema is ExtractionAnswer:
            proposed = {"type": self.memory_type, "content": data["turn"], "importance": 8, "tags": []}
            return schema.model_validate({"memories": [proposed]})
        return None


def test_the_llm_path_gives_its_drafts_the_rules_slot_and_keeps_a_plan_a_plan() -> None:
    [moved] = extract_with_llm(_turn("I now live in Seattle"), 5.0, _ProposingLLM("profile")).drafts
    assert moved.slot == "profile:home"
    [plan] = extract_with_llm(_turn("我们计划明年春天搬到苏州"), 5.0, _ProposingLLM("profile")).drafts
    assert (plan.type, plan.slot) == (MemoryType.TASK, "plan:profile:home")


# -- 6. a merge reads as one statement --------------------------------------------------------------


def test_a_merge_drops_repeated_content_and_reads_as_one_statement() -> None:
    said = [
        "I'm vegetarian, I don't eat meat or fish",
        "Reminder: I'm vegetarian, please never suggest meat recipes",
        "Still vegetarian of course, no meat for me",
    ]
    merged = merge_text(merge_text(said[0], said[1]), said[2])
    assert merged == "I'm vegetarian, I don't eat meat or fish; please never suggest meat recipes"
    assert merge_text("我不吃香菜", "记住，我不吃香菜啊") == "我不吃香菜"  # says nothing new
    assert merge_text("我不吃香菜", "我也不吃葱") == "我不吃香菜；我也不吃葱"  # adds a food
    # The clearer one, when it says all the other does, stands alone.
    assert merge_text("I don't eat meat", "I'm vegetarian, I don't eat meat or fish") == (
        "I'm vegetarian, I don't eat meat or fish"
    )
