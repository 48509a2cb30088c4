"""Real server topologies on loopback free ports: Sentinel (a master, a replica, three
sentinels) and Redis Cluster (masters, optionally a replica each, made with
`redis-cli --cluster create`).  Every process is the binary SD_TEST_SERVER picks
(tests/support/servers.py); the sentinels are that binary with `--sentinel`, so no
redis-sentinel package is needed.  Everything started here is stopped by its own pid.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import redis

from stagedoor.demo.embedded_redis import free_port
from tests.support.aclmode import server_args
from tests.support.servers import SERVER, SuiteRedis, require_marked
from tests.support.worker import poll

SERVICE = "mymaster"
DOWN_AFTER_MS = 1000
# A replica's full sync starts at once: a master waits repl-diskless-sync-delay (5 s by
# default) for more replicas to share the transfer, 5 s of every Sentinel set's start
# and of every returning node's resync.
REPL_NOW = ["--repl-diskless-sync-delay", "0"]


def _client(port: int, timeout: float = 1.0, password: str | None = None) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, protocol=2, socket_timeout=timeout,
                       socket_connect_timeout=timeout, password=password)


def _info(port: int, section: str) -> dict[str, Any]:
    c = _client(port)
    try:
        return dict(c.info(section))
    finally:
        c.close()


def _wait(port: int) -> int:
    """WAIT 1 500 on the node at port: how many replicas acknowledge its offset."""
    c = _client(port, timeout=2.0)
    try:
        return int(c.execute_command("WAIT", 1, 500))
    finally:
        c.close()


class Sentinel:
    """One sentinel process (the server binary with --sentinel) and its config file."""

    def __init__(self, directory: Path, master_port: int, password: str | None = None,
                 tls: dict[str, Path] | None = None) -> None:
        self.directory = directory
        self.port = free_port()
        self.password = password
        # TLS for clients on a port of its own (certificates from tests/support/tlscerts.py);
        # the plain port stays for the other sentinels and the plain-text master.
        self.tls_port = free_port() if tls else None
        with_tls = [f"tls-port {self.tls_port}", f"tls-cert-file {tls['cert']}",
                    f"tls-key-file {tls['key']}", f"tls-ca-cert-file {tls['ca']}",
                    "tls-auth-clients no"] if tls else []
        # A password of the sentinels' own (not the master's): clients and the other
        # sentinels must give it (requirepass, sentinel-pass).
        own = [f"requirepass {password}", f"sentinel sentinel-pass {password}"] \
            if password else []
        directory.mkdir(parents=True, exist_ok=True)
        self.conf = directory / "sentinel.conf"
        self.conf.write_text("\n".join([
            f"port {self.port}", "bind 127.0.0.1", "daemonize no", f"dir {directory}",
            f"logfile {directory / 'sentinel.log'}",
            f"sentinel monitor {SERVICE} 127.0.0.1 {master_port} 2",
            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}",
            f"sentinel failover-timeout {SERVICE} 10000",
            f"sentinel parallel-syncs {SERVICE} 1", *own, *with_tls, ""]))
        self.process = subprocess.Popen([SERVER.server, str(self.conf), "--sentinel"],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True)

    def client(self) -> redis.Redis:
        return _client(self.port, password=self.password)

    def master(self) -> dict[str, Any]:
        c = self.client()
        try:
            return dict(c.sentinel_master(SERVICE))
        finally:
            c.close()

    def master_port(self) -> int | None:
        c = self.client()
        try:
            addr = c.sentinel_get_master_addr_by_name(SERVICE)
            return int(addr[1]) if addr else None
        finally:
            c.close()

    def log(self) -> str:
        path = self.directory / "sentinel.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)


class SentinelSet:
    """A master, one replica, three sentinels (quorum 2), all on loopback."""

    def __init__(self, directory: Path, sentinel_password: str | None = None,
                 sentinel_tls: dict[str, Path] | None = None) -> None:
        require_marked("a Sentinel set")
        self.directory = directory
        self.master = SuiteRedis(directory / "master", extra_args=[*server_args(), *REPL_NOW])
        self.master.start()
        self.replica = SuiteRedis(directory / "replica", extra_args=[
            *server_args(), *REPL_NOW, "--replicaof", "127.0.0.1", str(self.master.port)])
        self.replica.start()
        self.nodes = {self.master.port: self.master, self.replica.port: self.replica}
        self.sentinels: list[Sentinel] = []
        try:
            poll(lambda: _info(self.replica.port, "replication").get("master_link_status")
                 == "up", 20, "the replica in sync")
            self._password, self._tls, self._starts = sentinel_password, sentinel_tls, 0
            self.sentinels = [self._sentinel(i) for i in range(3)]
            # Set-up, not a check: sentinels learn of a replica from the master's INFO
            # (every 10 s); with two suites on the box this took over 30 s once.
            try:
                poll(self._watching, 60, "three sentinels that see the master and the "
                     "replica")
            except AssertionError as e:
                raise AssertionError(f"{e}; {self._states()}") from None
            # And the replica acknowledges what the master has: a test's first WAIT must
            # not meet a replica still settling after its sync (its link is up before).
            poll(lambda: _wait(self.master.port) == 1, 30, "the replica's acknowledgement")
        except BaseException:
            self.stop()
            raise

    def _sentinel(self, i: int) -> Sentinel:
        self._starts += 1
        return Sentinel(self.directory / f"sentinel-{i}-{self._starts}", self.master.port,
                        self._password, self._tls)

    def _restart_exited(self) -> None:
        """A sentinel that exited at its start (its port, free when free_port chose it,
        taken by another suite's server before it bound: a CI run may have waited its
        60 s on one) is started again on another port; two such restarts in all."""
        for i, s in enumerate(self.sentinels):
            if s.process.poll() is None:
                continue
            if self._starts >= 5:
                raise AssertionError(f"sentinel {i} exited ({s.process.returncode}): "
                                     f"{s.log()[-1500:]}")
            self.sentinels[i] = self._sentinel(i)

    def _states(self) -> str:
        """What each sentinel says of the master, or why it cannot: for a failed set-up."""
        out = []
        for s in self.sentinels:
            try:
                st = s.master()
                out.append(f"sentinel {s.port}: {st.get('flags')}, "
                           f"{st.get('num-slaves')} replicas, "
                           f"{st.get('num-other-sentinels')} other sentinels")
            except (redis.RedisError, OSError) as e:
                rc = s.process.poll()
                out.append(f"sentinel {s.port} (exit {rc}): {type(e).__name__}: {e}; "
                           f"log: {s.log()[-600:]!r}")
        return "; ".join(out)

    def _watching(self) -> bool:
        self._restart_exited()
        try:
            states = [s.master() for s in self.sentinels]
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
            return False
        return all(int(st["num-slaves"]) >= 1 and int(st["num-other-sentinels"]) >= 2
                   for st in states)

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    @property
    def tls_url(self) -> str:
        """The sentinels' TLS ports (set up with sentinel_tls); the master stays plain."""
        hosts = ",".join(f"127.0.0.1:{s.tls_port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def master_port(self) -> int | None:
        """What the sentinels say now (the first one that answers)."""
        for s in self.sentinels:
            try:
                return s.master_port()
            except (redis.ConnectionError, redis.TimeoutError):
                continue
        return None

    def wait_promoted(self, old_port: int, timeout: float = 30) -> int:
        """Wait until the sentinels name a new master and it answers as one, and every
        sentinel has it as the master and has had a PING answered by it; its port.

        Not only the first sentinel's word: a sentinel whose link to the new master was
        a second old failed over again (a CI run: +sdown of the new master 1.05 s after
        +switch-master, with DOWN_AFTER_MS 1000), promoted the old master the test had
        just started as a replica, and the test's client was on a replica."""
        def promoted() -> int | None:
            port = self.master_port()
            if port is None or port == old_port:
                return None
            role = _info(port, "replication").get("role")
            if role != "master" or not all(self._monitors(s, port) for s in self.sentinels):
                return None
            return port
        port: int = poll(promoted, timeout, "the sentinels to promote the replica",
                         interval=0.01)
        return port

    @staticmethod
    def _monitors(sentinel: Sentinel, port: int) -> bool:
        """This sentinel has `port` as the master, not down, with a PING answered lately."""
        try:
            state = sentinel.master()
        except (redis.ConnectionError, redis.TimeoutError):
            return False
        flags = str(state.get("flags", ""))
        return (int(state.get("port", 0)) == port and "down" not in flags
                and "failover" not in flags
                and int(state.get("last-ok-ping-reply", DOWN_AFTER_MS)) < DOWN_AFTER_MS // 2)

    def client(self, port: int | None = None) -> redis.Redis:
        return _client(port or self.master_port() or self.master.port, timeout=5)

    def failover(self) -> int:
        """SENTINEL FAILOVER (a clean switch, no kill): the new master's port."""
        old = self.master_port()
        assert old is not None
        c = self.sentinels[0].client()
        try:
            c.execute_command("SENTINEL", "FAILOVER", SERVICE)
        finally:
            c.close()
        return self.wait_promoted(old)

    def kill_master(self) -> tuple[int, float]:
        """kill -9 of whichever node is master now; its port and the time of the kill."""
        port = self.master_port()
        assert port is not None
        node = self.nodes[port]
        assert node.process is not None
        t = time.monotonic()
        node.process.send_signal(signal.SIGKILL)
        node.process.wait(10)
        if node.process.stderr:
            node.process.stderr.close()
        node.process = None
        return port, t

    def stop(self) -> None:
        for s in self.sentinels:
            s.stop()
        for node in self.nodes.values():
            node.resume()
            node.stop()


def _cluster_port() -> int:
    """A free port whose cluster bus port (+10000) is free too and still a port."""
    while True:
        port = free_port()
        if port <= 55535:
            with contextlib.suppress(OSError), socket.socket() as probe:
                probe.bind(("127.0.0.1", port + 10000))
                return port


class ClusterSet:
    """A Redis Cluster on loopback: `masters` masters (+ `replicas` replicas each), made
    with `redis-cli --cluster create` (Debian's redis-cli drives Valkey and Redis 8
    nodes too), node timeout 1 s so a killed master's replica takes over quickly."""

    def __init__(self, directory: Path, masters: int = 3, replicas: int = 0) -> None:
        require_marked("a cluster")
        self.directory = directory
        self.nodes: dict[int, SuiteRedis] = {}
        try:
            for i in range(masters * (1 + replicas)):
                node = SuiteRedis(directory / f"node-{i}", port=_cluster_port(), extra_args=[
                    *server_args(cluster=True), *REPL_NOW, "--cluster-enabled", "yes",
                    "--cluster-config-file", "nodes.conf",
                    "--cluster-node-timeout", "1000"])
                node.start()
                self.nodes[node.port] = node
            out = subprocess.run(
                [SERVER.cli, "--cluster", "create",
                 *(f"127.0.0.1:{p}" for p in self.nodes), "--cluster-replicas", str(replicas),
                 "--cluster-yes"], capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
            poll(self._ok, 60, "cluster_state:ok on every node, every replica in sync")
        except BaseException:
            self.stop()
            raise

    def _ok(self) -> bool:
        for port, node in self.nodes.items():
            if node.process is None:
                continue
            c = _client(port)
            try:
                info = c.execute_command("CLUSTER", "INFO").decode()
                if "cluster_state:ok" not in info:
                    return False
                if len(c.execute_command("CLUSTER", "SLOTS")) == 0:
                    return False
                repl = c.info("replication")
                # A replica that never synced cannot take over (replica validity).
                if repl.get("role") == "slave" and repl.get("master_link_status") != "up":
                    return False
            finally:
                c.close()
        return True

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in list(self.nodes)[:3])

    def live_port(self) -> int:
        return next(p for p, n in self.nodes.items() if n.process is not None)

    def owner(self, key: str) -> int:
        """Port of the master that serves key's slot now."""
        c = _client(self.live_port())
        try:
            slot = int(c.execute_command("CLUSTER", "KEYSLOT", key))
            for start, end, master, *_ in c.execute_command("CLUSTER", "SLOTS"):
                if int(start) <= slot <= int(end):
                    return int(master[1])
        finally:
            c.close()
        raise AssertionError(f"no node serves {key}")

    def client_for(self, key: str) -> redis.Redis:
        return _client(self.owner(key), timeout=5)

    def kill(self, port: int) -> float:
        node = self.nodes[port]
        assert node.process is not None
        t = time.monotonic()
        node.process.send_signal(signal.SIGKILL)
        node.process.wait(10)
        if node.process.stderr:
            node.process.stderr.close()
        node.process = None
        return t

    def stop(self) -> None:
        for node in self.nodes.values():
            node.resume()
            node.stop()
