"""One typed settings class for the whole product (env prefix ``CUEMEM_``).

Nothing is read at import: entry points call :func:`get_settings` (cached) or build
``Settings(...)`` explicitly, which is how tests inject values.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


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

    tenant_id: str = "default"

    # Embeddings: "e5" (bundled multilingual-e5-small), "openai" (any OpenAI-compatible
    # endpoint) or "hash" (deterministic token hashing; for tests and smoke runs only).
    embedder: Literal["e5", "openai", "hash"] = "e5"
    embedding_model: str | None = None
    embedding_base_url: str | None = None
    embedding_api_key: SecretStr | None = None
    embedding_dim: int = 384
    embedding_threads: int = Field(default=1, ge=1)
    embedding_timeout_s: float = 30.0

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

    # Event validation.
    max_content_chars: int = Field(default=32_000, ge=1)
    max_id_chars: int = Field(default=128, ge=1, le=512)
    max_metadata_bytes: int = Field(default=16_384, ge=2)

    # Extraction: turns scored under this do not become long-term memories.
    importance_threshold: float = Field(default=5.0, ge=0, le=10)

    # Working memory (read-your-writes): the last turns of each conversation, in Redis.
    working_memory_turns: int = Field(default=20, ge=1)
    working_memory_ttl_s: int = Field(default=7 * 24 * 3600, ge=60)

    # Reliability profile.
    visibility_timeout_s: int = Field(default=3600, ge=10)
    task_time_limit_s: int = Field(default=300, ge=5)
    max_deliveries: int = Field(default=5, ge=1)
    max_retries: int = Field(default=8, ge=0)
    retry_backoff_max_s: int = Field(default=120, ge=1)
    publish_retries: int = Field(default=5, ge=1)
    worker_concurrency: int = Field(default=2, ge=1)

    # Recall.
    recall_k: int = Field(default=5, ge=1, le=200)
    recall_candidates: int = Field(default=50, ge=1, le=2000)

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
