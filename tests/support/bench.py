"""Where a benchmark's end-to-end test runs it: a fresh directory directly under /tmp.

Not pytest's tmp_path, for two reasons. Run as root, the embedded Postgres a benchmark starts
serves as its own OS user and must traverse every directory above its data dir; pytest resets
``/tmp/pytest-of-<user>`` to 0700 whenever a pytest run starts, so another run on the machine
would lock a running benchmark out of its own data (its `pg_ctl stop` failed with "Permission
denied"). And a Unix socket path has about 100 bytes: pytest's paths plus a benchmark's own
temporary directories do not fit.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def bench_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="cb-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
