"""Postgres adapter: tables, repositories and the unit of work."""
