"""parse_job: bytes from another process become a Job or a MalformedJob with a reason."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stagedoor.errors import MalformedJob
from stagedoor.stream.job import FIELDS, Job, make_job, parse_job

GOOD = [b"kind", b"render_tickets", b"order_id", b"4471", b"outbox_id", b"88210",
        b"request_id", b"7f3a9c2e", b"trace", b"4bf92f35"]
KINDS = {"render_tickets", "refund"}


def with_field(name: bytes, value: bytes) -> list[bytes]:
    out = list(GOOD)
    out[out.index(name) + 1] = value
    return out


def test_the_seeds_job_parses() -> None:
    assert parse_job(GOOD, KINDS) == Job("render_tickets", 4471, 88210, "7f3a9c2e", "4bf92f35")


@pytest.mark.parametrize(("fields", "reason"), [
    (GOOD[:-2], "missing field trace"),
    ([*GOOD, b"trace", b"x"], "duplicate field trace"),
    ([*GOOD, b"color", b"red"], "unknown field b'color'"),
    (GOOD[:-1], "odd number"),
    (with_field(b"order_id", b"44x71"), "order_id must be a positive decimal integer"),
    (with_field(b"order_id", b"-4"), "order_id must be a positive decimal integer"),
    (with_field(b"order_id", b"0"), "order_id out of range"),
    (with_field(b"outbox_id", b"9223372036854775808"), "outbox_id out of range"),
    (with_field(b"order_id", b"12345678901234567890123"), "order_id must be a positive"),
    (with_field(b"trace", b"\xff\xfe"), "field trace is not UTF-8"),
    (with_field(b"trace", b"a" * 300), "field trace is 300 bytes, limit 256"),
    (with_field(b"request_id", b"has space"), "request_id must be"),
    (with_field(b"kind", b"render_pdf"), "unknown kind 'render_pdf'"),
    (with_field(b"kind", b"Render"), "kind must match"),
    (None, "trimmed"),
])
def test_malformed_jobs_say_why(fields: list[bytes] | None, reason: str) -> None:
    with pytest.raises(MalformedJob) as info:
        parse_job(fields, KINDS)
    assert reason in str(info.value)


def test_make_job_refuses_what_workers_would_refuse() -> None:
    with pytest.raises(ValueError, match="refusing to enqueue"):
        make_job("render_tickets", 0, 1, "r", "t")


@given(kind=st.sampled_from(sorted(KINDS)), order_id=st.integers(1, 2**63 - 1),
       outbox_id=st.integers(1, 2**63 - 1),
       request_id=st.text("abcdefABCDEF0123456789-_.:", min_size=1, max_size=128),
       trace=st.text("0123456789abcdef", min_size=1, max_size=64))
def test_round_trip(kind: str, order_id: int, outbox_id: int, request_id: str,
                    trace: str) -> None:
    job = Job(kind, order_id, outbox_id, request_id, trace)
    assert parse_job(job.fields(), KINDS) == job


@given(st.lists(st.binary(max_size=40), max_size=14))
def test_arbitrary_bytes_never_crash(raw: list[bytes]) -> None:
    try:
        job = parse_job(raw, KINDS)
    except MalformedJob as e:
        assert str(e)
    else:
        assert isinstance(job, Job)


@given(st.permutations(range(5)))
def test_field_order_does_not_matter(order: list[int]) -> None:
    pairs = [GOOD[2 * i:2 * i + 2] for i in order]
    flat = [b for pair in pairs for b in pair]
    assert parse_job(flat, KINDS).order_id == 4471
    assert len(FIELDS) == 5
