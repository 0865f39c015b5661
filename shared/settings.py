"""One typed settings class for the whole product (env prefix ``CUEMEM_``).

Nothing is read at import: entry points call :func:`get_settings` (cached) or build
``Settings(...)`` explicitly, which is how tests inject values.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from shared.events import MAX_ID_CHARS_CEILING


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CUEMEM_", extra="ignore")

    # Where the embedded default keeps Postgres, Redis and the Qdrant shard.
    data_dir: Path = Path(".cuemem")

    # External services. Each one left unset falls back to its embedded counterpart.
    database_url: str | None = None
    broker_url: str | None = None
    # Redis for sequencing and working memory; defaults to the broker when that is Redis.
    redis_url: str | None = None
    qdrant_url: str | None = None
    qdrant_api_key: SecretStr | None = None
    qdrant_collection: str = "cuemem_memories"
    # The conversation log as a recall path: every recorded turn is embedded and indexed in its own
    # collection (`<collection>_turns`), so a detail never judged worth a memory can still be found.
    index_turns: bool = True
    # Context windows: a turn's point in the conversation log holds the embedding and the keyword
    # terms of the turn together with the turns before it in its session, this many turns in all
    # (shared/indexing/turn_windows.py). 1 indexes each turn alone (one embedding fewer per turn).
    turn_window: int = Field(default=3, ge=1, le=8)
    # Also embed each turn that has context by itself (one more text per such turn), so recall can
    # score a candidate by the turn's own words beside its window's (``shared/recall/alone.py``).
    # Off until the relevance model reads it (issue 30): on, ingest embeds about a third more text.
    turn_alone_vector: bool = False

    tenant_id: str = "default"

    # Embeddings: "e5" (bundled multilingual-e5-small), "openai" (any OpenAI-compatible
    # endpoint) or "hash" (deterministic token hashing; for tests and smoke runs only).
    embedder: Literal["e5", "openai", "hash"] = "e5"
    embedding_model: str | None = None
    embedding_base_url: str | None = None
    embedding_api_key: SecretStr | None = None
    embedding_dim: int = 384
    embedding_threads: int = Field(default=1, ge=1)
    # Units of a batch's users a pipeline worker process runs at once (threads): one user's model
    # call overlaps the next one's extraction and SQL (workers/tasks/ingest.py: carry_on). 1 runs
    # them one after the other. At most 4: each unit holds one of the process's 10 database
    # connections (workers/bootstrap.py: sql_uow_factory), and an LLM call's usage row one more.
    ingest_units: int = Field(default=2, ge=1, le=4)
    embedding_timeout_s: float = 30.0
    # The model's window: every text is cut to its first this many tokens before it is embedded
    # (workers/endpoints/embedders/window.py); the whole text is still stored and keyword-indexed.
    # e5 reads 512 at most; for "openai" set the remote model's window (counted by an estimate of
    # one token per 3 UTF-8 bytes, since its tokenizer is not here).
    embedding_max_tokens: int = Field(default=512, ge=8, le=1_000_000)
    # Query vectors kept per process (an LRU keyed by model and text): an agent asks the same
    # things again, and the model call is most of a recall's time. 0 turns it off.
    query_embedding_cache: int = Field(default=1024, ge=0, le=1_000_000)
    # A query of several lines (a dialogue so far) is embedded by its last lines within this many
    # tokens (its keyword and cue paths still read all of it); 0: up to the model's window. The
    # model's time grows faster than the query (docs/BENCHMARKS.md, "A dialogue query's embedding").
    dialogue_query_tokens: int = Field(default=0, ge=0, le=1_000_000)

    # LLM path (optional): unset base URL = rule-based only. Never used on the recall path.
    llm_base_url: str | None = None
    llm_api_key: SecretStr | None = None
    llm_model: str = "gpt-4o-mini"
    llm_model_scoring: str | None = None  # each falls back to llm_model
    llm_model_extraction: str | None = None
    llm_model_judging: str | None = None
    llm_model_consolidation: str | None = None
    llm_timeout_s: float = Field(default=20.0, gt=0)
    llm_max_attempts: int = Field(default=4, ge=1)
    llm_cooldown_s: float = Field(default=60.0, ge=0)  # skip the LLM this long after it failed

    # Conflict strategies per memory type, overriding the defaults, e.g.
    # CUEMEM_CONFLICT_STRATEGIES='{"preference": "supersede"}' (supersede | keep_both | invalidate_older).
    conflict_strategies: dict[str, str] = Field(default_factory=dict)

    @field_validator("conflict_strategies")
    @classmethod
    def _known_strategies(cls, value: dict[str, str]) -> dict[str, str]:
        types = {"preference", "fact", "profile", "task", "episodic", "semantic"}
        strategies = {"supersede", "keep_both", "invalidate_older"}
        for memory_type, strategy in value.items():
            if memory_type not in types:
                raise ValueError(f"{memory_type!r} is not a memory type ({', '.join(sorted(types))})")
            if strategy not in strategies:
                raise ValueError(
                    f"{strategy!r} for {memory_type} is not one of {', '.join(sorted(strategies))}"
                )
        return value

    # User cue lexicon files (TOML, or YAML with PyYAML installed), merged in this order over the
    # shipped lexicon; format in docs/ARCHITECTURE.md. The variable takes paths separated by
    # os.pathsep ("/etc/cuemem/lexicon.toml:./team.toml") or a JSON list.
    lexicon_paths: Annotated[list[Path], NoDecode] = Field(default_factory=list)

    @field_validator("lexicon_paths", mode="before")
    @classmethod
    def _split_paths(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        return [part for part in (p.strip() for p in text.split(os.pathsep)) if part]

    # Cross-encoder reranker (optional): unset URL = off. Any TEI / Jina / Cohere-style
    # ``POST {url}/rerank`` endpoint; the key is read from the environment only.
    rerank_url: str | None = None
    rerank_api_key: SecretStr | None = None
    rerank_model: str | None = None
    rerank_top_n: int = Field(default=20, ge=1, le=1000)
    rerank_timeout_s: float = Field(default=5.0, gt=0)
    rerank_max_attempts: int = Field(default=3, ge=1)

    # Event validation.
    max_content_chars: int = Field(default=32_000, ge=1)
    max_id_chars: int = Field(default=128, ge=1, le=MAX_ID_CHARS_CEILING)
    max_metadata_bytes: int = Field(default=16_384, ge=2)

    # HTTP request bodies: a body over its route's limit is refused with 413 before it is read
    # past the limit (service/http/guard.py). One turn or recall fits 1 MiB many times over; a
    # batch (up to 1,000 turns) and an import file get their own limits (a larger import: the
    # `cuemem import` command, which reads the file itself).
    max_body_bytes: int = Field(default=1 << 20, ge=1024)
    max_batch_body_bytes: int = Field(default=16 << 20, ge=1024)
    max_import_body_bytes: int = Field(default=64 << 20, ge=1024)
    # /metrics: the store's counts are read at most once per this many seconds, whatever the
    # scrape rate; with a token set, a scrape must send `Authorization: Bearer <token>`.
    metrics_cache_s: float = Field(default=15.0, ge=0)
    metrics_token: SecretStr | None = None

    # Extraction: turns scored under this do not become long-term memories.
    importance_threshold: float = Field(default=5.0, ge=0, le=10)

    # Working memory (read-your-writes): the last turns of each conversation, in Redis.
    working_memory_turns: int = Field(default=20, ge=1)
    working_memory_ttl_s: int = Field(default=7 * 24 * 3600, ge=60)

    # Reliability profile.
    visibility_timeout_s: int = Field(default=3600, ge=10)
    task_time_limit_s: int = Field(default=300, ge=5)
    max_deliveries: int = Field(default=5, ge=1)
    # How often the stalled sweep sends one event on at one stage before parking it as a dead
    # letter: a poisoned event must not be re-driven (and dead-lettered) every minute for ever.
    max_redrives: int = Field(default=5, ge=1)
    # At most one rewrite of the embedded Redis's files per this many seconds after privacy
    # deletes (workers/redis/rewrite.py): a later delete's rewrite waits for the window's end.
    privacy_rewrite_min_interval_s: float = Field(default=60.0, ge=0)
    max_retries: int = Field(default=8, ge=0)
    retry_backoff_max_s: int = Field(default=120, ge=1)
    publish_retries: int = Field(default=5, ge=1)
    worker_concurrency: int = Field(default=2, ge=1)

    # Per-tenant rate limits on the API (service/http/rate_limits.py), counted in Redis across
    # every serving process: turns published (a batch counts each turn) and recalls, each a rate
    # per second with a burst (the burst in any window of burst/rate seconds). Over it: 429 with
    # Retry-After. Off: no limit.
    rate_limits: bool = True
    rate_limit_publish_per_s: float = Field(default=200.0, gt=0)
    rate_limit_publish_burst: int = Field(default=2000, ge=1)
    rate_limit_recall_per_s: float = Field(default=20.0, gt=0)
    rate_limit_recall_burst: int = Field(default=100, ge=1)
    # The routes that cost more per call than a recall: editing a memory (re-embeds it), exporting
    # and importing (a whole tenant's rows), deleting a user (every store, and a Redis rewrite).
    rate_limit_edit_per_s: float = Field(default=5.0, gt=0)
    rate_limit_edit_burst: int = Field(default=50, ge=1)
    rate_limit_export_per_s: float = Field(default=0.05, gt=0)
    rate_limit_export_burst: int = Field(default=5, ge=1)
    rate_limit_import_per_s: float = Field(default=0.05, gt=0)
    rate_limit_import_burst: int = Field(default=5, ge=1)
    rate_limit_delete_user_per_s: float = Field(default=0.2, gt=0)
    rate_limit_delete_user_burst: int = Field(default=10, ge=1)
    # Requests that embed text in the API process (recalls, memory edits) of one tenant computing
    # at once, per serving process; more wait for a slot without holding a thread
    # (service/http/embedding_slots.py), so another tenant's request is not queued behind them.
    embeddings_in_flight_per_tenant: int = Field(default=4, ge=1)

    # Fair scheduling of ingest (producers/fair_share.py): each tenant's first fair_share_turns turns
    # published in a fair_share_window_s window go at the normal priority, the rest to the back of
    # the queue (taken when no normal message waits), so one tenant's backlog does not hold up the
    # others' turns. 0 turns it off.
    fair_share_turns: int = Field(default=1000, ge=0)
    fair_share_window_s: int = Field(default=60, ge=1)

    # Recall.
    recall_candidates: int = Field(default=50, ge=1, le=2000)
    # A query of several lines (the dialogue so far, as an agent recalls before it answers) is
    # searched by its last this many lines; 0 searches the whole query. Chosen on the dev sets
    # (docs/BENCHMARKS.md, "Recall after issue 30").
    recall_query_lines: int = Field(default=0, ge=0, le=1000)
    # The relevance floor (shared/recall/floor.py): recall answers nothing rather than filler when
    # its best item has less than this probability of relevance (the relevance model's calibrated
    # output); the items after a best that clears it are not cut for their own. Unset: the model's
    # own default, chosen with the no-answer protocol (docs/BENCHMARKS.md). 0 turns the floor off;
    # chit-chat is always left out.
    recall_min_relevance: float | None = Field(default=None, ge=0, le=1)
    # No setting makes recall count its memories as used: every recall is read-only unless the
    # request asks (reinforce), because only the caller knows whether it used what it got, and a
    # server-wide default would make a recall's side effect depend on the deployment.

    # Where a browser reaches Flower; the inspector's pipeline view links there (unset: no link).
    flower_url: str | None = None

    # Traces (OpenTelemetry, the `tracing` extra): exported by OTLP/HTTP to
    # OTEL_EXPORTER_OTLP_ENDPOINT (the standard OTEL_* variables apply). Off: nothing is imported.
    tracing: bool = False

    # The half-life score R = S·γ^t + B·ln(1+N) (shared/scoring.py). γ per memory type overrides
    # the defaults, e.g. CUEMEM_DECAY_GAMMA='{"episodic": 0.92}'; t counts in units of
    # CUEMEM_DECAY_UNIT_HOURS; B is CUEMEM_DECAY_BASE.
    decay_gamma: dict[str, float] = Field(default_factory=dict)
    decay_base: float = Field(default=1.0, ge=0)
    decay_unit_hours: float = Field(default=24.0, gt=0)

    @field_validator("decay_gamma")
    @classmethod
    def _known_gammas(cls, value: dict[str, float]) -> dict[str, float]:
        types = {"preference", "fact", "profile", "task", "episodic", "semantic"}
        for memory_type, gamma in value.items():
            if memory_type not in types:
                raise ValueError(f"{memory_type!r} is not a memory type ({', '.join(sorted(types))})")
            if not 0.0 < gamma <= 1.0:
                raise ValueError(f"gamma for {memory_type}: {gamma} is not in (0, 1]")
        return value

    # Lifecycle (shared/lifecycle/sweeps.py). A memory whose score has stayed under the threshold for
    # archive_after_days is archived; a task expires once its due time passed, or, without one,
    # task_ttl_days after it was stated. Decay rewrites a score in Postgres, and the index payload
    # is refreshed, only when it moved by more than score_push_tolerance.
    archive_threshold: float = Field(default=1.0, ge=0)
    archive_after_days: float = Field(default=30.0, ge=0)
    task_ttl_days: float = Field(default=7.0, gt=0)
    score_push_tolerance: float = Field(default=0.01, ge=0)

    # Exactly one beat: it holds a Redis lock with this TTL and renews it on every tick.
    beat_lock_ttl_s: int = Field(default=60, ge=5)

    log_level: str = "INFO"

    @property
    def resolved_data_dir(self) -> Path:
        return self.data_dir.expanduser().resolve()

    @property
    def effective_redis_url(self) -> str | None:
        if self.redis_url:
            return self.redis_url
        if self.broker_url and self.broker_url.startswith(("redis://", "rediss://", "redis+socket://")):
            return self.broker_url
        return None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
