"""The doctor's checks of the Redis server the settings point at: reachable, the version
floor (7.0.5), the ACL permissions of the workers' user (and of a producer user),
maxmemory policy, persistence, replication and failover, and its clock against ours.

The workers' own user is deliberately poor (docs/security.md: no INFO, CONFIG or ACL),
so what only an administrator may read is read through `--admin-url` (default: the
workers' URL; a refusal there is UNKNOWN with what to pass).  ACL DRYRUN (Redis 7+)
asks the server whether the user may run each command the worker (or the producer)
sends, with the keys it sends it on."""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Sequence
from typing import Any

import redis

from ...config import ConfigError, Settings
from ...exitcodes import CHECK_CRITICAL, CHECK_OK, CHECK_UNKNOWN, CHECK_WARNING
from ...redaction import redact
from ...stream import cluster, sentinel
from ...stream.connection import ServerTooOld, check_server, sync_client
from ...stream.errors import OUTAGE_ERRORS, first_line
from ...stream.keys import done_key, marks_key, order_key, starts_key, trimmed_key
from . import Finding
from .keys import kept

CLOCK_WARN, CLOCK_CRIT = 2.0, 60.0          # seconds between Redis TIME and ours
SHA = "0" * 40                              # any script hash: DRYRUN checks, never runs
AUTH_FIX = ("Redis is up: check the user name and the password (the URL's, or "
            "--redis-password-file) against its ACL (docs/security.md)")
ADMIN_HINT = ("pass --admin-url redis://<admin user>:<password>@host:port/0 (a user "
              "allowed INFO, CONFIG GET and ACL DRYRUN), or run the check there")


def worker_commands(settings: Settings) -> list[list[str]]:
    """Every command a worker sends, with the keys it sends it on (docs/security.md)."""
    s, g, dead = settings.stream, settings.group, settings.dead_stream
    order = order_key(settings, 1)
    done, marks = done_key(settings, 1, 1), marks_key(settings, 1, 0)
    starts = starts_key(settings, "1")
    out = [["HELLO", "2"], ["CLIENT", "SETNAME", "x"], ["CLIENT", "ID"],
           ["CLIENT", "UNBLOCK", "1"], ["TIME"], ["SCRIPT", "LOAD", "return 1"],
           ["EVALSHA", SHA, "2", s, dead], ["EVALSHA", SHA, "1", order],
           ["XGROUP", "CREATE", s, g, "$", "MKSTREAM"],
           ["XREADGROUP", "GROUP", g, "c", "COUNT", "1", "STREAMS", s, ">"],
           ["XACK", s, g, "0-1"], ["XAUTOCLAIM", s, g, "c", "0", "0-0"], ["XPENDING", s, g],
           ["XADD", dead, "*", "f", "v"], ["XRANGE", s, "-", "+"], ["XLEN", s],
           ["XINFO", "STREAM", s], ["XINFO", "GROUPS", s], ["XINFO", "CONSUMERS", s, g],
           ["HMGET", order, "data"], ["HGET", order, "f"], ["HSET", order, "f", "v"],
           ["HDEL", order, "f"], ["HINCRBY", order, "f", "1"],
           ["EXISTS", done], ["GET", done], ["SET", done, "1"],
           ["HGET", marks, "1"], ["HSET", marks, "1", "v"], ["EXPIRE", marks, "1"],
           ["DEL", done], ["INCRBY", starts, "1"], ["EXPIRE", starts, "1"]]
    if cluster.is_cluster_url(settings.redis_url):
        out += [["CLUSTER", "SLOTS"], ["COMMAND"], ["ASKING"]]
    return out


def producer_commands(settings: Settings) -> list[list[str]]:
    """What `enqueue` sends: one script per chunk (the backlog check before the XADD)."""
    s, g, trimmed = settings.stream, settings.group, trimmed_key(settings)
    return [["SCRIPT", "LOAD", "return 1"], ["EVALSHA", SHA, "1", s],
            ["EVALSHA", SHA, "1", trimmed], ["XGROUP", "CREATE", s, g, "$", "MKSTREAM"],
            ["XADD", s, "*", "f", "v"], ["XINFO", "STREAM", s], ["XINFO", "GROUPS", s],
            ["HGET", trimmed, "f"], ["HSET", trimmed, "f", "v"], ["HINCRBY", trimmed, "f", "1"]]


def url_user(url: str) -> str:
    return urllib.parse.urlsplit(url).username or "default"


def _name(cmd: Sequence[str]) -> str:
    """XINFO STREAM, not XINFO: the grant is per subcommand."""
    return " ".join(cmd[:2]) if cmd[0] in ("CLIENT", "XINFO", "XGROUP", "SCRIPT",
                                           "CLUSTER") else cmd[0]


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def acl(admin: Any, user: str, commands: Sequence[Sequence[str]], role: str) -> Finding:
    name = f"redis ACL ({role} user {user})"
    if user == "default":
        return Finding(name, CHECK_OK, "the default user: every command allowed "
                       "(docs/security.md: a user of its own is safer)")
    denied = []
    for cmd in commands:
        try:
            reply = admin.execute_command("ACL", "DRYRUN", user, *cmd)
        except redis.ResponseError as e:
            msg = first_line(e)
            # refused to us (NoPermissionError: redis-py drops the NOPERM prefix), or a
            # server without DRYRUN; a refusal to the user is a reply, not an error
            if isinstance(e, redis.exceptions.NoPermissionError) or "acl|dryrun" in msg \
                    or "unknown subcommand" in msg.lower():
                return Finding(name, CHECK_UNKNOWN, f"ACL DRYRUN refused: {msg}", ADMIN_HINT)
            if "user" in msg.lower() and "not" in msg.lower():
                return Finding(name, CHECK_CRITICAL, msg, "create it with the ACL SETUSER "
                               "line of docs/security.md")
            denied.append(f"{_name(cmd)}: {msg}")
            continue
        if _text(reply) != "OK":  # the reason, as a string reply
            denied.append(f"{_name(cmd)}: {_text(reply)}")
    if denied:
        return Finding(name, CHECK_CRITICAL, f"{len(denied)} of {len(commands)} commands "
                       f"refused: {'; '.join(denied)}",
                       f"give {user} the ACL SETUSER line of docs/security.md")
    return Finding(name, CHECK_OK, f"all {len(commands)} commands the {role} sends are allowed")


def _config(admin: Any, *names: str) -> dict[str, str]:
    reply = admin.execute_command("CONFIG", "GET", *names)
    items = reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2], strict=True)
    return {_text(k): _text(v) for k, v in items}


def _info(admin: Any, section: str) -> dict[str, str]:
    reply = admin.execute_command("INFO", section)
    if isinstance(reply, dict):  # redis-py parses INFO (its callback is kept)
        return {_text(k): _text(v) for k, v in reply.items()}
    pairs = (line.strip().split(":", 1) for line in _text(reply).splitlines() if ":" in line)
    return {k: v for k, v in pairs}


def server_config(admin: Any, settings: Settings) -> list[Finding]:
    try:
        conf = _config(admin, "maxmemory-policy", "appendonly", "appendfsync")
        repl = _info(admin, "replication")
    except redis.ResponseError as e:
        return [Finding("redis configuration", CHECK_UNKNOWN,
                        f"cannot read it: {first_line(e)}", ADMIN_HINT)]
    out = []
    policy = conf.get("maxmemory-policy", "?")
    if policy == "noeviction":
        out.append(Finding("redis maxmemory-policy", CHECK_OK, "noeviction"))
    else:
        out.append(Finding("redis maxmemory-policy", CHECK_WARNING, f"{policy}: when memory "
                           "is full Redis evicts keys: queued jobs, order data, done marks",
                           "CONFIG SET maxmemory-policy noeviction, and the same in redis.conf"))
    if conf.get("appendonly") != "yes":
        out.append(Finding("redis persistence", CHECK_WARNING, "appendonly no: a restart "
                           "loses the jobs and acks since the last snapshot",
                           "appendonly yes and appendfsync always (or everysec) in redis.conf"))
    elif conf.get("appendfsync") == "no":
        out.append(Finding("redis persistence", CHECK_WARNING, "appendonly yes, appendfsync "
                           "no: the kernel decides when enqueues reach the disk",
                           "appendfsync always (or everysec: about a second at risk)"))
    else:
        out.append(Finding("redis persistence", CHECK_OK,
                           f"appendonly yes, appendfsync {conf.get('appendfsync')}"))
    role, replicas = repl.get("role", "?"), int(repl.get("connected_slaves", "0") or 0)
    via_sentinel = sentinel.is_sentinel_url(settings.redis_url)
    if role != "master":
        out.append(Finding("redis replication", CHECK_CRITICAL, f"role {role}: the URL "
                           "points at a replica, which refuses the workers' writes",
                           "point --redis-url at the master, or use redis+sentinel://"))
    elif via_sentinel and replicas == 0:
        out.append(Finding("redis replication", CHECK_WARNING, "Sentinel's master has no "
                           "replica: a failover has nothing to promote",
                           "attach a replica (replicaof) to the master"))
    else:
        how = "through Sentinel" if via_sentinel else "no Sentinel: a lost host waits for " \
            "its restart (README Running it for real: Failover)"
        out.append(Finding("redis replication", CHECK_OK,
                           f"master, {replicas} replica(s), {how}"))
    return out


def clock(client: Any) -> Finding:
    t0 = time.time()
    sec, usec = client.execute_command("TIME")
    t1 = time.time()
    skew = int(sec) + int(usec) / 1e6 - (t0 + t1) / 2
    line = f"Redis TIME is {skew:+.3f} s from this host's clock"
    if abs(skew) >= CLOCK_CRIT:
        return Finding("clock", CHECK_CRITICAL, line, "sync both clocks (chrony/timesyncd): "
                       "queue ages and idle times would be wrong")
    if abs(skew) >= CLOCK_WARN:
        return Finding("clock", CHECK_WARNING, line, "sync both clocks (chrony/timesyncd)")
    return Finding("clock", CHECK_OK, line)


def checks(settings: Settings, admin_url: str | None, producer_user: str | None
           ) -> list[Finding]:
    shown = redact(settings.redis_url)
    try:
        client = sync_client(settings, timeout=5.0)
        hello = client.execute_command("HELLO", "2")
    except (redis.AuthenticationError, redis.exceptions.AuthorizationError) as e:
        # ConnectionErrors to redis-py, but Redis is up and said no: not "start Redis"
        return [Finding("redis", CHECK_CRITICAL, f"{shown} refused the credentials: "
                        f"{first_line(e)}", AUTH_FIX)]
    except OUTAGE_ERRORS as e:
        return [Finding("redis", CHECK_CRITICAL, f"{shown} unreachable: {first_line(e)}",
                        "start Redis, or point --redis-url (STAGEDOOR_REDIS_URL) at it")]
    except redis.ResponseError as e:  # WRONGPASS, NOAUTH, NOPERM on HELLO
        return [Finding("redis", CHECK_CRITICAL, f"{shown} refused: {first_line(e)}",
                        AUTH_FIX)]
    info = dict(zip(hello[::2], hello[1::2], strict=True)) if isinstance(hello, list) else hello
    out = []
    try:
        version = check_server(info, settings)
        out.append(Finding("redis", CHECK_OK, f"{shown}: {_text(info.get(b'server', 'redis'))} "
                           f"{'.'.join(map(str, version))} (>= 7.0.5)"))
    except (ServerTooOld, ConfigError) as e:
        out.append(Finding("redis", CHECK_CRITICAL, f"{shown}: {e}",
                           "upgrade to Redis >= 7.0.5 or Valkey >= 7.2"))
    admin = redis.Redis.from_url(admin_url, socket_timeout=5.0) if admin_url else client
    try:
        out.append(acl(admin, url_user(settings.redis_url), worker_commands(settings), "worker"))
        if producer_user:
            out.append(acl(admin, producer_user, producer_commands(settings), "producer"))
        out += server_config(admin, settings)
        out.append(kept(admin, settings))
        out.append(clock(client))
    except OUTAGE_ERRORS as e:
        out.append(Finding("redis", CHECK_CRITICAL, f"lost during the checks: {first_line(e)}",
                           "see why Redis went away (its log)"))
    finally:
        client.close()
        if admin is not client:
            admin.close()
    return out
