"""Reading text: what ingest, recall and indexing all need to know about a turn's words.

Cue keys and entities (``cues``, over the ``lexicon`` and the naming ``links``), tokens and
stopwords (``text``), time expressions (``timeexpr``, its rules in ``timeexpr_rules``) and the BM25
terms of the keyword index (``sparse``). Pure, and below the other rooms of the core: nothing here
imports ``shared.ingest``, ``shared.recall``, ``shared.indexing`` or ``shared.lifecycle``.
"""
