"""The job on the stream: five fields written by another process, parsed, never trusted.

The malformed order id that crashed every worker in turn in the spring was a payload
that was trusted instead of parsed.  parse_job is the boundary: it takes the raw
field list exactly as Redis returned it (a flat [name, value, name, value, ...]
list of bytes, so a duplicated field is still visible) and returns a typed Job or
raises MalformedJob with a reason that goes to the dead-letter stream.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ..errors import MalformedJob

FIELDS = ("kind", "order_id", "outbox_id", "request_id", "trace")
_FIELD_SET = frozenset(f.encode() for f in FIELDS)
MAX_ID = 2**63 - 1  # a signed 64-bit integer: what the api's database keys are
# Matched with fullmatch(): `$` also matches before a final newline, so "103\n" passed.
_DIGITS = re.compile(rb"[0-9]{1,19}")
_TOKEN = re.compile(rb"[A-Za-z0-9._:/+=\-]{1,128}")
_KIND = re.compile(rb"[a-z][a-z0-9_]{0,63}")
DEFAULT_MAX_FIELD_BYTES = 256


@dataclass(frozen=True, slots=True)
class Job:
    kind: str
    order_id: int
    outbox_id: int
    request_id: str
    trace: str

    def fields(self) -> list[bytes]:
        """The flat field list XADD takes, in the seed's order."""
        return [b"kind", self.kind.encode(), b"order_id", str(self.order_id).encode(),
                b"outbox_id", str(self.outbox_id).encode(),
                b"request_id", self.request_id.encode(), b"trace", self.trace.encode()]


def _parse_id(name: bytes, raw: bytes) -> int:
    if not isinstance(raw, bytes) or not _DIGITS.fullmatch(raw):
        raise _refused(name, raw, "must be a positive decimal integer")
    value = int(raw)
    if not 1 <= value <= MAX_ID:
        raise MalformedJob(f"{name.decode()} out of range 1..2^63-1: {_show(raw)}")
    return value


def _show(raw: bytes, limit: int = 40) -> str:
    text = repr(raw[:limit])
    return text + ("..." if len(raw) > limit else "")


def parse_job(raw: Sequence[bytes] | None, kinds: Collection[str] | None = None, *,
              max_field_bytes: int = DEFAULT_MAX_FIELD_BYTES) -> Job:
    """Turn an entry's raw field list into a Job, or raise MalformedJob saying why."""
    if raw is None:
        raise MalformedJob("entry has no fields (trimmed from the stream)")
    if len(raw) == 10 and raw[0] == b"kind" and raw[2] == b"order_id" \
            and raw[4] == b"outbox_id" and raw[6] == b"request_id" and raw[8] == b"trace":
        # The order every producer of ours writes: no dict to build.
        kind_raw, order_raw, outbox_raw, request_id, trace = raw[1], raw[3], raw[5], raw[7], \
            raw[9]
        if max(len(kind_raw), len(order_raw), len(outbox_raw), len(request_id),
               len(trace)) > max_field_bytes:
            _collect(raw, max_field_bytes)  # raises, naming the field
    else:
        values = _collect(raw, max_field_bytes)
        if len(values) != len(FIELDS):
            missing = [f for f in FIELDS if f.encode() not in values]
            raise MalformedJob("missing field" + ("s " if len(missing) > 1 else " ")
                               + ", ".join(missing))
        kind_raw, order_raw, outbox_raw, request_id, trace = (
            values[b"kind"], values[b"order_id"], values[b"outbox_id"],
            values[b"request_id"], values[b"trace"])
    # Every accepted value is ASCII (digits, a kind, tokens), so the patterns are the
    # whole check; UTF-8 is only looked at to say why a value was refused.
    if not isinstance(kind_raw, bytes) or not _KIND.fullmatch(kind_raw):
        raise _refused(b"kind", kind_raw, "must match [a-z][a-z0-9_]*")
    kind = kind_raw.decode()
    if kinds is not None and kind not in kinds:
        raise MalformedJob(f"unknown kind {kind!r}")
    for name, value in ((b"request_id", request_id), (b"trace", trace)):
        if not isinstance(value, bytes) or not _TOKEN.fullmatch(value):
            raise _refused(name, value, "must be 1-128 of A-Z a-z 0-9 . _ : / + = -")
    return Job(kind, _parse_id(b"order_id", order_raw), _parse_id(b"outbox_id", outbox_raw),
               request_id.decode(), trace.decode())


def _refused(name: bytes, value: bytes, rule: str) -> MalformedJob:
    if not isinstance(value, bytes):
        return MalformedJob("field names and values must be bytes")
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return MalformedJob(f"field {name.decode()} is not UTF-8")
    return MalformedJob(f"{name.decode()} {rule}, got {_show(value)}")


def _collect(raw: Sequence[bytes], max_field_bytes: int) -> dict[bytes, bytes]:
    """Fields in any order: refuse odd counts, unknown and duplicate names, big values."""
    if len(raw) % 2:
        raise MalformedJob("odd number of field items")
    values: dict[bytes, bytes] = {}
    for i in range(0, len(raw), 2):
        name, value = raw[i], raw[i + 1]
        if not isinstance(name, bytes) or not isinstance(value, bytes):
            raise MalformedJob("field names and values must be bytes")
        if name not in _FIELD_SET:
            raise MalformedJob(f"unknown field {_show(name)}")
        if name in values:
            raise MalformedJob(f"duplicate field {name.decode()}")
        if len(value) > max_field_bytes:
            raise MalformedJob(f"field {name.decode()} is {len(value)} bytes, "
                               f"limit {max_field_bytes}")
        values[name] = value
    return values


def make_job(kind: str, order_id: int, outbox_id: int, request_id: str | None = None,
             trace: str | None = None, *, kinds: Collection[str] | None = None) -> Job:
    """Build a Job the way a producer should: validated by the same parser workers use.

    request_id: the checkout's request id; None gives a fresh one (16 hex digits).
    trace: None gives the W3C traceparent of the current OpenTelemetry span (when the
    producer runs inside one; `telemetry.tracing.traceparent`), so the worker's span continues
    the producer's trace, else a fresh traceparent; pass one to carry a context that is
    not current (an outbox row's).
    kinds: the kinds the workers know (`load_registry(settings.handlers).kinds`, the
    built-ins plus the same registries the workers load); a job of any other kind is
    refused here instead of dead-lettered by a worker.  None checks the format only."""
    if request_id is None:
        request_id = os.urandom(8).hex()
    if trace is None:
        from ..telemetry.tracing import traceparent  # not at import: job.py stays light

        trace = traceparent()
    job = Job(kind, order_id, outbox_id, request_id, trace)
    try:
        return parse_job(job.fields(), kinds, max_field_bytes=DEFAULT_MAX_FIELD_BYTES)
    except MalformedJob as e:
        raise ValueError(f"refusing to enqueue: {e}") from None
