"""`stagedoor enqueue`: add jobs the way the outbox relay does (MAXLEN ~, group ensured).

One job from flags, or many from JSON lines (a file or stdin), pipelined.  Every job
goes through the same parser the workers use, so a producer cannot put a payload on
the stream that a worker would dead-letter.
"""

from __future__ import annotations

import argparse
import re
import sys
import uuid
from collections.abc import Collection, Iterator
from typing import Any, TextIO

import orjson
import redis

from ... import config
from ...exitcodes import EX_CONFIG, EX_DATAERR, EX_TEMPFAIL, EX_UNAVAILABLE
from ...handlers.loading import load_registry
from ...stream import connection
from ...stream.diagnose import outage
from ...stream.errors import OUTAGE_ERRORS
from ...stream.job import FIELDS, Job, make_job
from ...stream.queue import BacklogFull, EnqueueError, RedisOutOfMemory, enqueue_sync
from ...telemetry.tracing import traceparent
from ..flags import given, refuse
from .status import SENTINEL_SETTINGS


def register(sub: Any) -> None:
    p = sub.add_parser("enqueue", help="Add jobs to the stream.",
                       description="Add one job from flags, or many from JSON lines "
                       "(--file; '-' is stdin), each an object with the five job fields: "
                       + ", ".join(FIELDS) + ". request_id defaults to a fresh id, trace to "
                       "a W3C traceparent (the current span's with stagedoor[otel], else a "
                       "new one). Only kinds the workers know are accepted: the built-in "
                       "ones and those of the --handlers registries (STAGEDOOR_HANDLERS, "
                       "the same setting the workers read); anything else is exit 65.")
    p.add_argument("--kind", help="Handler kind, e.g. render_tickets or refund.")
    p.add_argument("--order-id", type=_digits, help="Order id (positive integer).")
    p.add_argument("--outbox-id", type=_digits, help="Outbox row id: the job's identity.")
    p.add_argument("--request-id", help="Request id of the checkout that queued it.")
    p.add_argument("--trace", help="Trace id of the checkout that queued it.")
    p.add_argument("--file", metavar="PATH", help="JSON lines of jobs; '-' reads stdin.")
    config.add_arguments(p, only=["redis_url", "redis_password_file", *SENTINEL_SETTINGS,
                                  "wait_replicas", "wait_timeout_ms", "stream", "group",
                                  "maxlen", "socket_timeout", "handlers",
                                  "backlog_warn_fraction", "backlog_refuse_fraction"])
    p.set_defaults(func=run, parser=p)


_DIGITS = re.compile(r"[0-9]{1,19}", re.ASCII)


def _digits(text: str) -> int:
    """ASCII digits and nothing else: int() would take " 103\n", "+103", "1_03" too."""
    if not _DIGITS.fullmatch(text):
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def _int(data: dict[str, Any], name: str) -> int:
    value = data[name]
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _DIGITS.fullmatch(value):
        return int(value)
    raise ValueError(f"{name} must be an integer, got {value!r}")


def _job(data: dict[str, Any], kinds: Collection[str] | None) -> Job:
    kind = str(data["kind"])
    if kinds is not None and kind not in kinds:
        raise ValueError(f"unknown kind {kind!r}: the workers know {', '.join(sorted(kinds))} "
                         "(more with --handlers module:registry or STAGEDOOR_HANDLERS)")
    return make_job(kind, _int(data, "order_id"), _int(data, "outbox_id"),
                    str(data.get("request_id") or uuid.uuid4().hex[:16]),
                    str(data.get("trace") or traceparent()), kinds=kinds)


def read_jobs(stream: TextIO, kinds: Collection[str] | None = None) -> Iterator[Job]:
    for lineno, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            data = orjson.loads(line)
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            yield _job(data, kinds)
        except (ValueError, KeyError, TypeError) as e:
            what = f"missing field {e}" if isinstance(e, KeyError) else str(e)
            raise ValueError(f"line {lineno}: {what}") from None


SINGLE_JOB_FLAGS = ("kind", "order_id", "outbox_id", "request_id", "trace")


def run(args: argparse.Namespace) -> int:
    if args.file:  # every job and every field comes from the file
        refuse(args.parser, given(args, SINGLE_JOB_FLAGS),
               "not allowed with --file (each line of the file is a whole job)")
    settings = config.from_args(args)
    kinds = load_registry(settings.handlers).kinds  # a bad spec: ConfigError, exit 78
    try:
        if args.file:
            if args.file == "-":
                jobs = list(read_jobs(sys.stdin, kinds))
            else:
                with open(args.file) as fh:
                    jobs = list(read_jobs(fh, kinds))
        else:
            missing = [f"--{n}" for n in ("kind", "order_id", "outbox_id")
                       if getattr(args, n) is None]
            if missing:
                print(f"stagedoor enqueue: error: missing {', '.join(missing)} (or give "
                      "--file)", file=sys.stderr)
                return 2
            jobs = [_job(vars(args), kinds)]
    except (OSError, ValueError) as e:
        print(f"stagedoor enqueue: {e}", file=sys.stderr)
        return EX_DATAERR
    client = connection.sync_client(settings, timeout=max(settings.socket_timeout, 2.0))
    try:
        ids = enqueue_sync(client, settings, jobs)
    except EnqueueError as e:
        # What went in first (stdout, as on success), then one line saying where to
        # resume: jobs[len(e.ids):] are the ones that did not.
        for entry_id in e.ids:
            print(entry_id)
        sys.stdout.flush()
        cause = e.__cause__
        if isinstance(e, BacklogFull | RedisOutOfMemory):
            code = EX_TEMPFAIL
        elif isinstance(cause, redis.exceptions.NoPermissionError):
            code = EX_CONFIG
        else:
            code = EX_UNAVAILABLE
        if isinstance(cause, OUTAGE_ERRORS):
            message = f"{outage(settings, cause)}; {e.progress}"
        else:
            message = str(e)
        print(f"stagedoor enqueue: {message}", file=sys.stderr)
        return code
    finally:
        client.close()
    for entry_id in ids:
        print(entry_id)
    return 0
