"""OpenTelemetry for jobs: a W3C traceparent in `trace`, a CONSUMER span per job.

Optional: `pip install 'stagedoor[otel]'`.  Without the extra nothing here imports
opentelemetry, and a worker's per-job cost is one `is None` check.  With it, tracing
is on when it is configured the standard way (the OTEL_* variables, read by the SDK):

* OTEL_SDK_DISABLED=true turns it off whatever else is set;
* OTEL_TRACES_EXPORTER=otlp|console|none, or OTEL_EXPORTER_OTLP_ENDPOINT /
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (OTLP over HTTP/protobuf): the worker builds its
  own TracerProvider after the fork (a BatchSpanProcessor owns a thread, and threads
  must not cross fork()) and installs it as the process's global provider (so a
  handler's own `trace.get_tracer()` spans are exported, children of the job's span),
  with OTEL_SERVICE_NAME (default "stagedoor") and
  OTEL_RESOURCE_ATTRIBUTES, sampled by the SDK's default (parent-based, always on)
  or OTEL_TRACES_SAMPLER;
* an application that set its own SDK TracerProvider before running a worker in
  process (tests, an embedding app) gets its spans there.

The producer side (`traceparent`) writes the current span's context as a W3C
traceparent, `00-<trace id>-<span id>-<flags>`, or a fresh random one when there is
no span (no OTel needed for that).  The worker continues it: one span per job, kind
CONSUMER, named "process <stream>", with the messaging semantic conventions
(messaging.system "redis", messaging.destination.name = the stream,
messaging.operation.type/name "process", messaging.message.id = the entry id,
messaging.consumer.group.name, messaging.client.id = the consumer, and the delivery
count as messaging.redis.message.delivery_count, after the per-system attributes the
conventions define for Service Bus and Pub/Sub).  Spans a handler starts nest under it;
retries and dead-lettering are events on it.  A `trace` that is not a traceparent
(the ids producers wrote before) starts a new trace and is kept as the attribute
stagedoor.trace, so the log join on `trace` still works.

Written against the OTel API and SDK rather than by hand: context propagation,
sampling, batching and OTLP encoding are exactly what those packages are for.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import ConfigError
from ..version import __version__

__all__ = ["JobTracer", "current_ids", "entry_ms", "is_traceparent", "new_traceparent",
           "setup", "setup_or_config_error", "traceparent"]

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_INVALID_TRACE = "0" * 32
_INVALID_SPAN = "0" * 16
_TRUE = ("1", "true", "yes", "on")


def is_traceparent(value: str) -> bool:
    """A W3C traceparent of version 00 with non-zero ids."""
    m = _TRACEPARENT.match(value)
    return bool(m and m[1] != _INVALID_TRACE and m[2] != _INVALID_SPAN)


def new_traceparent(sampled: bool = True) -> str:
    """A fresh traceparent for a producer that has no span of its own."""
    trace_id = os.urandom(16).hex()
    span_id = os.urandom(8).hex()
    if trace_id == _INVALID_TRACE or span_id == _INVALID_SPAN:  # pragma: no cover
        return new_traceparent(sampled)
    return f"00-{trace_id}-{span_id}-{'01' if sampled else '00'}"


def entry_ms(entry_id: bytes) -> int:
    """The millisecond time Redis put in an entry id (b"1758200000000-3" -> 1758200000000)."""
    return int(entry_id.split(b"-", 1)[0])


def _otel_loaded() -> bool:
    """True when someone already imported the OTel API (we never import it for a check)."""
    return "opentelemetry.trace" in sys.modules


def traceparent() -> str:
    """What a producer writes into a job's `trace`: the current span's context, else new."""
    if _otel_loaded():
        from opentelemetry import trace  # already loaded by the caller (_otel_loaded)

        ctx = trace.get_current_span().get_span_context()
        if ctx.is_valid:
            return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
    return new_traceparent()


def current_ids() -> tuple[str, str] | None:
    """(trace_id, span_id) of the current span in hex, for log lines; None without one."""
    if not _otel_loaded():
        return None
    from opentelemetry import trace  # already loaded by the caller (_otel_loaded)

    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"


def _configured(environ: Mapping[str, str]) -> bool:
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() in _TRUE:
        return False
    return any(environ.get(k) for k in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
                                        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def setup(environ: Mapping[str, str] | None = None) -> JobTracer | None:
    """The tracer for this process, or None when tracing is off (see the docstring).

    Raises ImportError with one line when OTEL_* asks for tracing but the extra is not
    installed: a configuration the operator should hear about at boot.
    """
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() in _TRUE:
        return None
    configured = _configured(env)
    if not configured and "opentelemetry.sdk.trace" not in sys.modules:
        # Not asked for, and no SDK TracerProvider can have been set (its module is not
        # loaded; redis-py loads the OTel API and the metrics SDK, not this): nothing
        # imported, no cost
        return None
    try:  # the optional extra (stagedoor[otel]): imported only when tracing is asked for
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        if configured:
            raise ImportError("OTEL_* variables ask for tracing, but the OpenTelemetry SDK "
                              "is not installed: pip install 'stagedoor[otel]'") from None
        return None
    provider = trace.get_tracer_provider()
    owned = False
    if not isinstance(provider, TracerProvider):
        if not configured:
            return None
        provider = _build_provider(env)
        owned = True
        # Installed globally too: a handler's `trace.get_tracer()` (docs/handlers.md)
        # reads the global provider, and without it its spans recorded nothing and
        # never nested under the job's.  Per process, after the fork (this runs in the
        # worker); tracers taken at import (module level) are proxies that follow.
        trace.set_tracer_provider(provider)
    return JobTracer(provider, owned=owned)


def setup_or_config_error(environ: Mapping[str, str] | None = None) -> JobTracer | None:
    """`setup`, with a configuration it cannot honour as a ConfigError (exit 78)."""
    try:
        return setup(environ)
    except (ImportError, ValueError) as e:
        raise ConfigError(str(e)) from None


def _build_provider(env: Mapping[str, str]) -> Any:
    # the optional extra (stagedoor[otel]): setup() checked that it imports
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
    )

    resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or "stagedoor",
                                "service.version": __version__}
                               ).merge(OTELResourceDetector().detect())
    provider = TracerProvider(resource=resource)  # sampler: OTEL_TRACES_SAMPLER or default
    names = [n.strip() for n in (env.get("OTEL_TRACES_EXPORTER") or "otlp").split(",")]
    for name in names:
        exporter: SpanExporter
        if name == "none":
            continue
        if name == "console":
            exporter = ConsoleSpanExporter()
        elif name in ("otlp", "otlp_proto_http"):
            # the OTLP exporter: only when it is the one OTEL_TRACES_EXPORTER names
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()  # endpoint, headers, timeout: OTEL_EXPORTER_OTLP_*
        else:
            raise ValueError(f"OTEL_TRACES_EXPORTER={name!r}: stagedoor ships otlp "
                             "(HTTP/protobuf), console and none")
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


class JobTracer:
    """Spans for one worker process: `job()` around each job, events on it."""

    def __init__(self, provider: Any, *, owned: bool) -> None:
        # the optional extra: a JobTracer exists only once setup() imported it
        from opentelemetry import trace
        from opentelemetry.trace import (
            NonRecordingSpan,
            SpanContext,
            SpanKind,
            Status,
            StatusCode,
            TraceFlags,
        )


        self._provider = provider
        self._owned = owned
        self._tracer = provider.get_tracer("stagedoor", __version__)
        self._trace = trace
        self._remote = (NonRecordingSpan, SpanContext, TraceFlags)
        self._consumer_kind = SpanKind.CONSUMER
        self._error = Status(StatusCode.ERROR)
        self._status = Status

    @contextlib.contextmanager
    def job(self, *, stream: str, group: str, consumer: str, entry_id: str, trace: str,
            deliveries: int, kind: str | None) -> Iterator[Any]:
        """The CONSUMER span of one job, current for the code inside (handlers nest)."""
        parent = None
        attributes: dict[str, Any] = {
            "messaging.system": "redis",
            "messaging.destination.name": stream,
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.message.id": entry_id,
            "messaging.consumer.group.name": group,
            "messaging.client.id": consumer,
            "messaging.redis.message.delivery_count": deliveries,
        }
        if kind is not None:
            attributes["stagedoor.job.kind"] = kind
        m = _TRACEPARENT.match(trace) if trace else None
        if m and m[1] != _INVALID_TRACE and m[2] != _INVALID_SPAN:
            # The W3C parse is the regex above; building the remote parent directly
            # costs a third of what the propagator's extract() does per job.
            span_cls, ctx_cls, flags = self._remote
            remote = ctx_cls(int(m[1], 16), int(m[2], 16), is_remote=True,
                             trace_flags=flags(int(m[3], 16)))
            parent = self._trace.set_span_in_context(span_cls(remote))
        elif trace:
            attributes["stagedoor.trace"] = trace  # an id from before traceparents
        with self._tracer.start_as_current_span(
                f"process {stream}", context=parent, kind=self._consumer_kind,
                attributes=attributes, record_exception=False,
                set_status_on_exception=False) as span:
            yield span

    def event(self, name: str, attributes: Mapping[str, Any]) -> None:
        """An event on the current job's span (a retry, the dead-letter decision)."""
        span = self._trace.get_current_span()
        if span.is_recording():
            span.add_event(name, dict(attributes))

    def fail(self, reason: str) -> None:
        """Mark the current job's span as failed with the reason it was given up."""
        span = self._trace.get_current_span()
        if span.is_recording():
            span.set_status(self._status(self._error.status_code, reason[:256]))

    def shutdown(self) -> None:
        """Flush what is batched (a worker's last act); only a provider we built."""
        if self._owned:
            self._provider.shutdown()
