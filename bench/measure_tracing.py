"""Tracing overhead: the no-op drain with tracing on (stagedoor[otel]) against off.

Both are `stagedoor work --burst` on the same fresh backlog, interleaved round by round
on one redis-server, so a busy machine slows both alike; the figure is the median of
rate(on) / rate(off).  "On" is what an operator gets from OTEL_EXPORTER_OTLP_ENDPOINT:
a CONSUMER span per job, sampled (the SDK's default, parent-based always-on; the jobs
carry sampled traceparents), batched and exported over OTLP/HTTP to a receiver this
bench runs on a free loopback port (it counts the spans, so the ratio is not bought by
dropping them).

    PYTHONPATH=src:. .venv/bin/python -m bench.measure_tracing [--n 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from . import measure_common as mc
from .measure_drain import drain


@contextlib.contextmanager
def span_sink() -> Iterator[dict[str, int]]:
    """An OTLP/HTTP receiver that counts the spans it is sent."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    seen = {"spans": 0, "port": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            request = ExportTraceServiceRequest()
            request.ParseFromString(self.rfile.read(int(self.headers["Content-Length"])))
            seen["spans"] += sum(len(ss.spans) for rs in request.resource_spans
                                 for ss in rs.scope_spans)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    seen["port"] = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        server.shutdown()
        server.server_close()


def tracing_ratio(n: int = 20_000, rounds: int = 3) -> dict[str, Any]:
    rates: dict[str, list[float]] = {"off": [], "on": []}
    with mc.redis_server() as server, span_sink() as sink:
        on_env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink['port']}",
                  "OTEL_SERVICE_NAME": "stagedoor-bench"}
        for r in range(rounds):
            for mode in (("off", "on") if r % 2 == 0 else ("on", "off")):
                before = sink["spans"]
                res = drain(server.url, n, extra_env=on_env if mode == "on" else None)
                rates[mode].append(res["rate"])
                if mode == "on" and sink["spans"] - before != n:
                    raise RuntimeError(f"tracing on: {sink['spans'] - before} spans "
                                       f"exported for {n} jobs")
                mc.progress(f"tracing {mode}: {res['rate']:.0f} jobs/s")
    ratios = sorted(on / off for on, off in zip(rates["on"], rates["off"], strict=True))
    return {"n": n, "rounds": rounds, "rates": rates, "ratios": ratios,
            "ratio": mc.median(ratios)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    result = tracing_ratio(args.n, args.rounds)
    print(json.dumps(result, indent=2))
    print(f"tracing on / off, no-op drain rate: {result['ratio']:.2f} (median of "
          f"{args.rounds}; {', '.join(f'{r:.2f}' for r in result['ratios'])})")


if __name__ == "__main__":
    main()
