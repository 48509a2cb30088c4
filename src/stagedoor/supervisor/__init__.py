"""The supervisor: no threads, no event loop, no Redis; forks and watches N workers.

- loop.py       the Supervisor: the select loop, signals, stop, rolling restart, watchdog
- pool.py       the worker processes: fork, heartbeats, reap, respawn, kill
- decisions.py  the rules as plain functions (no OS calls): respawn backoff, flapping,
                boot verdicts, hangs and kill deadlines, recycling, rolling-restart order
- state.py      the bookkeeping: slots, processes, options
- report.py     STATUS= for systemd, the status file, the Prometheus metrics
- signals.py    the signal inbox (handlers only record; the loop acts)
- process.py    one forked child: pipes, pidfd, signals, reaping; fork safety
- systemd.py    sd_notify (READY, STATUS, WATCHDOG, STOPPING) over the notify socket
"""
