"""What a worker's main process does before its pool forks (``workers/celery_app.py``)."""

from __future__ import annotations

from tests.support.processes import assert_python_runs


def test_a_worker_loads_the_segmenter_and_the_adapters_before_its_pool_forks():
    # A fresh interpreter, as `celery -A workers.celery_app worker` starts: the app imported, then
    # the worker_init signal the worker sends before it starts its pool. What the handler loads,
    # every pool child inherits instead of loading it inside its first task's time limit.
    code = (
        "import sys\n"
        "from celery.signals import worker_init\n"
        "import workers.celery_app\n"
        "from shared.language import text\n"
        "assert not text._tokenizer().initialized, 'jieba loaded before the worker started'\n"
        "worker_init.send(sender=None)\n"
        'assert text._tokenizer().initialized, "jieba\'s dictionary is left to the first task"\n'
        "missing = {'workers.db.uow', 'workers.endpoints.llm'} - set(sys.modules)\n"
        "assert not missing, f'left to the first task: {missing}'\n"
    )
    assert_python_runs(code, timeout=120)
