"""One worker process: read jobs from the stream, run their handlers, ack.

- loop.py        the Worker: composes the parts below and runs them
- lifecycle.py   boot (Redis, group, connections), drain, stop
- reader.py      own-pending recovery, consume '>'
- readahead.py   reads ahead during a backlog, replies handled in data_received
- _entries.pyx   in C, required: a reply's first deliveries (FastDispatch), the
                 read-ahead's streak and reply wait (Streak, ReplyWait), the XACK's
                 bytes; its units in _native/*.pxi, its C declarations in _entries.pxd
- reclaim.py     XAUTOCLAIM passes of entries idle past claim_idle_ms
- slots.py       at most `concurrency` entries held, reserved before a read
- redelivery.py  delivery and start counts, isolation of suspicious entries (poison)
- dispatch.py    entry -> parse -> handler under policy -> ack, dead letter or pending
- eager.py       a handler's coroutine started at once; a Task only if it suspends
- entries.py     _entries.pyx's names, or NativeMissing (a one-line boot error)
- settle.py      every job's outcome written down: the job stats and the ack queue
                 (where a job is acked: Settle.settle)
- acks.py        XACK, coalesced and piggybacked on the next read
- outage.py      Redis out of memory: read nothing new, say so once in a while, resume
                 the own pending list when a write goes through
- policy.py      a job's time limit, retries with backoff and jitter, the verdict
- child.py       the worker process's entry under the supervisor: heartbeats over the
                 pipe, exit codes, the boot report
- family.py      the memory and CPU a worker answers for: its own with its render
                 process's
- presence.py    the heartbeat to Redis: the claim on the consumer name, the presence
                 in the fleet registry, the pause flag
- ownership.py   one consumer name, one reading process: the claim on the name in Redis
"""
