"""A tiny LoCoMo file whose plain BM25 baseline's answers are known in advance (its samples, the
evidence after parsing, BM25's finds by construction), for the end-to-end tests of `cuemem bench
locomo` and `cuemem bench suite` (tests/e2e/test_bench_locomo_e2e.py says how it is made)."""

from __future__ import annotations

from typing import Any

A, B = "conv-1", "conv-10"


def _turn(dia: str, speaker: str, text: str) -> dict[str, str]:
    return {"speaker": speaker, "dia_id": dia, "text": text}


def _qa(question: str, evidence: list[str], category: int) -> dict[str, Any]:
    answer = "adversarial_answer" if category == 5 else "answer"  # as in the real file
    return {"question": question, answer: "x", "evidence": evidence, "category": category}


def _sample(
    sample_id: str, a: str, b: str, sessions: list[list[str]], qa: list[dict[str, Any]]
) -> dict[str, Any]:
    conversation: dict[str, Any] = {"speaker_a": a, "speaker_b": b}
    for n, texts in enumerate(sessions, 1):
        conversation[f"session_{n}_date_time"] = f"{n + 1}:05 pm on {n + 2} May, 2023"
        conversation[f"session_{n}"] = [
            _turn(f"D{n}:{i}", a if i % 2 else b, text) for i, text in enumerate(texts, 1)
        ]
    # A date without a session list, as conv-26 has: ignored.
    conversation[f"session_{len(sessions) + 1}_date_time"] = "9:00 am on 30 June, 2023"
    return {"sample_id": sample_id, "conversation": conversation, "qa": qa, "observation": {}}


SAMPLES = [
    _sample(
        A,
        "Caroline",
        "Melanie",
        [
            [
                "Hey Mel, how was your week?",
                "I found a quokkaberry at the farmers market on Saturday.",
                "My cousin restores marzipanium clocks in his garage.",
                "That sounds like a lot of fun.",
            ],
            [
                "Good morning! Did you sleep well?",
                "We finally bought a velocitrope for the kids.",
                "See you at the park later.",
            ],
        ],
        [
            _qa("quokkaberry?", ["D1:2"], 4),
            _qa("marzipanium velocitrope?", ["D1:3", "D2:2"], 1),
            _qa("What would she like?", [], 3),
            _qa("zyxquavormelt?", ["D2:1"], 2),
        ],
    ),
    _sample(
        B,
        "Jon",
        "Gina",
        [
            [
                "I polished the glimmerstone from my grandmother yesterday.",
                "Nice, I am still busy with the dance studio.",
                "Shall we meet on Friday?",
            ],
            [
                "My thornquill collection grew by three this month.",
                "The studio opens next week, finally.",
                "Congratulations, that is great news!",
            ],
        ],
        [
            # D7:3 names no turn (dropped); D:2:1 is spelled as in the real file's quirk (normalised).
            _qa("glimmerstone?", ["D1:1; D7:3"], 4),
            _qa("thornquill?", ["D:2:1"], 4),
            # Only conv-1 holds this word: nothing of conv-10 shares a token with it.
            _qa("quokkaberry?", ["D1:2"], 5),
        ],
    ),
]
TURNS = {A: 7, B: 6}
# Evidence after parsing, by hand: (sample, qa) -> ids; questions without any are absent.
EVIDENCE = {
    (A, 0): {"D1:2"},
    (A, 1): {"D1:3", "D2:2"},
    (A, 3): {"D2:1"},
    (B, 0): {"D1:1"},
    (B, 1): {"D2:1"},
    (B, 2): {"D1:2"},
}
# BM25's answers, by construction: the scored questions it finds in full at k = 5, out of 6.
BM25_FOUND = {(A, 0), (A, 1), (B, 0), (B, 1)}


def _covered(ranked: list[list[str]], k: int) -> set[str]:
    out: set[str] = set()
    for item in ranked[:k]:
        out.update(item)
    return out
