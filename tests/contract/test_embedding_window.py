"""The cut to the model's window (workers/endpoints/embedders/window.py): what reaches an embedder
is at most ``CUEMEM_EMBEDDING_MAX_TOKENS`` tokens, counted by the model's own tokenizer."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from pydantic import SecretStr

from bench.common import mixed_text
from shared.settings import Settings
from tests.support.openai_stub import RecordedRequest, StubResponse, StubServer, embeddings_body
from tests.support.recording_embedder import RecordingEmbedder
from workers.endpoints.embedders import build_embedder
from workers.endpoints.embedders.e5 import E5_MAX_TOKENS, E5Embedder
from workers.endpoints.embedders.window import WindowCut, approximate_tokens, head_within


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder(threads=1)


def test_a_long_turn_and_a_long_query_reach_the_model_at_512_tokens_or_fewer(e5: E5Embedder) -> None:
    turn, query = mixed_text(32_000, 7), mixed_text(4_000, 8)
    assert e5.token_count(turn) > 4 * E5_MAX_TOKENS  # far beyond the window before the cut
    recorder = RecordingEmbedder()
    cut = WindowCut(recorder, e5.token_count, E5_MAX_TOKENS)

    cut.embed_passages([turn, "short"])
    cut.embed_query(query)

    (head, short), (query_head,) = recorder.passages, recorder.queries
    assert e5.token_count(head) <= E5_MAX_TOKENS and e5.token_count(query_head, True) <= E5_MAX_TOKENS
    # A head cut, as close to the window as the tokenizer allows, and a short text untouched.
    assert turn.startswith(head) and e5.token_count(turn[: len(head) + 8]) > E5_MAX_TOKENS
    assert query.startswith(query_head)
    assert short == "short"


def test_the_built_e5_embedder_embeds_only_the_window(e5: E5Embedder) -> None:
    # Through build_embedder, the path every worker and the API take: a text past the window has
    # the vector of its head, not of the whole (which the model would otherwise run in full).
    built = build_embedder(Settings(embedder="e5", query_embedding_cache=0))
    text = mixed_text(2_600, 7)
    head = head_within(text, E5_MAX_TOKENS, e5.token_count)
    assert len(head) < len(text)
    (whole_vector,) = built.embed_passages([text])
    assert float(np.dot(whole_vector, e5.embed_passages([head])[0])) > 0.999999
    assert float(np.dot(whole_vector, e5.embed_passages([text])[0])) < 0.99999


def test_e5_refuses_a_window_wider_than_its_own() -> None:
    with pytest.raises(ValueError, match="CUEMEM_EMBEDDING_MAX_TOKENS"):
        build_embedder(Settings(embedder="e5", embedding_max_tokens=1024))


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


def test_a_remote_model_gets_the_estimated_window(stub: StubServer) -> None:
    def answer(request: RecordedRequest) -> StubResponse:
        return StubResponse(json_body=embeddings_body([[0.5, 0.5] for _ in request.json["input"]]))

    stub.set_default(answer)
    built = build_embedder(
        Settings(
            embedder="openai",
            embedding_base_url=stub.base_url,
            embedding_api_key=SecretStr("k"),
            embedding_model="m",
            embedding_dim=2,
            embedding_max_tokens=256,
        )
    )
    text = mixed_text(20_000, 7)
    built.embed_passages([text])
    built.embed_query(text)
    sent = [request.json["input"][0] for request in stub.requests]
    assert len(sent) == 2
    for each in sent:
        assert text.startswith(each) and 0 < approximate_tokens(each) <= 256


def test_a_text_is_never_counted_whole_past_twice_the_kept_prefix() -> None:
    # The work per text is bounded by the window, not by the text: a megabyte is not tokenized.
    counted: list[int] = []

    def count(text: str) -> int:
        counted.append(len(text))
        return len(text.split())

    text = "word " * 200_000
    head = head_within(text, 512, count)
    assert len(head.split()) == 512 and text.startswith(head)
    assert max(counted) <= 2 * 4 * 512 and len(counted) < 20


def test_a_dialogue_query_is_embedded_by_its_last_lines_within_the_budget(e5: E5Embedder) -> None:
    lines = [f"user: line {n} " + mixed_text(60, n) for n in range(12)]
    dialogue = "\n".join(lines[:-1]) + "\n \n" + lines[-1]  # the blank line before the last is dropped
    budget = 64
    assert e5.token_count(dialogue, True) > 4 * budget
    recorder = RecordingEmbedder()
    cut = WindowCut(recorder, e5.token_count, E5_MAX_TOKENS, dialogue_tokens=budget)

    cut.embed_query(dialogue)
    one_line = mixed_text(600, 3)  # one line: only the window applies, whatever its length
    cut.embed_query(one_line)
    cut.embed_passages([dialogue])  # a passage is never a dialogue query

    (kept, whole_line), (passage,) = recorder.queries, recorder.passages
    kept_lines = kept.split("\n")
    assert kept_lines == lines[-len(kept_lines) :] and len(kept_lines) >= 2  # the newest, whole
    assert e5.token_count(kept, True) <= budget
    assert e5.token_count("\n".join(lines[-len(kept_lines) - 1 :]), True) > budget  # as many as fit
    assert whole_line == one_line and passage == dialogue


def test_a_dialogue_whose_last_line_alone_is_over_the_budget_keeps_that_line_s_head(e5: E5Embedder) -> None:
    last = "user: " + mixed_text(900, 5)
    recorder = RecordingEmbedder()
    cut = WindowCut(recorder, e5.token_count, E5_MAX_TOKENS, dialogue_tokens=32)
    cut.embed_query("user: hello\n" + last)
    (kept,) = recorder.queries
    assert last.startswith(kept) and 0 < e5.token_count(kept, True) <= 32


def test_a_dialogue_budget_outside_the_window_is_refused_naming_the_setting() -> None:
    for bad in (4, E5_MAX_TOKENS + 1):
        with pytest.raises(ValueError, match="CUEMEM_DIALOGUE_QUERY_TOKENS"):
            build_embedder(Settings(embedder="e5", dialogue_query_tokens=bad))
