"""The invariants every fault case asserts, written once.

    handled      every enqueued job has a done line in the ledger, or is in jobs:dead,
                 or was reported trimmed / lost with the data (the test says which)
    no early ack an entry that was delivered and is no longer pending has a done line
                 or a dead-letter entry (read Redis first, the ledger second: the done
                 line is written before the handler returns, the ack after)
    duplicates   two start lines for one outbox_id only where the test injected a fault;
                 counted; the side effect (an O_EXCL file per outbox_id) exists exactly
                 once per handled job, and "effect_exists" (a second attempt that got past
                 ctx.already_done) stays within the test's bound.  A start marked
                 "after_failure" follows a "failed" line of the same job in the same
                 process (its own Redis call timed out on a loaded box, a time limit):
                 the retry policy's run, counted in Summary.retries, not as a delivery
    dead once    no entry is dead-lettered twice; poison jobs are there exactly once,
                 with their original fields
    drained      the pending list is empty at the end
    idle         a worker with nothing to do uses almost no CPU, and Redis sees about one
                 XREADGROUP per BLOCK period from it
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import psutil
import redis

from stagedoor.config import Settings
from stagedoor.telemetry.inspect import parse_id
from stagedoor.worker.presence import PRESENCE_MIN_INTERVAL

from .harness import wait_for


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Complete lines only: a line being appended right now may be read half-written
    (an O_APPEND write is atomic against other writers, not against a reader)."""
    if not path.exists():
        return []
    data = path.read_bytes()
    data = data[:data.rfind(b"\n") + 1]
    return [orjson.loads(line) for line in data.splitlines() if line]


def raw_client(client: redis.Redis) -> redis.Redis:
    out = redis.Redis(connection_pool=client.connection_pool)
    for name in ("XREADGROUP", "XAUTOCLAIM", "XRANGE", "XREVRANGE", "XPENDING", "XINFO GROUPS"):
        out.response_callbacks.pop(name, None)
    return out


@dataclass
class Ledger:
    directory: Path

    def __post_init__(self) -> None:
        (self.directory / "effects").mkdir(parents=True, exist_ok=True)
        (self.directory / "gates").mkdir(parents=True, exist_ok=True)

    def events(self) -> list[dict[str, Any]]:
        return read_jsonl(self.directory / "ledger.jsonl")

    def enqueued(self) -> list[dict[str, Any]]:
        return read_jsonl(self.directory / "enqueued.jsonl")

    def effects(self) -> set[int]:
        return {int(p.name) for p in (self.directory / "effects").iterdir()}

    def done(self) -> set[int]:
        return {e["outbox_id"] for e in self.events() if e["event"] == "done"}

    def starts(self, pid: int | None = None) -> collections.Counter[int]:
        return collections.Counter(e["outbox_id"] for e in self.events()
                                   if e["event"] == "start" and pid in (None, e["pid"]))

    def count(self, event: str) -> int:
        return sum(1 for e in self.events() if e["event"] == event)


def pending_ids(client: redis.Redis, s: Settings) -> dict[str, tuple[str, int]]:
    """entry id -> (consumer, deliveries) of the whole pending list."""
    try:
        rows = raw_client(client).execute_command("XPENDING", s.stream, s.group, "-", "+",
                                                  1_000_000)
    except redis.ResponseError as e:
        if str(e).startswith("NOGROUP"):
            return {}
        raise
    return {r[0].decode(): (r[1].decode(), int(r[3])) for r in rows}


def dead_entries(client: redis.Redis, s: Settings) -> list[tuple[str, list[bytes]]]:
    rows = raw_client(client).execute_command("XRANGE", s.dead_stream, "-", "+")
    return [(r[0].decode(), r[1]) for r in rows]


def dead_meta(fields: Sequence[bytes]) -> dict[str, str]:
    return {fields[i][5:].decode(): fields[i + 1].decode("utf-8", "replace")
            for i in range(0, len(fields) - 1, 2) if fields[i].startswith(b"dead:")}


def last_delivered(client: redis.Redis, s: Settings) -> tuple[int, int] | None:
    try:
        groups = client.xinfo_groups(s.stream)
    except redis.ResponseError:
        return None
    for g in groups:
        name = g["name"].decode() if isinstance(g["name"], bytes) else g["name"]
        if name == s.group:
            return parse_id(g["last-delivered-id"])
    return None


def check_no_early_ack(client: redis.Redis, s: Settings, ledger: Ledger, *,
                       excused: Collection[str] = ()) -> int:
    """Every delivered, no-longer-pending entry has a done line or a dead entry.

    Reads Redis in the order group cursor, pending list, dead letters, and the ledger
    last, so a job acked before we looked has its done line on disk by then.
    Returns how many acked entries were checked."""
    cursor = last_delivered(client, s)
    pending = pending_ids(client, s)
    dead_sources = {dead_meta(f).get("source_id") for _i, f in dead_entries(client, s)}
    done = ledger.done()
    checked = 0
    bad = []
    for row in ledger.enqueued():
        eid = row["entry_id"]
        if cursor is None or parse_id(eid) > cursor or eid in pending or eid in excused:
            continue
        checked += 1
        if row["outbox_id"] not in done and eid not in dead_sources:
            bad.append(row)
    assert not bad, f"acked without a done line or a dead letter: {bad[:5]}"
    return checked


def wait_drained(client: redis.Redis, s: Settings, timeout: float = 20) -> None:
    wait_for(lambda: not pending_ids(client, s), timeout, "the pending list to drain")


def wait_handled(client: redis.Redis, s: Settings, ledger: Ledger, outbox_ids: Collection[int],
                 timeout: float = 20) -> None:
    want = set(outbox_ids)
    wait_for(lambda: want <= ledger.done(), timeout,
             f"{len(want)} jobs to be handled (missing e.g. "
             f"{sorted(want - ledger.done())[:5]})")


@dataclass
class Summary:
    enqueued: int
    handled: int
    dead: int
    excused: int
    duplicates: dict[int, int] = field(default_factory=dict)
    effect_exists: int = 0
    retries: int = 0


def check_all(client: redis.Redis, s: Settings, ledger: Ledger, *,
              duplicates_allowed: Collection[int] | int = 0,
              effect_exists_allowed: int = 0,
              poison: Mapping[str, str] | None = None,
              excused: Collection[str] = (),
              drained: bool = True) -> Summary:
    """The end-of-case invariants.

    duplicates_allowed: the outbox_ids where the test injected a fault (a set), or a
    bound on how many outbox_ids may have more than one start line (an int).
    poison: entry id -> a substring of its expected dead:error.
    excused: entry ids reported trimmed or lost with Redis's data."""
    if drained:
        wait_drained(client, s)
    check_no_early_ack(client, s, ledger, excused=excused)
    events = ledger.events()
    enqueued = ledger.enqueued()
    done = {e["outbox_id"] for e in events if e["event"] == "done"}
    dead = dead_entries(client, s)
    sources = collections.Counter(dead_meta(f).get("source_id") for _i, f in dead)
    twice = {k: n for k, n in sources.items() if n > 1}
    assert not twice, f"dead-lettered more than once: {twice}"

    missing = [r for r in enqueued if r["outbox_id"] not in done
               and r["entry_id"] not in sources and r["entry_id"] not in excused]
    assert not missing, f"{len(missing)} enqueued jobs neither handled, dead nor excused: " \
                        f"{missing[:5]}"

    for eid, reason in (poison or {}).items():
        assert sources.get(eid) == 1, f"poison entry {eid} is in {s.dead_stream} " \
                                      f"{sources.get(eid, 0)} times, not once"
        [fields] = [f for _i, f in dead if dead_meta(f).get("source_id") == eid]
        meta = dead_meta(fields)
        assert reason in meta["error"], f"{eid}: dead:error {meta['error']!r} lacks {reason!r}"
        assert int(meta["deliveries"]) >= 1 and meta["consumer"]
        row = next(r for r in enqueued if r["entry_id"] == eid)
        if row["kind"] != "raw":
            orig = [b"kind", row["kind"].encode(), b"order_id", str(row["outbox_id"]).encode(),
                    b"outbox_id", str(row["outbox_id"]).encode()]
            assert fields[:6] == orig, f"{eid}: dead entry lost its fields: {fields[:10]}"

    runs = [e for e in events if e["event"] == "start"]
    starts = collections.Counter(e["outbox_id"] for e in runs if not e.get("after_failure"))
    retries = len(runs) - sum(starts.values())
    dups = {k: n for k, n in starts.items() if n > 1}
    poison_ids = {r["outbox_id"] for r in enqueued if r["entry_id"] in (poison or {})}
    real_dups = {k: n for k, n in dups.items() if k not in poison_ids}
    if isinstance(duplicates_allowed, int):
        assert len(real_dups) <= duplicates_allowed, \
            f"{len(real_dups)} jobs started more than once (allowed {duplicates_allowed}): " \
            f"{dict(list(real_dups.items())[:10])}"
    else:
        extra = set(real_dups) - set(duplicates_allowed)
        assert not extra, f"duplicates where no fault was injected: {sorted(extra)[:10]}"

    effect_exists = sum(1 for e in events if e["event"] == "effect_exists")
    assert effect_exists <= effect_exists_allowed, \
        f"{effect_exists} deliveries got past ctx.already_done to a side effect that " \
        f"already existed (allowed {effect_exists_allowed})"
    effects = ledger.effects()
    handled_kinds = {r["outbox_id"] for r in enqueued
                     if r["kind"] in ("ledger", "hold_pre", "hold_post", "slow")}
    assert effects <= done, f"side effects without a done line: {sorted(effects - done)[:10]}"
    no_effect = (done & handled_kinds) - effects
    assert not no_effect, f"done without a side effect: {sorted(no_effect)[:10]}"
    return Summary(enqueued=len(enqueued), handled=len(done), dead=len(dead),
                   excused=len(excused), duplicates=dups, effect_exists=effect_exists,
                   retries=retries)


def commandstats(client: redis.Redis) -> dict[str, int]:
    info = client.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in info.items()}


def assert_idle(client: redis.Redis, pids: Sequence[int], *, block_ms: int,
                seconds: float = 2.0, cpu_limit: float = 0.2,
                settle: float = PRESENCE_MIN_INTERVAL + 0.5) -> dict[str, int]:
    """No busy loop: CPU of the processes (and their children) and Redis calls over an
    idle window.  The sleeps here are the measurement window and, before it, one presence
    beat: a worker reports the work it just finished at its next beat (the per-kind
    counts, worker/presence.py flush_kinds: one script, its HINCRBYs counted one by one in
    commandstats), once, and that report belongs to the work, not to the idle time.  A
    worker that writes at every beat while idle is still seen (the window spans two)."""
    time.sleep(settle)
    procs = []
    for pid in pids:
        p = psutil.Process(pid)
        procs += [p, *p.children(recursive=True)]

    def cpu() -> float:
        total = 0.0
        for p in procs:
            with _gone():
                t = p.cpu_times()
                total += t.user + t.system
        return total

    before_cpu, before = cpu(), commandstats(client)
    time.sleep(seconds)
    after_cpu, after = cpu(), commandstats(client)
    used = after_cpu - before_cpu
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    delta = {k: v for k, v in delta.items() if v and k != "info"}
    reads = math.ceil(seconds * 1000 / block_ms) + 2
    assert used < cpu_limit * max(1, len(procs)), \
        f"{used:.3f}s CPU in {seconds}s idle over {len(procs)} processes: a busy loop"
    n = max(1, len(procs))
    assert delta.get("xreadgroup", 0) <= reads * n, \
        f"{delta.get('xreadgroup')} XREADGROUP in {seconds}s idle (BLOCK {block_ms} ms, " \
        f"{n} processes): {delta}"
    assert sum(delta.values()) <= 3 * reads * n + 10, f"too many idle commands: {delta}"
    return delta


class _gone:
    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, *_: Any) -> bool:
        return exc_type is not None and issubclass(exc_type, psutil.NoSuchProcess)
