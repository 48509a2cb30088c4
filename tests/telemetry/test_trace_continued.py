"""A producer that passes no trace continues its current span (issue 24, item 9): the
README's producer example, run as written against a real server, writes the traceparent
of the span it runs in; outside a span, a fresh valid traceparent."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import orjson
import redis

from stagedoor.stream.job import make_job
from stagedoor.telemetry.tracing import is_traceparent
from tests.support.paths import ROOT, SRC


def readme_producer_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Producing jobs", 1)[1]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "README: no python block under 'Producing jobs'"
    return m[1]


# The producer application's tracing, set up as an application would (an SDK provider
# with an exporter); then the README's code as written; then what it wrote.
HARNESS = """
from opentelemetry import trace as _trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
_exporter = InMemorySpanExporter()
_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(_exporter))
_trace.set_tracer_provider(_provider)
{example}
import orjson, sys
(_span,) = _exporter.get_finished_spans()
sys.stdout.write(orjson.dumps({{"trace": job.trace, "trace_id": f"{{_span.context.trace_id:032x}}",
                               "span_id": f"{{_span.context.span_id:016x}}"}}).decode())
"""


def test_readme_producer_continues_the_current_span(redis_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STAGEDOOR_", "OTEL_"))}
    env.update(PYTHONPATH=str(SRC), STAGEDOOR_REDIS_URL=redis_url)
    proc = subprocess.run([sys.executable, "-c",
                           HARNESS.format(example=readme_producer_example())],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = orjson.loads(proc.stdout)
    # this span's trace and span ids (the flags are the SDK's: sampled, maybe random)
    assert out["trace"].startswith(f"00-{out['trace_id']}-{out['span_id']}-"), out
    assert is_traceparent(out["trace"]), out
    client = redis.Redis.from_url(redis_url, protocol=2)
    try:
        ((_, fields),) = client.xrange("jobs")
    finally:
        client.close()
    assert fields[b"trace"].decode() == out["trace"]  # what the worker will continue
    assert fields[b"request_id"] == b"7f3a9c2e"


def test_make_job_outside_a_span_gets_a_fresh_traceparent() -> None:
    a, b = make_job("render_tickets", 1, 1), make_job("render_tickets", 1, 2)
    assert is_traceparent(a.trace) and is_traceparent(b.trace) and a.trace != b.trace
    assert re.fullmatch(r"[0-9a-f]{16}", a.request_id) and a.request_id != b.request_id
    # An explicit trace is kept as given (an outbox row's context, or an older id).
    assert make_job("render_tickets", 1, 1, "r", "4bf92f35").trace == "4bf92f35"
