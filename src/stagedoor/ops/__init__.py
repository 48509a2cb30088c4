"""What operators see: queue status, metrics, logs.

- inspect.py   queue status from Redis (lag, pending, oldest, consumers, dead letters)
- exporter.py  Prometheus text from the workers' snapshots, counters that never go back
- endpoint.py  the supervisor's non-blocking /metrics listener (no thread)
- metrics.py   the worker's counters and the duration buckets
- logs.py      JSON (or text) log lines with the job's request_id and trace
- jobs.py      one job's story (`stagedoor job`, the console's page)
- jobscan.py   finding jobs by order or outbox id: the streams read in slices, no index
- audit.py     the audit log of operator actions: a log line and a capped stream
- doctor/      `stagedoor doctor`: what a host and its Redis lack, and what to do
"""
