"""OpenTelemetry: traceparents, no import or cost when off, spans when on."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import orjson

from stagedoor.config import Settings
from stagedoor.handlers import Context, PermanentError, Registry, TransientError
from stagedoor.stream.connection import sync_client
from stagedoor.stream.job import Job, make_job
from stagedoor.stream.queue import enqueue_sync
from stagedoor.telemetry.logs import setup_logging
from stagedoor.telemetry.tracing import (
    JobTracer,
    is_traceparent,
    new_traceparent,
    setup,
    traceparent,
)
from tests.support.supervisor import supervisor, wait_for
from tests.support.worker import eventually, running


def test_traceparent_format() -> None:
    tp = new_traceparent()
    assert is_traceparent(tp) and tp.startswith("00-") and tp.endswith("-01")
    assert tp != new_traceparent()
    assert new_traceparent(sampled=False).endswith("-00")
    for bad in ("4bf92f35", "00-" + "0" * 32 + "-" + "b" * 16 + "-01",
                "00-" + "a" * 32 + "-" + "0" * 16 + "-01", "01-" + "a" * 32 + "-" + "b" * 16
                + "-01", "00-" + "A" * 32 + "-" + "b" * 16 + "-01"):
        assert not is_traceparent(bad), bad


BLOCK_OTEL = """
import importlib.abc, sys
class NoOtel(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, NoOtel())
"""


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)


def test_without_the_extra_nothing_is_imported_and_traceparents_still_work() -> None:
    r = python(BLOCK_OTEL + (
        "from stagedoor.telemetry import tracing; from stagedoor.telemetry import logs; "
        "from stagedoor.cli.main import build_parser; build_parser(); "
        "assert tracing.setup({}) is None; assert tracing.is_traceparent(tracing.traceparent()); "
        "assert tracing.current_ids() is None; "
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_installed_but_not_configured_costs_nothing() -> None:
    # redis-py imports the OTel API itself when it is installed; tracing stays off and
    # starts no exporter, no provider, no thread.
    r = python("import sys, threading; from stagedoor.telemetry import tracing; "
               "assert tracing.setup({}) is None; "
               "print(threading.active_count(), "
               "[m for m in sys.modules if m.startswith('opentelemetry.exporter')])")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1 []"


def test_disabled_wins_and_missing_sdk_is_one_line() -> None:
    assert setup({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"}) is None
    r = python(BLOCK_OTEL + ("from stagedoor.telemetry import tracing; tracing.setup("
                             "{'OTEL_EXPORTER_OTLP_ENDPOINT': 'http://127.0.0.1:9'})"))
    assert r.returncode != 0
    assert ("ImportError: OTEL_* variables ask for tracing, but the OpenTelemetry SDK is not "
            "installed: pip install 'stagedoor[otel]'") in r.stderr


def test_producer_traceparent_is_the_current_span() -> None:
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    with provider.get_tracer("t").start_as_current_span("checkout") as span:
        ctx = span.get_span_context()
        assert traceparent() == (f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-"
                                f"{int(ctx.trace_flags):02x}")
    assert is_traceparent(traceparent())  # no span: a fresh one


# -- spans of real jobs: the SDK's in-memory exporter ---------------------------------------------

async def test_consumer_span_per_job_continues_the_producers_trace(
        settings: Settings, tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind, StatusCode

    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    handler_tracer = provider.get_tracer("tests.handler")
    out = io.StringIO()
    setup_logging("json", "info", out, logger=logging.getLogger("tests.traced"))
    registry = Registry()
    attempts: dict[int, int] = {}

    @registry.register("traced")
    async def traced(job: Job, ctx: Context) -> None:
        with handler_tracer.start_as_current_span("render"):
            logging.getLogger("tests.traced").info("rendering")
        attempts[job.order_id] = attempts.get(job.order_id, 0) + 1
        if job.order_id == 2 and attempts[2] == 1:
            raise TransientError("store busy")
        if job.order_id == 3:
            raise PermanentError("order is void")

    with provider.get_tracer("tests.producer").start_as_current_span("checkout") as checkout:
        parent = checkout.get_span_context()
        jobs = [make_job("traced", n, n, f"req{n}", traceparent()) for n in (1, 2, 3)]
    jobs.append(make_job("traced", 4, 4, "req4", "4bf92f35"))  # an id from before
    client = sync_client(settings)
    try:
        ids = enqueue_sync(client, settings, jobs)
    finally:
        client.close()
    fast = settings.replace(retry_backoff=0.01, retry_backoff_max=0.02)
    async with running(fast, registry, tracer=JobTracer(provider, owned=False)) as worker:
        await eventually(lambda: worker.stats.total("handled") == 3
                         and worker.stats.total("dead_lettered") == 1, what="4 jobs settled")
    spans = exporter.get_finished_spans()
    consumer = {s.attributes["messaging.message.id"]: s for s in spans
                if s.kind is SpanKind.CONSUMER}
    assert sorted(consumer) == sorted(ids)
    for entry_id, job in zip(ids, jobs, strict=True):
        span = consumer[entry_id]
        assert span.name == "process jobs"
        assert dict(span.attributes) == {
            "messaging.system": "redis", "messaging.destination.name": "jobs",
            "messaging.operation.type": "process", "messaging.operation.name": "process",
            "messaging.message.id": entry_id, "messaging.consumer.group.name": "workers",
            "messaging.client.id": "test-00", "messaging.redis.message.delivery_count": 1,
            "stagedoor.job.kind": "traced",
            **({"stagedoor.trace": "4bf92f35"} if job.order_id == 4 else {})}
        if job.order_id == 4:  # not a traceparent: a trace of its own
            assert span.parent is None and span.context.trace_id != parent.trace_id
        else:  # continues the checkout's trace, as its child
            assert span.context.trace_id == parent.trace_id
            assert span.parent is not None and span.parent.span_id == parent.span_id
        renders = [s for s in spans if s.name == "render"
                   and s.parent is not None and s.parent.span_id == span.context.span_id]
        assert len(renders) == (2 if job.order_id == 2 else 1)  # handler spans nest
    by_order = {j.order_id: consumer[i] for i, j in zip(ids, jobs, strict=True)}
    retry = [e for e in by_order[2].events if e.name == "stagedoor.retry"]
    assert len(retry) == 1 and retry[0].attributes["reason"] == "TransientError: store busy"
    assert by_order[2].status.status_code is StatusCode.UNSET
    dead = [e for e in by_order[3].events if e.name == "stagedoor.dead_letter"]
    assert dead and "order is void" in str(dead[0].attributes["reason"])
    assert by_order[3].status.status_code is StatusCode.ERROR
    # the handler's log lines carry the ids of the span they were logged in, and the job
    lines = [orjson.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) == 5
    render_ids = {(f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}") for s in spans
                  if s.name == "render"}
    assert {(d["trace_id"], d["span_id"]) for d in lines} == render_ids
    assert {d["request_id"] for d in lines} == {"req1", "req2", "req3", "req4"}


# -- spans over OTLP/HTTP from a real supervisor, to a receiver of the test's own ---------------

class Receiver:
    """An OTLP/HTTP trace receiver on a free loopback port (protobuf, decoded here)."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        self.requests: list[Any] = []
        received = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                received.append((self.path, self.headers["Content-Type"], request))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def spans(self) -> list[tuple[dict[str, Any], Any]]:
        """(resource attributes, span) of everything received."""
        out = []
        for _path, _ctype, request in list(self.requests):
            for rs in request.resource_spans:
                resource = {a.key: a.value.string_value for a in rs.resource.attributes}
                out += [(resource, span) for ss in rs.scope_spans for span in ss.spans]
        return out

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def test_supervised_workers_export_spans_over_otlp_http(tmp_path: Path, redis_url: str,
                                                        settings: Settings) -> None:
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    parents = [new_traceparent() for _ in range(5)]
    with Receiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
               "OTEL_SERVICE_NAME": "stagedoor-test", "OTEL_BSP_SCHEDULE_DELAY": "100"}
        with supervisor(tmp_path, redis_url, ["--workers", "2"], env=env) as sup:
            sup.wait_ready(2)
            client = sync_client(settings)
            try:
                ids = enqueue_sync(client, settings, [make_job("noop", n, n, f"r{n}", tp)
                                                      for n, tp in enumerate(parents, 1)])
            finally:
                client.close()

            def exported() -> list[tuple[dict[str, Any], Any]]:
                got = [(r, s) for r, s in receiver.spans() if s.kind == Span.SPAN_KIND_CONSUMER]
                return got if len(got) == 5 else []

            got = wait_for(exported, 20, 0.05, "5 consumer spans exported")
            sup.signal(15)
            assert sup.wait() == 0
    path, ctype, _ = receiver.requests[0]
    assert path == "/v1/traces" and ctype == "application/x-protobuf"
    by_id = {}
    for resource, span in got:
        assert resource["service.name"] == "stagedoor-test"
        attrs = {a.key: a.value for a in span.attributes}
        by_id[attrs["messaging.message.id"].string_value] = (span, attrs)
    assert sorted(by_id) == sorted(ids)
    for entry_id, tp in zip(ids, parents, strict=True):
        span, attrs = by_id[entry_id]
        _, trace_id, span_id, _ = tp.split("-")
        assert span.trace_id.hex() == trace_id and span.parent_span_id.hex() == span_id
        assert span.name == "process jobs"
        assert attrs["messaging.system"].string_value == "redis"
        assert attrs["messaging.consumer.group.name"].string_value == "workers"
        assert attrs["messaging.redis.message.delivery_count"].int_value == 1
        assert attrs["messaging.client.id"].string_value.startswith("sup-0")


def test_handler_spans_are_exported_under_the_job_span(tmp_path: Path, redis_url: str,
                                                       settings: Settings) -> None:
    """issue 24 item 7: the worker built its provider but did not install it, so a
    handler's `trace.get_tracer()` (docs/handlers.md) recorded nothing.  A real
    supervisor configured by OTEL_* alone; the test sets up no provider."""
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    parents = [new_traceparent() for _ in range(3)]
    with Receiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
               "OTEL_BSP_SCHEDULE_DELAY": "100"}
        with supervisor(tmp_path, redis_url, ["--workers", "1", "--handlers",
                                              "tests.support.handlers.span:registry"],
                        env=env, handlers=False) as sup:
            sup.wait_ready(1)
            client = sync_client(settings)
            try:
                enqueue_sync(client, settings, [make_job("spanning", n, n, f"r{n}", tp)
                                                for n, tp in enumerate(parents, 1)])
            finally:
                client.close()

            def exported() -> list[Any]:
                got = [s for _r, s in receiver.spans()]
                jobs = [s for s in got if s.kind == Span.SPAN_KIND_CONSUMER]
                return got if len(jobs) == 3 else []

            # the handlers' spans end before their job's, so they are in by then too
            got = wait_for(exported, 20, 0.05, "3 consumer spans exported")
            sup.signal(15)
            assert sup.wait() == 0
    jobs = {s.span_id: s for s in got if s.kind == Span.SPAN_KIND_CONSUMER}
    mine = [s for s in got if s.name == "handler work"]
    assert len(mine) == 3, [s.name for s in got]
    for span in mine:
        job = jobs[span.parent_span_id]  # a child of its job's span ...
        assert span.trace_id == job.trace_id  # ... in the producer's trace
        outbox = {a.key: a.value.int_value for a in span.attributes}["outbox_id"]
        assert job.trace_id.hex() == parents[outbox - 1].split("-")[1]
