"""What operators see and do: the queries and actions the CLI and the web console
both run.  The layer above telemetry: it may read telemetry/, and nothing below it
(worker/, supervisor/, telemetry/) imports it (tests/package/test_layers.py).

- client.py    the Redis client the CLI and the web hand to these operations
- check.py     `status --check`: the status judged against thresholds
- serverinfo.py  the server behind the queue: version, role and memory, one INFO
- fleet.py     the pause flag set and cleared, and who is alive (presence records)
- pending.py   pending entries as the console lists them
- deadletters.py  the dead-letter stream as the console reads and acts on it
- text.py      what came off the stream escaped for the terminal and the page;
               durations as people read them
- sandbox.py   which paths a systemd unit's sandbox hides from its service
- jobs.py      one job's story (`stagedoor job`, the console's page)
- jobscan.py   finding jobs by order or outbox id: the streams read in slices, no index
- audit.py     the audit log of operator actions: a log line and a capped stream
- release.py   a stuck pending entry handed to the fleet now (`pending release`, the page)
- doctor/      `stagedoor doctor`: what a host and its Redis lack, and what to do
"""
