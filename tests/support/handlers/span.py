"""A handler that makes its own span the way docs/handlers.md shows (the global API).

For tests/telemetry/test_tracing.py: --handlers tests.support.handlers.span:registry.
"""

from __future__ import annotations

from opentelemetry import trace

from stagedoor.handlers import Context, Registry
from stagedoor.stream.job import Job

registry = Registry()
# At import, as docs/handlers.md shows: before the worker has set up any provider.
tracer = trace.get_tracer("tests.support.handlers.span")


@registry.register("spanning")
async def spanning(job: Job, ctx: Context) -> None:
    with tracer.start_as_current_span("handler work") as span:
        span.set_attribute("outbox_id", job.outbox_id)
