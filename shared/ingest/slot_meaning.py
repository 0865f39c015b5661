"""A slot read from a statement's meaning: "I'm a pharmacist in Leeds" is about the user's job,
"First week at the new place" about where they work or live, though neither says "job" or "live".

The slot rules of the lexicon (:func:`shared.language.slot_rules.slot_for`) are the words part:
fast, exact, and blind to any phrasing they do not list. A change of home or job rarely repeats the
words of the first statement ("Loving the new job at the vet clinic!" after "I'm a pharmacist in
Leeds."), and a longer list of phrasings would always be one phrasing short, in two languages. So a
statement the words leave without a slot is compared with a few prototype statements per slot, in
both languages, in the embedding model's space: the model, not a list, carries the many ways of
saying "I live in X". Why this shape:

- **Prototypes, not a trained classifier**: a handful of plain statements per slot is data a
  reader can check and extend, works with whatever embedding model the deployment runs (the
  vectors are computed once per model and process) and needs no training run.
- **An explicit "about nothing in particular" class** (weather, meals, purchases, hobbies,
  moods): with a small model every cosine sits between 0.8 and 0.95, so an absolute threshold
  means little; a slot is taken only when its prototypes are closer than the nearest of these by
  :data:`MARGIN`, and closer than the next slot's by :data:`SEPARATION`.
- **Only for a profile or fact draft of the user's own turn** that the words gave no slot: the
  rules decided that the turn states something about the user; the meaning only says which
  attribute. A preference ("I love my job") never gets a profile slot this way, so it cannot
  replace one.
- **Only when the words say a value is given** (:func:`gives_a_value`): the speaker names their
  own value ("I'm a pharmacist in Leeds", "我是一名兽医") or says a value is new or changed
  ("First week at the new place", "我换到了一家律所"). The profile type alone is no such claim:
  the rules also give it to memories of family, ongoing activities and "remember that ...", and
  those sit as close to a slot's prototypes as a real value does ("I've been playing new games to
  relax after work" is near "job", "a pendant that reminds me of my mother" near "relationship").
  A wrong slot supersedes the true value, so the gate is the words', not a tighter margin: on
  1,500 LoCoMo turns (``python -m bench.slot_precision``, seeds 1-3) the meaning alone gave 9-12
  drafts a slot, about one in ten right; behind the gate it gives none, and on the labelled
  statements of ``tests/contract/test_slot_meaning_precision.py`` every slot it gives is right.

Pure: the embedder is the caller's (the embed stage, which embeds the drafts anyway).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from shared.ingest.extraction_rules import is_change
from shared.ports import Embedder

NOTHING = ""  # the class of statements about no slot in particular

# Per slot, statements that give it a value, in English and Chinese. Plain and varied rather than
# many: each one pulls the slot's region of the embedding space towards its own meaning.
PROTOTYPES: Mapping[str, tuple[str, ...]] = {
    "profile:job": (
        "I work as an engineer at a company",
        "I'm a nurse at the hospital",
        "I'm a teacher at a school",
        "I started a new job at a firm",
        "My new workplace is great",
        "I got hired by a new employer",
        "我在一家公司上班",
        "我是医院的护士",
        "我换了新工作",
        "我入职了新公司",
        "我是一名工程师",
        "我在一家餐厅工作",
    ),
    "profile:home": (
        "I live in this city",
        "I moved to a new city",
        "My home is in this town",
        "We just moved into a new apartment",
        "我住在这个城市",
        "我搬家了",
        "我家在这个城市",
        "我们搬进了新房子",
        "我定居在这座城市",
    ),
    "profile:relationship": (
        "I'm married to my wife",
        "I have a girlfriend",
        "I broke up with my boyfriend",
        "我结婚了",
        "我有女朋友了",
        "我和男朋友分手了",
    ),
    "profile:school": (
        "I study at a university",
        "I'm a student at this school",
        "I transferred to a new school",
        "我在这所大学读书",
        "我转学到新学校了",
    ),
    NOTHING: (
        "The weather is nice today",
        "I bought something new",
        "I like watching movies",
        "I love this food",
        "I went hiking with friends",
        "I'm reading an interesting book",
        "My team shipped a release",
        "I feel tired today",
        "I had a great dinner",
        "今天天气不错",
        "我买了一个新东西",
        "我喜欢看电影",
        "我今天很累",
        "我们去爬山了",
        "这本书很有意思",
        "晚饭很好吃",
    ),
}
# What makes a statement give a value at all (see :func:`gives_a_value`). The speaker's own value,
# named: a role and where ("I'm a pharmacist in Leeds", "I'm a barista at a café"), "I work for a
# small contractor", "我是一名药剂师", "我在一家律所上班". Not a liking or a belief ("I'm a huge fan
# of", "I'm a big believer in hard work": "in" takes a named place only).
_OWN_VALUE = re.compile(
    r"\bI(?:'m| am) (?:now |currently |still |also )?an? \w+(?: \w+)?"
    r" (?:(?:at|for|with) (?:an? |the |my )?\w|in (?-i:[A-Z]))"
    r"|\b(?:I|we) (?:now |currently |still )?(?:live|work|study|teach)\b (?:in|at|for|as|with)\b"
    r"|\bI(?:'m| am) (?:now |currently )?(?:married|engaged|single|divorced|based in|from)\b"
    r"|(?:^|[，,。.!！\s])(?:我|我们)(?:现在|目前|已经|也)?(?:是一[名位个]|在[^，,。]{1,15}(?:工作|上班|住|读书|上学|当|做)|住)",
    re.IGNORECASE,
)
# A value said to be new: "the new place", "first week at", "just started", "we're now",
# "换了", "新公司", "搬进", "入职", "现在". A change of habit (:func:`is_change`) counts too.
_NEW_VALUE = re.compile(
    r"\b(?:my|our|the) new\b|\bfirst (?:day|week|month|shift)\b"
    r"|\b(?:just |recently |finally )?(?:started|joined|moved|relocated|transferred|settled|got hired)"
    r"\b(?! (?:playing|watching|reading|thinking|feeling|learning)\b)"
    r"|\b(?:I|we)(?:'m|'re| am| are)? now\b|\bnow,? (?:I|we)\b|\bthese days,? (?:I|we)\b"
    r"|换了|换到|转到|新(?:的)?(?:公司|单位|工作|岗位|家|房子|城市|学校|地方)|搬(?:到|进|去|回|家)|入职|加入"
    r"|安家|落户|领证|现在|目前|刚(?:刚)?(?:到|开始)",
    re.IGNORECASE,
)
MARGIN = 0.02  # how much closer than "nothing in particular" a slot's prototypes must be
SEPARATION = 0.01  # ... and than the next slot's
NEAREST = 2  # a class's closeness: the mean of its NEAREST closest prototypes


@dataclass(frozen=True)
class Prototypes:
    """The prototype vectors of one embedding model, by slot."""

    model_name: str
    vectors: Mapping[str, tuple[tuple[float, ...], ...]]


_BY_MODEL: dict[str, Prototypes] = {}  # computed once per model and process (a few dozen texts)


def prototypes(embedder: Embedder) -> Prototypes:
    """The prototype vectors for ``embedder``'s model (embedded on first use, then kept)."""
    known = _BY_MODEL.get(embedder.model_name)
    if known is not None:
        return known
    slots = list(PROTOTYPES)
    texts = [t for s in slots for t in PROTOTYPES[s]]
    vectors = iter(embedder.embed_passages(texts))
    built = Prototypes(
        embedder.model_name,
        {s: tuple(tuple(next(vectors)) for _ in PROTOTYPES[s]) for s in slots},
    )
    _BY_MODEL[embedder.model_name] = built
    return built


def _unit(v: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v]


def closeness(vector: Sequence[float], known: Prototypes) -> dict[str, float]:
    """Per class (slots and :data:`NOTHING`), the mean cosine of its :data:`NEAREST` closest
    prototypes to ``vector``."""
    v = _unit(vector)
    out: dict[str, float] = {}
    for slot, vectors in known.vectors.items():
        sims = sorted((sum(a * b for a, b in zip(v, _unit(p), strict=True)) for p in vectors), reverse=True)
        top = sims[:NEAREST]
        out[slot] = sum(top) / len(top) if top else 0.0
    return out


def gives_a_value(text: str) -> bool:
    """Whether ``text``'s words say it gives an attribute a value, so that the meaning may say
    which: the speaker names their own value ("I'm a pharmacist in Leeds", "我是一名兽医"), or says
    a value is new or changed ("First week at the new place", "我换到了一家律所"). A memory ("Reminds
    me of my mom", "last month I visited my mom's house"), an ongoing activity ("I'm working on an
    online platform", "I've been playing new games after work") or a mention of family ("My
    partner") gives none, however close its meaning is to a slot's prototypes."""
    return bool(_OWN_VALUE.search(text) or _NEW_VALUE.search(text) or is_change(text))


def slot_by_meaning(vector: Sequence[float] | None, known: Prototypes) -> str | None:
    """The slot ``vector`` (a statement's embedding) gives a value to, or None when it is about
    nothing in particular or no slot stands out."""
    if not vector or any(len(p) != len(vector) for ps in known.vectors.values() for p in ps):
        return None
    scores = closeness(vector, known)
    nothing = scores.pop(NOTHING, 0.0)
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    if not ranked:
        return None
    best, score = ranked[0]
    runner_up = ranked[1][1] if len(ranked) > 1 else float("-inf")
    if score - nothing >= MARGIN and score - runner_up >= SEPARATION:
        return best
    return None
