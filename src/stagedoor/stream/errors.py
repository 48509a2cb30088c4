"""What an error means for a job or an operator: permanent, an outage, or transient.

One place decides it, so the policy (retry or dead-letter), the worker (pause while
Redis is full) and the CLI (one line, which exit code) agree:

    permanent   will fail the same way on every delivery: a read-only filesystem
                (EROFS), no permission (EACCES, EPERM), a path that is not what it
                should be (ENOTDIR, EISDIR, ELOOP), a Redis key of the wrong type
                (WRONGTYPE).  Dead-letter at once, with the error as the reason.
    oom         Redis refuses writes: maxmemory is reached (noeviction).  Reads and
                XACK still work; retrying a handler cannot help until memory is back.
    transient   everything else that is the world's fault (ENOSPC, timeouts, a reset
                connection): retry with backoff, then leave pending.

ENOSPC is transient on purpose: a full disk is freed by an operator or a log
rotation, and the job should then run, not sit in the dead-letter stream.
"""

from __future__ import annotations

import errno
import re
import ssl

import redis
from redis.asyncio.sentinel import MasterNotFoundError as AsyncMasterNotFoundError
from redis.exceptions import MasterDownError, ReadOnlyError, SlotNotCoveredError
from redis.sentinel import MasterNotFoundError

from ..errors import StagedoorError
from ..redaction import redact

PERMANENT_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR,
                              errno.EISDIR, errno.ELOOP, errno.ENAMETOOLONG})


def is_oom(exc: BaseException) -> bool:
    """Redis's OOM reply (maxmemory reached with noeviction), from redis-py or resp.py."""
    return isinstance(exc, redis.exceptions.OutOfMemoryError) or (
        isinstance(exc, redis.ResponseError) and str(exc).startswith("OOM"))


def is_wrongtype(exc: BaseException) -> bool:
    return isinstance(exc, redis.ResponseError) and str(exc).startswith("WRONGTYPE")


def is_permanent(exc: BaseException) -> bool:
    """Errors that no retry or redelivery can fix (see the module docstring)."""
    if is_wrongtype(exc):
        return True
    return isinstance(exc, OSError) and exc.errno in PERMANENT_ERRNOS


def first_line(exc: BaseException) -> str:
    """The first line of an error's text, secrets masked: redis-py's texts can carry a URL
    or a client's connection options."""
    text = redact(str(exc)).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class MasterChanged(StagedoorError, redis.ConnectionError):
    """The server answered as a replica: find the master again (a failover happened)."""


def is_demoted(text: str) -> bool:
    """An error reply's text (as hiredis gives it, or redis-py's ResponseError) that says
    the server is not, or no longer, the master: a failover demoted it, or the sentinels
    have not yet caught up.  Every wording a replica answers stagedoor's commands with
    (checked on Redis 7.0 and 8.2 and Valkey 8.1):

        READONLY You can't write against a read only replica.   any write, a script's too
        MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.
                                         any command, a script or WAIT too, while a demoted
                                         master has no link to its new master yet
        UNBLOCKED force unblock from blocking operation, instance state changed
        (master -> replica?)             a blocked XREADGROUP or WAIT at the demotion
        ERR WAIT cannot be used with replica instances. ...   WAIT (and WAITAOF) sent to a
                                         replica: a producer's XADDs ran before the demotion

    Only that UNBLOCKED: "UNBLOCKED the stream key no longer exists" is Redis 7.0's
    deleted stream (queue.is_nogroup), CLIENT UNBLOCK ERROR's starts "UNBLOCKED" too."""
    return (text.startswith(("READONLY", "MASTERDOWN"))
            or (text.startswith("UNBLOCKED") and "replica" in text)
            or "cannot be used with replica instances" in text)


def master_changed(exc: BaseException) -> bool:
    """exc says the server answered as a replica (is_demoted), whoever parsed the reply:
    the lean connection (MasterChanged), redis-py (READONLY and MASTERDOWN become
    ReadOnlyError and MasterDownError, prefix stripped; the rest a ResponseError), or
    redis-py's Sentinel connection, which turns READONLY and UNBLOCKED into
    ConnectionError("The previous master is now a slave"), raised while it handles the
    reply (its __context__)."""
    if isinstance(exc, MasterChanged | ReadOnlyError | MasterDownError):
        return True
    if isinstance(exc, redis.ResponseError):
        return is_demoted(str(exc))
    if isinstance(exc, redis.ConnectionError):
        reply = exc.__context__
        return isinstance(reply, ReadOnlyError) or (
            isinstance(reply, redis.ResponseError) and is_demoted(str(reply)))
    return False


OOM_ADVICE = ("Redis is out of memory (maxmemory reached, noeviction): it refuses writes "
              "until memory is freed or maxmemory raised")


def cluster_not_ready(exc: BaseException) -> str | None:
    """'cluster not ready: <cause>' when exc says the Cluster is up but does not serve
    (slots not assigned, cluster_state:fail), else None.  redis-py raises these as
    RedisClusterException (not a RedisError) or as a CLUSTERDOWN reply."""
    detail = first_line(exc)
    if isinstance(exc, redis.exceptions.RedisClusterUnreachableError):
        return None  # no node answered: unreachable, not "not ready"
    if "slots are not covered" in detail or isinstance(exc, SlotNotCoveredError) \
            or "Hash slot not served" in detail:
        return (f"cluster not ready: slots not assigned ({detail}); create the cluster "
                "(redis-cli --cluster create) or assign the missing slots")
    if isinstance(exc, redis.exceptions.ClusterDownError) or detail.startswith("CLUSTERDOWN"):
        return (f"cluster not ready: cluster_state:fail ({detail}); a master is down with "
                "no replica to promote, or slots are not served (CLUSTER INFO)")
    if isinstance(exc, redis.exceptions.RedisClusterException):
        return f"cluster not ready: {detail}"
    return None


# Everything the CLI reports as "Redis cannot serve us now" (exit 69 / UNKNOWN).
OUTAGE_ERRORS = (redis.ConnectionError, redis.TimeoutError,
                 redis.exceptions.RedisClusterException, redis.exceptions.ClusterDownError)


# redis-py has two: redis.sentinel's and redis.asyncio.sentinel's, unrelated classes
# (both ConnectionErrors); the asyncio client (the console, the worker) raises the second.
MASTER_NOT_FOUND = (MasterNotFoundError, AsyncMasterNotFoundError)


def outage_line(url: str, exc: BaseException) -> str:
    """The one line for an outage: the cluster's state when it is up but not ready, else
    'cannot reach Redis at <url, redacted>: <why>'."""
    return cluster_not_ready(exc) or (f"cannot reach Redis at {redact(url)}: "
                                      f"{describe_unreachable(url, exc)}")


def describe_unreachable(url: str, exc: BaseException) -> str:
    """One line for 'cannot reach Redis', naming a failed TLS handshake as such.

    A rediss:// URL pointed at a plain-text port makes redis-py wait for a TLS reply
    the server never sends ("Timeout connecting to server"), or read its plain-text
    error as a broken record ("wrong version number"): say what to check instead."""
    detail = first_line(exc)
    if isinstance(exc, MASTER_NOT_FOUND):
        return describe_no_master(detail)
    if url.startswith("rediss:") and (
            isinstance(exc, redis.TimeoutError | ssl.SSLError)
            or "timeout connecting" in detail.lower()
            or "wrong version number" in detail.lower()
            or "record layer" in detail.lower()):
        if "certificate verify failed" in detail:
            return detail
        return (f"TLS handshake failed ({detail}): is this port speaking TLS? A plain-text "
                "Redis port needs redis://, not rediss://; check the server's tls-port and "
                "the URL's port")
    return detail


# redis-py's MasterNotFoundError lists every sentinel it asked as the client's whole repr
# followed by " - <the error>": keep the address and the error, drop the repr.
_SENTINEL_ERROR = re.compile(r"host=([^,]+),port=(\d+).*?> - (.*?)(?=, <redis\.|$)")


def describe_no_master(detail: str) -> str:
    """'No master found' from the sentinels, short: which sentinel said what, and what to
    check (their own password, or the master's name in the URL)."""
    head, sep, _ = detail.partition(" : ")
    if " is down (flags " in head:  # stream/sentinel.py: the name is known, not usable
        return head
    if not sep:  # every sentinel answered, none knows a master of that name
        return (f"{detail}: the sentinels answered but monitor no master of that name "
                "(the name is the URL's path: redis+sentinel://host:port/<master>)")
    errors = [f"{host}:{port} {what.strip()}" for host, port, what in
              _SENTINEL_ERROR.findall(detail)]
    if not errors:
        return detail if len(detail) <= 300 else detail[:300] + "..."
    line = f"{head} (asked: {'; '.join(errors)})"
    if "auth" in detail.lower():
        line += ("; a sentinel refused our credentials: the sentinels' own password is "
                 "sentinel_password_file (and sentinel_username), not the master's")
    else:  # refused, reset or closed: down, or a TLS port spoken to in plain text
        line += ("; no sentinel answered: check that they run at those addresses, and "
                 "for sentinels that take TLS set sentinel_tls_ca_file")
    return line
