"""One worker process: read jobs from the stream, run their handlers, ack.

- loop.py    the Worker: boot, the read/handle/ack loop, reclaim, slots, drain
- policy.py  a job's time limit, retries with backoff and jitter, the verdict
- child.py   the worker process's entry under the supervisor: heartbeats over the
             pipe, exit codes, the boot report
"""
