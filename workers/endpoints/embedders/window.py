"""The model's window: every text is cut to the embedder's token limit before it is embedded.

The bundled E5 model reads 512 tokens (its specials and the ``passage:``/``query:`` prefix
included) but does not cut longer texts itself: it ran them whole, at a cost that grows faster
than their length (a 32,000-character turn held a pipeline worker for minutes, a 4,000-character
query took 9 s). :class:`WindowCut` sits in front of every embedder ``build_embedder`` makes, so
each path (a turn's memories, its context window in the conversation log, a recall's query, a
curation edit, a reindex, an import) embeds at most the window.

It is a **head cut**, not chunking: the vector stands for the first ``max_tokens`` tokens of the
text. The whole text is still stored in Postgres, indexed by the keyword (BM25) index and shown in
recall; only the vector's view of it ends at the window. Chunking would need several points per
memory and a way to fuse them in recall, and a turn longer than the window is rare in chat.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from shared.language.speakers import lines_of
from shared.ports import Embedder
from workers.endpoints.embedders.wrapping import Wrapping

# (text, is_query) -> the number of tokens the model would read for it, specials and prefix included.
TokenCounter = Callable[[str, bool], int]

# The first prefix the search tries is this many characters a token: more than any tokenizer of
# ours averages, so a text that fits is usually decided in one or two counts.
_FIRST_GUESS_CHARS_PER_TOKEN = 4


def head_within(text: str, max_tokens: int, count: Callable[[str], int]) -> str:
    """The longest prefix of ``text`` that ``count`` puts at ``max_tokens`` tokens or fewer.

    Tokenizing is linear and cheap next to the model (about 3 ms per 1,000 characters for E5), but
    a text may be megabytes long, so it is never counted whole unless it is short: the search
    gallops up from a first guess, doubling, until a prefix does not fit, then bisects. Its cost
    follows the kept prefix (at most about a dozen counts of twice the window), not the text.
    Invariant: ``text[:lo]`` fits (or ``lo`` is 0), ``text[:hi]`` does not.
    """
    lo, probe = 0, max_tokens * _FIRST_GUESS_CHARS_PER_TOKEN
    while True:
        if probe >= len(text):
            if count(text) <= max_tokens:
                return text
            hi = len(text)
            break
        if count(text[:probe]) > max_tokens:
            hi = probe
            break
        lo, probe = probe, probe * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid
    return text[:lo]


def approximate_tokens(text: str, is_query: bool = False) -> int:
    """A tokenizer-free count for a remote model: one token per 3 UTF-8 bytes, plus 2 specials.

    English averages 4 to 5 bytes a token in the common BPE and WordPiece vocabularies, so it is
    over-counted (the cut keeps less than the window); a CJK character is 3 bytes and mostly one
    token. Rare characters a vocabulary splits into bytes can count more: for a strict bound set
    ``CUEMEM_EMBEDDING_MAX_TOKENS`` to a third of the remote model's window.
    """
    return math.ceil(len(text.encode("utf-8")) / 3) + 2


def last_lines_within(text: str, max_tokens: int, count: Callable[[str], int]) -> str:
    """The last lines of ``text`` that ``count`` puts at ``max_tokens`` tokens or fewer, whole
    lines only (blank ones dropped); when even the last line does not fit, the head of that line
    within ``max_tokens``. A dialogue so far is about its newest lines: they are the ones kept."""
    lines = lines_of(text)
    kept: list[str] = []
    for line in reversed(lines):
        if count("\n".join([line, *kept])) > max_tokens:
            break
        kept.insert(0, line)
    if kept:
        return "\n".join(kept)
    return head_within(lines[-1] if lines else text, max_tokens, count)


class WindowCut(Wrapping):
    """:class:`shared.ports.Embedder` that hands ``inner`` each text cut to ``max_tokens``
    (by ``count``, the model's own token count where it has one). A query of several lines (a
    dialogue so far) is cut to its last lines within ``dialogue_tokens`` when that is set (0: the
    window only): the model's time grows faster than a query's length (E5: about 17 ms for a
    question of a dozen tokens, 120 ms for a MADial dialogue's 86), and a recall waits for it."""

    def __init__(
        self, inner: Embedder, count: TokenCounter, max_tokens: int, dialogue_tokens: int = 0
    ) -> None:
        if max_tokens < 8:
            raise ValueError(f"max_tokens must be at least 8, got {max_tokens}")
        if dialogue_tokens and not 8 <= dialogue_tokens <= max_tokens:
            raise ValueError(
                f"dialogue_tokens must be 0 or from 8 to max_tokens ({max_tokens}), got {dialogue_tokens}"
            )
        super().__init__(inner)
        self.max_tokens = max_tokens
        self.dialogue_tokens = dialogue_tokens
        self._count = count

    def cut(self, text: str, *, query: bool = False) -> str:
        count: Callable[[str], int] = lambda t: self._count(t, query)  # noqa: E731
        if query and self.dialogue_tokens and len(lines_of(text)) > 1:
            return last_lines_within(text, self.dialogue_tokens, count)
        return head_within(text, self.max_tokens, count)

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        if isinstance(texts, str):
            raise TypeError("embed_passages takes a sequence of texts, not one str")
        return self.inner.embed_passages([self.cut(t) for t in texts])

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(self.cut(text, query=True))
