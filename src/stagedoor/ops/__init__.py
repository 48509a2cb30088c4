"""What operators see: queue status, metrics, logs.

- inspect.py   queue status from Redis (lag, pending, oldest, consumers, dead letters)
- exporter.py  the Prometheus endpoint of the supervisor, aggregated over workers
- metrics.py   the worker's counters and the duration buckets
- logs.py      JSON (or text) log lines with the job's request_id and trace
"""
