"""Reading text: what ingest, recall and indexing all need to know about a turn's words.

Cue keys and entities (``cues``, over the ``lexicon`` and the naming ``links``), tokens and
stopwords (``text``), time expressions (``timeexpr``, its rules in ``timeexpr_rules``), the BM25
terms of the keyword index (``sparse``), what a turn's clauses do: state, ask or only chat
(``clauses``), and the words and slot of a plan (``plan_words``). Pure, and below the other rooms
of the core: nothing here imports ``shared.ingest``, ``shared.recall``, ``shared.indexing`` or
``shared.lifecycle`` (``[tool.importlinter]`` in ``pyproject.toml``).
"""
