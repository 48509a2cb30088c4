"""What operators see: queue status, metrics, logs.

- inspect.py   queue status from Redis (lag, pending, oldest, consumers, dead letters),
               and --watch's throughput from two of them
- check.py     `status --check`: the status judged against thresholds
- serverinfo.py  the server behind the queue: version, role and memory, one INFO
- records.py   the console operations' plumbing: records as JSON, replies as text
- fleet.py     the pause flag set and cleared, and who is alive (presence records)
- pending.py   pending entries as the console lists them
- deadletters.py  the dead-letter stream as the console reads and acts on it
- text.py      what came off the stream escaped for the terminal and the page;
               durations as people read them
- sandbox.py   which paths a systemd unit's sandbox hides from its service
- shared_counts.py  a worker's counters in memory its supervisor shares
- tracing.py   OpenTelemetry: a CONSUMER span per job (optional extra)
- exporter.py  Prometheus text from the workers' snapshots, counters that never go back
- endpoint.py  the supervisor's non-blocking /metrics listener (no thread)
- metrics.py   the worker's counters and the duration buckets
- logs.py      JSON (or text) log lines with the job's request_id and trace
- jobs.py      one job's story (`stagedoor job`, the console's page)
- jobscan.py   finding jobs by order or outbox id: the streams read in slices, no index
- audit.py     the audit log of operator actions: a log line and a capped stream
- release.py   a stuck pending entry handed to the fleet now (`pending release`, the page)
- kindstats.py the per-kind ring of the last hour (the Metrics tab): written at the
               workers' beat, read as counts and percentiles
- doctor/      `stagedoor doctor`: what a host and its Redis lack, and what to do
"""
