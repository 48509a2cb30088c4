"""A private redis-server on a free loopback port: for the demo and for the test suite.

Production points redis_url at a real, dedicated instance.  When none is configured
the demo starts one of these under the state directory; the tests start one per
session so they never touch the machine's own Redis on 6379.  It can be restarted
on the same port and data directory, which is how the fault tests restart Redis.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..errors import StagedoorError


class RedisNotInstalled(StagedoorError, RuntimeError):
    pass


class PortTaken(StagedoorError, RuntimeError):
    """The server could not bind its port: another process has it."""


PORT_MOVES = 3      # a first start whose chosen port was taken tries this many others


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def redis_server_binary() -> str:
    path = shutil.which("redis-server")
    if not path:
        raise RedisNotInstalled("redis-server is not installed: apt-get install redis-server, "
                                "or set STAGEDOOR_REDIS_URL to a running Redis >= 7.0.5")
    return path


class EmbeddedRedis:
    """One redis-server process bound to 127.0.0.1 on a port of its own."""

    def __init__(self, directory: str | Path, *, port: int | None = None,
                 appendonly: bool = False, appendfsync: str = "everysec",
                 extra_args: Sequence[str] = (), password: str | None = None) -> None:
        self.directory = Path(directory)
        self.port = port or free_port()
        # a port free_port chose may be taken by someone else before the server binds it:
        # the first start then moves to another (a restart keeps its port, as promised)
        self._may_move = port is None
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.extra_args = list(extra_args)
        self.password = password
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    @property
    def logfile(self) -> Path:
        return self.directory / "redis.log"

    def command(self) -> list[str]:
        cmd = [redis_server_binary(), "--bind", "127.0.0.1", "--port", str(self.port),
               "--dir", str(self.directory), "--logfile", str(self.logfile),
               "--save", "", "--daemonize", "no",
               "--appendonly", "yes" if self.appendonly else "no",
               "--appendfsync", self.appendfsync,
               "--maxmemory-policy", "noeviction", "--protected-mode", "yes"]
        if self.password:
            cmd += ["--requirepass", self.password]
        return cmd + self.extra_args

    def start(self, timeout: float = 10.0) -> EmbeddedRedis:
        self.directory.mkdir(parents=True, exist_ok=True)
        for moves_left in range(PORT_MOVES, -1, -1):
            # where this start's lines begin, read before the server runs: a server whose
            # port is taken can fail and log it before wait_ready first looks
            log_from = self.logfile.stat().st_size if self.logfile.exists() else 0
            self.process = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL,
                                            stderr=subprocess.PIPE, start_new_session=True)
            try:
                self.wait_ready(timeout, log_from=log_from)
                break
            except PortTaken:
                if not self._may_move or not moves_left:
                    raise
                self.process = None
                self.port = free_port()
        self._may_move = False
        return self

    def wait_ready(self, timeout: float, log_from: int) -> None:
        """Until this process answers on its port.  An answer from another process there
        (the port taken before ours bound it) is not ready: ours then exits, PortTaken.
        log_from: where this process's lines begin in the log file (its size before the
        process started)."""
        deadline = time.monotonic() + timeout
        client = redis.Redis(host="127.0.0.1", port=self.port, password=self.password,
                             socket_timeout=0.5, socket_connect_timeout=0.5, protocol=2,
                             # one look per turn: redis-py's own retries of a silent port
                             # (another program's) took 9 s a look
                             retry=Retry(NoBackoff(), 0))
        try:
            while True:
                if self.process is not None and self.process.poll() is not None:
                    err = ""
                    if self.process.stderr:
                        with self.process.stderr:
                            err = self.process.stderr.read().decode(errors="replace")
                    with contextlib.suppress(OSError), self.logfile.open("rb") as f:
                        f.seek(log_from)
                        err += f.read().decode(errors="replace")[-2000:]
                    rc = self.process.returncode
                    if "Address already in use" in err:
                        raise PortTaken(f"redis-server exited with {rc}: port {self.port} "
                                        "is taken by another process")
                    raise RuntimeError(f"redis-server exited with {rc}: {err}")
                try:
                    pid = int(client.info("server")["process_id"])
                    if self.process is None or pid == self.process.pid:
                        return
                except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError,
                        redis.ResponseError):
                    pass    # not up yet, or another server there (NOAUTH, say)
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server on port {self.port} not ready after "
                                       f"{timeout:g}s")
                time.sleep(0.02)
        finally:
            client.close()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
        """SIGTERM is a clean shutdown; SIGKILL is a crash (AOF keeps what was fsynced)."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()

    def restart(self, *, wipe: bool = False, sig: int = signal.SIGKILL) -> None:
        self.stop(sig)
        if wipe:
            for child in self.directory.iterdir():
                if child.name != self.logfile.name:
                    if child.is_dir():
                        shutil.rmtree(child)
                    else:
                        child.unlink()
        self.start()

    def pause(self) -> None:
        if self.process:
            os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.process:
            os.kill(self.process.pid, signal.SIGCONT)

    def __enter__(self) -> EmbeddedRedis:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

