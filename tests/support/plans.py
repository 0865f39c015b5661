"""The query plans of the statements a repository call sends: what the plan tests of the SQL
reads check (an index used, no parallel worker), on the statements as the code builds them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session


def plans_of(session: Session, call: Callable[[], Any], explain: str = "EXPLAIN") -> list[str]:
    """EXPLAIN of every statement ``call`` sends through ``session``, in order, in the same
    transaction (so its ``SET LOCAL`` planner settings hold); ``explain`` may ask for more
    (``EXPLAIN (ANALYZE)``: the statements run again)."""
    statements: list[tuple[str, Any]] = []

    def keep(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        statements.append((statement, parameters))

    engine = session.get_bind()
    event.listen(engine, "before_cursor_execute", keep)
    try:
        call()
    finally:
        event.remove(engine, "before_cursor_execute", keep)
    connection = session.connection()
    return [
        "\n".join(row[0] for row in connection.exec_driver_sql(f"{explain} {statement}", parameters))
        for statement, parameters in statements
    ]
