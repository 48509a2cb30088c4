"""The supervisor: no threads, no event loop, no Redis; forks and watches N workers.

- loop.py     the Supervisor: the select loop, signals, respawns, rolling restarts,
              the watchdog, the status line and file
- process.py  one forked worker seen from the parent: its pipe, heartbeats, reaping
- systemd.py  sd_notify (READY, STATUS, WATCHDOG, STOPPING) over the notify socket
"""
