"""`stagedoor status`: the queue at a glance, a table for people or --json for scripts.

Read-only: it sends only XINFO/XPENDING/XRANGE/XLEN/TIME (see stagedoor.telemetry.inspect).
Exit 0 when the numbers were read (a missing stream or group is reported, not an
error), 69 with one line when Redis cannot be reached, 1 when Redis answered with
something that is not our queue (WRONGTYPE on the key, say).

--check judges the numbers (stagedoor.console.check) and exits like a monitoring plugin:
0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN for every failure to judge (a bad setting,
Redis or the sentinels unreachable, a Cluster not ready, a reply that is not the queue),
one line on stdout.  --watch prints a
line every --interval seconds with the throughput (jobs acknowledged per second, from
the group's entries-read and pending counts) and the time to drain the backlog at that
rate, until Ctrl-C (or --samples lines).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

import orjson
import redis

from ... import config
from ...console.check import STATE_NAMES, Thresholds, evaluate, unknown
from ...console.client import console_client
from ...console.doctor.keys import kept
from ...console.fleet import fleet
from ...console.text import human_ms
from ...console.text import safe as escape
from ...exitcodes import EX_UNAVAILABLE
from ...redaction import redact
from ...stream import cluster
from ...stream.connection import sync_client
from ...stream.diagnose import outage
from ...stream.errors import OUTAGE_ERRORS, first_line
from ...telemetry.inspect import InspectError, queue_status, redis_memory, watch_sample
from ..flags import given, refuse

# Settings an operator may need to point the tool at the right queue.
SENTINEL_SETTINGS = ("sentinel_username", "sentinel_password_file", "sentinel_tls_ca_file")
CONNECTION_SETTINGS = ("redis_url", "redis_password_file", *SENTINEL_SETTINGS, "stream",
                       "group", "dead_stream", "socket_timeout", "connect_timeout")
# An operator tool is not latency-bound: give a remote Redis a little longer than 100 ms.
MIN_CLI_TIMEOUT = 2.0
WATCH_INTERVAL = 2.0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "status", help="Show the queue: length, lag, pending, queue age, dead letters.",
        description="Show the job stream, its consumer group, pending entries, the age of "
                    "the oldest undelivered job, per-consumer pending/idle, the dead-letter "
                    "stream and the trimmed-backlog alarm. Read-only.")
    config.add_arguments(p, only=(*CONNECTION_SETTINGS, "maxlen", "dead_maxlen"))
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (for scripts); with --check, the status with "
                   "the verdict under \"check\" and the plugin's exit code; with --watch, "
                   "one object per line")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="judge the queue and exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN "
                      "(a monitoring plugin; thresholds below, see docs/monitoring.md)")
    mode.add_argument("--kinds", action="store_true",
                      help="per job kind over the last hour: done, failed, retried, "
                      "dead-lettered, execution time and time in queue P50/P95/P99 (the "
                      "web console's Metrics tab)")
    mode.add_argument("--watch", action="store_true",
                      help="a line every --interval seconds: backlog, throughput, time to "
                      "drain (Ctrl-C ends it)")
    d = Thresholds()
    p.add_argument("--interval", type=_positive, default=argparse.SUPPRESS, metavar="SECONDS",
                   help="--watch: seconds between lines. [default: 2]")
    p.add_argument("--samples", type=int, default=argparse.SUPPRESS, metavar="N",
                   help="--watch: stop after N lines (0: until Ctrl-C). [default: 0]")
    p.add_argument("--warn-age", type=_positive, default=argparse.SUPPRESS, metavar="SECONDS",
                   help=f"--check: WARNING at this queue age. [default: {d.warn_age:g}]")
    p.add_argument("--crit-age", type=_positive, default=argparse.SUPPRESS, metavar="SECONDS",
                   help=f"--check: CRITICAL at this queue age. [default: {d.crit_age:g}]")
    p.add_argument("--warn-dead", type=int, default=argparse.SUPPRESS, metavar="N",
                   help=f"--check: WARNING at N dead letters. [default: {d.warn_dead}]")
    p.add_argument("--crit-dead", type=int, default=argparse.SUPPRESS, metavar="N",
                   help=f"--check: CRITICAL at N dead letters. [default: {d.crit_dead}]")
    p.add_argument("--warn-lag", type=_fraction, default=argparse.SUPPRESS, metavar="FRACTION",
                   help="--check: WARNING when the undelivered backlog reaches this share "
                   f"of MAXLEN. [default: {d.warn_lag:g}]")
    p.add_argument("--crit-lag", type=_fraction, default=argparse.SUPPRESS, metavar="FRACTION",
                   help="--check: CRITICAL at this share of MAXLEN (trimming loses jobs at "
                   f"1). [default: {d.crit_lag:g}]")
    p.set_defaults(func=run, parser=p)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value


def _fraction(text: str) -> float:
    value = _positive(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be a fraction in (0, 1]: {text!r}")
    return value


def cli_client(settings: config.Settings) -> redis.Redis:
    return sync_client(settings, timeout=max(settings.socket_timeout, MIN_CLI_TIMEOUT))


def unreachable(prog: str, settings: config.Settings, exc: BaseException) -> int:
    print(f"{prog}: {outage(settings, exc)}", file=sys.stderr)
    return EX_UNAVAILABLE


WATCH_FLAGS = ("interval", "samples")
CHECK_FLAGS = ("warn_age", "crit_age", "warn_dead", "crit_dead", "warn_lag", "crit_lag")


def run(args: argparse.Namespace) -> int:
    if not args.watch:
        refuse(args.parser, given(args, WATCH_FLAGS), "only with --watch")
    if not args.check:
        refuse(args.parser, given(args, CHECK_FLAGS), "only with --check")
    if args.check:
        return run_check(args)
    settings = config.from_args(args)
    if args.watch:
        return run_watch(args, settings)
    if args.kinds:
        # why here: `stagedoor status` without --kinds does not pay for the ring's module
        # (tests/cli/test_cli_imports.py: a command imports its own module only)
        from .status_kinds import run_kinds
        try:
            return run_kinds(settings, args.json)
        except OUTAGE_ERRORS as e:
            return unreachable("stagedoor status", settings, e)
    try:
        client = cli_client(settings)  # a Cluster client asks the nodes here
    except OUTAGE_ERRORS as e:
        return unreachable("stagedoor status", settings, e)
    try:
        status = queue_status(client, settings)
        status["redis_memory"] = redis_memory(client)
        status["fleet"] = fleet_status(settings)
        status["kept"] = kept_status(client, settings)
    except OUTAGE_ERRORS as e:
        return unreachable("stagedoor status", settings, e)
    except InspectError as e:
        print(f"stagedoor status: {e}", file=sys.stderr)
        return 1
    finally:
        client.close()
    _write(status, args.json)
    return 0


def kept_status(client: Any, settings: config.Settings) -> dict[str, Any] | None:
    """What stagedoor keeps in Redis besides the streams, by family, against the job
    stream's memory (the doctor's bounded SCAN, console/doctor/keys.py): only here, in the
    one-off `stagedoor status`, never in --watch or the supervisor's reports.  None on a
    Cluster (a SCAN is one node's: `stagedoor doctor` against each node)."""
    if cluster.is_cluster_url(settings.redis_url):
        return None
    finding = kept(client, settings)
    return {"state": STATE_NAMES[finding.state], "found": finding.found, "fix": finding.fix}


def fleet_status(settings: config.Settings) -> dict[str, Any] | None:
    """The registry and the pause flag (console/fleet.py), or None when the user may not
    read them (an ACL without those keys): the queue's numbers are still worth showing."""
    async def read() -> dict[str, Any]:
        client = console_client(settings)
        try:
            return (await fleet(client, settings)).to_json()
        finally:
            await client.aclose()

    try:
        return asyncio.run(read())
    except redis.ResponseError:
        return None


def format_fleet(fl: dict[str, Any]) -> list[str]:
    """The pause flag, the live workers and the consumers with nobody behind them."""
    lines: list[str] = []
    p = fl["paused"]
    if p["paused"]:
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(p["since"])) \
            if p.get("since") else "?"
        lines.append(f"PAUSED    since {since}" + (f" by {safe(p['by'])}" if p.get("by") else "")
                     + (f": {safe(p['reason'])}" if p.get("reason") else "")
                     + "; workers read nothing new (stagedoor resume)")
    else:
        lines.append("paused    no")
    workers = fl["workers"]
    lines.append(f"workers   {len(workers)} live (fleet registry)")
    if workers:
        head = ("host", "slot", "pid", "version", "renderer", "up", "handled", "held",
                "rss", "paused", "seen")
        rows = [head] + [(safe(w["host"]), str(w["slot"]), str(w["pid"]), safe(w["version"]),
                          safe(w["renderer"] or "-"),
                          human_ms(max(0.0, fl["time_ms"] - w["started"] * 1000)),
                          str(w["handled"]), str(w["in_flight"]),
                          f"{w['rss_bytes'] / 2**20:.0f}MB", "yes" if w["paused"] else "no",
                          human_ms(w["age_ms"]) + " ago") for w in workers]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines += ["  " + "  ".join(c.ljust(wd) for c, wd in zip(r, widths, strict=True)).rstrip()
                  for r in rows]
    for m in fl.get("malformed") or []:
        lines.append(f"MALFORMED presence record of {safe(m['consumer'])}: {safe(m['reason'])} "
                     "(not shown as a worker)")
    for c in fl["consumers"]:
        if c["orphaned"]:
            lines.append(f"ORPHANED  consumer {safe(c['name'])} holds {c['pending']} pending "
                         "entries and no live worker is behind it (they run again when a "
                         "worker of that name starts, or are reclaimed after claim_idle_ms)")
    return lines


def safe(text: str) -> str:
    return escape(str(text))


def _write(doc: dict[str, Any], as_json: bool, text: str | None = None) -> None:
    if as_json:
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_APPEND_NEWLINE))
        sys.stdout.flush()
    else:
        sys.stdout.write(format_status(doc) if text is None else text)
        sys.stdout.flush()


def run_check(args: argparse.Namespace) -> int:
    """A monitoring plugin's exit for every outcome: 0/1/2 from the numbers, 3 UNKNOWN
    for anything that kept us from judging them (a bad setting, Redis unreachable, a
    Cluster not ready, a reply that is not our queue, a bug), always one line."""
    thresholds = Thresholds(**{name: getattr(args, name) for name in CHECK_FLAGS
                               if hasattr(args, name)})
    status: dict[str, Any] | None = None
    settings: config.Settings | None = None
    try:
        settings = config.from_args(args)
        client = cli_client(settings)  # a Cluster client asks the nodes here
        try:
            status = queue_status(client, settings)
        finally:
            client.close()
        result = evaluate(status, settings.maxlen, thresholds)
    except config.ConfigError as e:
        result = unknown(f"config error: {e}")
    except OUTAGE_ERRORS as e:
        assert settings is not None  # from_args raises only ConfigError
        result = unknown(outage(settings, e))
    except InspectError as e:
        result = unknown(str(e))
    except redis.ResponseError as e:
        result = unknown(f"Redis refused: {first_line(e)}")
    except Exception as e:  # UNKNOWN, not a traceback and exit 1 (which is WARNING)
        result = unknown(f"{type(e).__name__}: {first_line(e)}")
    doc = {**(status or {}), "check": result.as_dict()} if status else {"check": result.as_dict()}
    _write(doc, args.json, redact(result.line()) + "\n")
    return result.state


def run_watch(args: argparse.Namespace, settings: config.Settings) -> int:
    client = cli_client(settings)
    previous: tuple[float, int] | None = None
    lines = 0
    try:
        while True:
            try:
                status = queue_status(client, settings)
            except OUTAGE_ERRORS as e:
                return unreachable("stagedoor status", settings, e)
            except InspectError as e:
                print(f"stagedoor status: {e}", file=sys.stderr)
                return 1
            sample = watch_sample(status, previous)
            previous = (status["time_ms"] / 1000, sample["done"])
            _write(sample, args.json, format_watch(sample))
            lines += 1
            if getattr(args, "samples", 0) and lines >= args.samples:
                return 0
            time.sleep(getattr(args, "interval", WATCH_INTERVAL))
    except KeyboardInterrupt:  # the usual way to end a watch
        return 0
    finally:
        client.close()


def format_watch(w: dict[str, Any]) -> str:
    when = time.strftime("%H:%M:%S", time.localtime(w["time_ms"] / 1000))
    rate = "-" if w["rate"] is None else f"{w['rate']:.1f}/s"
    if w["drain_seconds"] is None:
        drain = "-" if w["rate"] is None else "never at this rate"
    else:
        drain = human_ms(w["drain_seconds"] * 1000)
    line = (f"{when}  waiting {w['waiting']}  pending {w['pending']}  queue age "
            f"{human_ms(w['queue_age_ms'])}  done {w['done']} ({rate})  drained in {drain}"
            f"  dead {w['dead']}")
    return line + ("  TRIMMED ALARM" if w["trimmed_alarm"] else "") + "\n"


def _v(value: Any) -> str:
    return "-" if value is None else str(value)


def format_status(st: dict[str, Any]) -> str:
    """The status dict as a small table an operator reads at 2 a.m."""
    stream, group, pending = st["stream"], st["group"], st["pending"]
    trimmed, dead = st["trimmed_backlog"], st["dead"]
    lines: list[str] = []
    if stream["exists"]:
        lines.append(f"stream    {stream['name']}: length {stream['length']}, first "
                     f"{_v(stream['first_id'])}, last {_v(stream['last_id'])}, entries added "
                     f"{_v(stream['entries_added'])}")
    else:
        lines.append(f"stream    {stream['name']}: MISSING (no job was ever added, or the key "
                     "was deleted)")
    if group["exists"]:
        lines.append(f"group     {group['name']}: last delivered {_v(group['last_delivered_id'])}"
                     f", entries read {_v(group['entries_read'])}, lag {_v(group['lag'])}"
                     f" (undelivered, counted: {_v(st.get('undelivered'))}), "
                     f"consumers {group['consumers']}")
    elif stream["exists"]:
        lines.append(f"group     {group['name']}: MISSING (no worker has started on this stream)")
    else:
        lines.append(f"group     {group['name']}: MISSING")
    oldest = pending["oldest"]
    if oldest:
        lines.append(f"pending   {pending['count']}: oldest {oldest['id']} on {oldest['consumer']}"
                     f", queued {human_ms(oldest['age_ms'])} ago, idle "
                     f"{human_ms(oldest['idle_ms'])}, delivered {oldest['deliveries']}x")
    else:
        lines.append(f"pending   {pending['count']}")
    if st["oldest_undelivered_id"] and st["queue_age_ms"] is None:
        lines.append(f"queue age UNKNOWN (oldest undelivered {st['oldest_undelivered_id']} "
                     f"is ahead of the server's clock)")
    elif st["oldest_undelivered_id"]:
        lines.append(f"queue age {human_ms(st['queue_age_ms'])} (oldest undelivered "
                     f"{st['oldest_undelivered_id']})")
    else:
        lines.append("queue age " + ("0 (nothing waiting)" if st["queue_age_ms"] is not None
                                     else "-"))
    if st.get("ids_ahead_ms"):
        lines.append(f"IDS AHEAD WARNING: the stream's newest id is "
                     f"{human_ms(st['ids_ahead_ms'])} ahead of the server's clock (a "
                     f"producer's or a master's clock ran ahead); every id added since "
                     f"carries that time, so queue age is unknown until the clock "
                     f"catches up")
    if trimmed["alarm"]:
        n = trimmed["undelivered_trimmed"]
        what = f"{n} entries" if n is not None else "entries"
        lines.append(f"TRIMMED   ALARM: {what} were trimmed before the group delivered them "
                     f"(lost jobs; method {trimmed['method']})")
    else:
        lines.append("trimmed   ok (no undelivered entry was trimmed)")
    memory = st.get("redis_memory")
    if memory:
        used, limit = memory["used_bytes"], memory["maxmemory_bytes"]
        text = f"memory    used {used / 2**20:.1f} MB"
        text += (f" of maxmemory {limit / 2**20:.1f} MB ({memory['policy']})" if limit
                 else " (no maxmemory)")
        if memory["full"]:
            text += (": FULL, Redis refuses writes; workers take no new entries until it "
                     "clears (free memory or raise maxmemory)")
        lines.append(text)
    kept = st.get("kept")
    if kept:
        state = "" if kept["state"] == "OK" else f"{kept['state']}: "
        lines.append(f"kept      {state}{kept['found']}"
                     + (f" ({kept['fix']})" if kept["fix"] else ""))
    text = f"dead      {dead['name']}: {dead['length']} entries"
    if dead.get("maxlen"):
        text += f" of ~{dead['maxlen']} (dead_maxlen)"
    if dead.get("trimmed"):
        text += f", {dead['trimmed']} older ones TRIMMED at the cap (gone)"
    lines.append(text + (" (see: stagedoor dead list)" if dead["length"] else ""))
    if st.get("fleet"):
        lines += format_fleet(st["fleet"])
    consumers = st["consumers"]
    if consumers:
        width = max(8, *(len(c["name"]) for c in consumers))
        lines.append("")
        # `inactive` (since the last successful read) only where the server reports it.
        inactive = any(c.get("inactive_ms") is not None for c in consumers)
        # Beside each consumer, the live process behind its name (the fleet registry).
        fl = st.get("fleet")
        procs = {w["consumer"]: f"{safe(w['host'])} pid {w['pid']}"
                 for w in (fl or {}).get("workers", [])}
        lines.append(f"{'consumer':<{width}}  {'pending':>7}  {'idle':>8}"
                     + (f"  {'inactive':>8}" if inactive else "")
                     + ("  process" if fl else ""))
        for c in consumers:
            row = f"{c['name']:<{width}}  {c['pending']:>7}  {human_ms(c['idle_ms']):>8}"
            if inactive:
                ms = c.get("inactive_ms")
                row += f"  {'never' if ms is None or ms < 0 else human_ms(ms):>8}"
            if fl:
                row += "  " + procs.get(c["name"], "NONE (orphaned)" if c["pending"] else "-")
            lines.append(row)
    return "\n".join(lines) + "\n"
