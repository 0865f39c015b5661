"""cuemem workers: the Celery app, thin tasks, adapters (Postgres, Qdrant, embeddings) and the CLI."""
