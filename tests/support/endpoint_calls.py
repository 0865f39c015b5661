"""How the tests drive an endpoint adapter (embedder, reranker, LLM) on a stub server."""

from __future__ import annotations

from typing import Any

# An adapter's attempts get a timeout that is only a hang guard (the tests of timeouts give their
# own) and backoffs short enough that a retry costs nothing.
QUICK_RETRIES: dict[str, Any] = {"timeout_s": 60.0, "backoff_initial_s": 0.001, "backoff_max_s": 0.01}
# A hang, then answers: the hung attempt times out after HANG_TIMEOUT_S, and so would an answer
# that a loaded machine delays past it; but every attempt after the hang is answered, so such a
# machine costs attempts (up to AFTER_THE_HANG), never the test.
HANG_TIMEOUT_S = 0.5
AFTER_THE_HANG = 20
