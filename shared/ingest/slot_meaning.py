"""A slot read from a statement's meaning: "I'm a pharmacist in Leeds" is about the user's job,
"First week at the new place" about where they work or live, though neither says "job" or "live".

The slot rules of the lexicon (:func:`shared.cues.slot_for`) are the words part: fast, exact, and
blind to any phrasing they do not list. A change of home or job rarely repeats the words of the
first statement ("Loving the new job at the vet clinic!" after "I'm a pharmacist in Leeds."), and
a longer list of phrasings would always be one phrasing short, in two languages. So a statement
the words leave without a slot is compared with a few prototype statements per slot, in both
languages, in the embedding model's space: the model, not a list, carries the many ways of saying
"I live in X". Why this shape:

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

Pure: the embedder is the caller's (the embed stage, which embeds the drafts anyway).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

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
