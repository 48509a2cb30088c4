"""worker/_entries.pyx: fast_job accepts a subset of what parse_job accepts, to the byte,
and the common entry of every producer of ours; pack_xack packs what hiredis packs."""

from __future__ import annotations

import hiredis
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stagedoor.errors import MalformedJob
from stagedoor.stream.job import make_job, parse_job
from stagedoor.worker._entries import fast_job, pack_xack

KINDS = {b"render_tickets": "render_tickets", b"refund": "refund", b"noop": "noop"}
NAMES = [b"kind", b"order_id", b"outbox_id", b"request_id", b"trace"]


def parsed(raw: list[bytes], limit: int = 256) -> object:
    try:
        return parse_job(raw, frozenset(KINDS.values()), max_field_bytes=limit)
    except MalformedJob:
        return None


def test_the_common_entry_takes_the_fast_path_and_gives_the_same_job() -> None:
    for job in (make_job("render_tickets", 4471, 88210, "7f3a9c2e", "4bf92f35"),
                make_job("noop", 2**63 - 1, 1, "a" * 128, "A-Za-z0-9._:/+="),
                make_job("refund", 7, 9, "r", "0")):
        fast = fast_job(job.fields(), KINDS, 256)
        assert fast == job and type(fast) is type(job)
        assert hash(fast) == hash(job)


def test_whatever_parse_job_refuses_the_fast_path_leaves_to_it() -> None:
    good = make_job("noop", 1, 2, "r", "t").fields()
    cases = [good[:8], [*good, b"x", b"y"], [*good[:1], b"nope", *good[2:]],
             [*good[:3], b"0", *good[4:]], [*good[:3], b"9223372036854775808", *good[4:]],
             [*good[:3], b"12a", *good[4:]], [*good[:3], b"1\n", *good[4:]],
             [*good[:7], b"bad id", *good[8:]], [*good[:9], b""],
             [*good[:9], b"str\xff"], [good[2], good[1], good[0], *good[3:]],
             [*good[:9], b"t" * 129]]
    for raw in cases:
        assert fast_job(raw, KINDS, 256) is None, raw
    assert fast_job(None, KINDS, 256) is None
    assert fast_job(tuple(good), KINDS, 256) is None
    assert fast_job(good, KINDS, 1) is None  # over the size limit: parse_job says so


field = st.one_of(st.sampled_from([b"1", b"42", b"0", b"007", b"9223372036854775807",
                                   b"9223372036854775808", b"-1", b"noop", b"refund",
                                   b"Noop", b"r-1", b"a.b:c/d+e=f_g", b"", b" ", b"x\n"]),
                  st.binary(max_size=24))


@settings(max_examples=1500, deadline=None)
@given(st.lists(field, min_size=5, max_size=5), st.integers(1, 300),
       st.booleans())
def test_fast_job_never_accepts_what_parse_job_refuses(values: list[bytes], limit: int,
                                                       swap: bool) -> None:
    names = NAMES[::-1] if swap else NAMES
    raw = [x for pair in zip(names, values, strict=True) for x in pair]
    fast = fast_job(raw, KINDS, limit)
    if fast is not None:
        assert fast == parsed(raw, limit)


@settings(max_examples=300)
@given(st.binary(min_size=1, max_size=40), st.binary(min_size=1, max_size=40),
       st.lists(st.binary(max_size=30), max_size=40))
def test_pack_xack_packs_what_hiredis_packs(stream: bytes, group: bytes,
                                            ids: list[bytes]) -> None:
    assert pack_xack(stream, group, ids) == hiredis.pack_command(("XACK", stream, group, *ids))


def test_pack_xack_takes_only_bytes_ids() -> None:
    with pytest.raises(TypeError):
        pack_xack(b"jobs", b"workers", ["1-0"])  # type: ignore[list-item]
