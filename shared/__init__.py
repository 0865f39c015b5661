"""cuemem's pure core: events, domain models, scoring, cue extraction, retrieval logic, settings.

Nothing in this package performs I/O or imports SQLAlchemy, Redis, Qdrant or Celery.
"""
