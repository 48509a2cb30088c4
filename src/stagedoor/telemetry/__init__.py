"""What the worker and the supervisor report about themselves: counters, log lines,
traces, the queue's numbers and the /metrics page.  The layer below the console: it
imports no console, CLI or web module (tests/package/test_layers.py).

- metrics.py   the worker's counters and the duration buckets
- logs.py      JSON (or text) log lines with the job's request_id and trace
- tracing.py   OpenTelemetry: a CONSUMER span per job (optional extra)
- shared_counts.py  a worker's counters in memory its supervisor shares
- exporter.py  Prometheus text from the workers' snapshots, counters that never go back
- endpoint.py  the supervisor's non-blocking /metrics listener (no thread)
- inspect.py   queue status from Redis (lag, pending, oldest, consumers, dead letters),
               and --watch's throughput from two of them
- kindstats.py the per-kind ring of the last hour (the Metrics tab): written at the
               workers' beat, read as counts and percentiles
- records.py   replies as text, records as JSON, one pipeline: the plumbing of the
               Redis reads here and in the console
"""
