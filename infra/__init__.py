"""The I/O commons below ``producers`` and ``workers``: what both sides need to reach Redis and the
broker, and nothing of either.

- ``broker``: the one Redis client factory and the one send-only Celery app;
- ``redis_layout``: every Redis key, and the publish ledger's and the working memory's entries and
  Lua scripts, written by the ``Publisher`` and read by ``workers/redis/``;
- ``tracing``: OpenTelemetry spans across the pipeline, off by default;
- ``redact``: secrets and URL credentials masked in what leaves the process.

It imports ``shared`` and I/O libraries only (``[tool.importlinter]`` in ``pyproject.toml``).
"""
