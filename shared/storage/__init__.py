"""The storage port: the repositories of one unit of work, as protocols, one module per group
(the SQL side mirrors it in ``workers/db/``).

Every room of the core above it imports these names from here, not from the module that defines
them: the list below is the port's one vocabulary, and a repository moving between the modules of
this package moves no importer. The modules of the package import each other directly (never this
``__init__``), so the package imports nothing above it (``[tool.importlinter]`` in
``pyproject.toml``: storage sits below indexing, ingest, recall and lifecycle).
"""

from shared.storage.curation import CurationRepository
from shared.storage.events import EventRepository, Outcome, Receipt, ReceiptRepository, StoredEvent
from shared.storage.lifecycle import LifecycleRepository, StatusChange
from shared.storage.memories import MemoryRepository
from shared.storage.memory_index import IndexState, MemoryIndexRepository, ScoreState
from shared.storage.records import (
    EMBEDDING_MODEL_KEY,
    DeadLetter,
    DeadLetterRepository,
    DeadLetterView,
    HistoryEntry,
    HistoryRepository,
    LlmCallRepository,
    MetaRepository,
    check_embedding_model,
)
from shared.storage.turn_index import TurnIndexRepository, TurnRow, TurnState
from shared.storage.unit_of_work import FollowUp, UnitOfWork

__all__ = [
    "EMBEDDING_MODEL_KEY",
    "CurationRepository",
    "DeadLetter",
    "DeadLetterRepository",
    "DeadLetterView",
    "EventRepository",
    "FollowUp",
    "HistoryEntry",
    "HistoryRepository",
    "IndexState",
    "LifecycleRepository",
    "LlmCallRepository",
    "MemoryIndexRepository",
    "MemoryRepository",
    "MetaRepository",
    "Outcome",
    "Receipt",
    "ReceiptRepository",
    "ScoreState",
    "StatusChange",
    "StoredEvent",
    "TurnIndexRepository",
    "TurnRow",
    "TurnState",
    "UnitOfWork",
    "check_embedding_model",
]
