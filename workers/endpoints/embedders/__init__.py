"""Embedding adapters behind the :class:`shared.ports.Embedder` port.

``build_embedder`` picks one from :class:`shared.settings.Settings`:

* ``e5``: the bundled multilingual-e5-small (4-bit, in-process, no download);
* ``openai``: any OpenAI-compatible ``/v1/embeddings`` endpoint;
* ``hash``: deterministic token hashing, for tests and smoke runs only.

Adapter modules are imported inside ``build_embedder`` so that importing this package stays
cheap (the OpenAI client is a heavy import) and loads no model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared.ports import Embedder
    from shared.settings import Settings

__all__ = ["EmbeddingError", "build_embedder"]


class EmbeddingError(RuntimeError):
    """Texts could not be embedded: the endpoint failed or answered something unusable.

    ``transient`` is true when the cause may pass by itself (rate limit, 5xx, timeout, connection
    failure, all retried to the limit already), so a caller may try the whole task again later;
    false for a refusal or an unusable answer, which needs a configuration fix instead.
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


def build_embedder(settings: Settings) -> Embedder:
    """The embedder ``settings.embedder`` names, configured from ``settings``, behind the cut to
    the model's window (``window.WindowCut``, ``CUEMEM_EMBEDDING_MAX_TOKENS``) and an LRU of query
    vectors (``CUEMEM_QUERY_EMBEDDING_CACHE``, 0: none).

    Nothing is loaded or connected here: models and HTTP clients are created on first use,
    so it is safe to call before worker processes fork.
    """
    embedder = _build(settings)
    if settings.query_embedding_cache <= 0:
        return embedder
    from workers.endpoints.embedders.query_cache import QueryCache

    return QueryCache(embedder, settings.query_embedding_cache)


def _build(settings: Settings) -> Embedder:
    """The configured embedder behind its window cut: every text any path embeds passes here."""
    from workers.endpoints.embedders.window import WindowCut, approximate_tokens

    kind = settings.embedder
    max_tokens = settings.embedding_max_tokens
    dialogue = settings.dialogue_query_tokens
    if dialogue and not 8 <= dialogue <= max_tokens:
        raise ValueError(
            f"CUEMEM_DIALOGUE_QUERY_TOKENS is {dialogue}: set it to 0 (the model's window) or from 8 "
            f"to CUEMEM_EMBEDDING_MAX_TOKENS ({max_tokens})"
        )
    if kind == "e5":
        from workers.endpoints.embedders.e5 import E5_DIM, E5_MAX_TOKENS, E5Embedder

        # The model's width is fixed; a different configured width would only surface later
        # as an index of the wrong shape, so refuse it here.
        if settings.embedding_dim != E5_DIM:
            raise ValueError(
                f"embedder 'e5' produces {E5_DIM}-dimensional vectors but CUEMEM_EMBEDDING_DIM is "
                f"{settings.embedding_dim}: unset it or set it to {E5_DIM}"
            )
        if max_tokens > E5_MAX_TOKENS:
            raise ValueError(
                f"embedder 'e5' reads at most {E5_MAX_TOKENS} tokens but CUEMEM_EMBEDDING_MAX_TOKENS is "
                f"{max_tokens}: unset it or set it to {E5_MAX_TOKENS} or less"
            )
        e5 = E5Embedder(threads=settings.embedding_threads)
        return WindowCut(e5, e5.token_count, max_tokens, dialogue)
    if kind == "hash":
        from workers.endpoints.embedders.hashing import HashingEmbedder, tokens

        # Its features stand in for tokens: the cut bounds a test run's work as it does a model's.
        hashing = HashingEmbedder(dim=settings.embedding_dim)
        return WindowCut(hashing, lambda text, _: len(tokens(text)), max_tokens, dialogue)
    if kind == "openai":
        model = settings.embedding_model
        base_url = settings.embedding_base_url
        missing = [
            var
            for var, value in (("CUEMEM_EMBEDDING_MODEL", model), ("CUEMEM_EMBEDDING_BASE_URL", base_url))
            if not value
        ]
        if missing or not model or not base_url:
            raise ValueError(f"embedder 'openai' needs {' and '.join(missing)} to be set")
        from workers.endpoints.embedders.openai_compat import OpenAIEmbedder

        remote = OpenAIEmbedder(
            base_url=base_url,
            api_key=settings.embedding_api_key,
            model=model,
            dim=settings.embedding_dim,
            timeout_s=settings.embedding_timeout_s,
        )
        # No tokenizer of the remote model here: a conservative estimate from the UTF-8 length.
        return WindowCut(remote, approximate_tokens, max_tokens, dialogue)
    raise ValueError(f"unknown embedder {kind!r}: set CUEMEM_EMBEDDER to 'e5', 'openai' or 'hash'")
