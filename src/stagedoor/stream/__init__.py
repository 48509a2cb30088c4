"""The stream boundary: what goes on the Redis stream and how we talk to Redis.

- job.py         Job and parse_job: five fields of bytes -> a typed job or a reason
- queue.py       the producer side in one import, re-exported from its four parts:
  producer.py      enqueue (single, bulk; one script per chunk with the backlog check),
                   one plan run by the asyncio and the blocking client
  groups.py        ensure the consumer group; the errors that say it is missing
  enqueue_errors.py  EnqueueError and its kinds (BacklogFull, NotReplicated, ...)
  deadletter.py    the dead-letter format and the worker's dead-letter script
- backlog.py     jobs trimmed before any read: counted in Redis; the group's backlog
- errors.py      what an error means: permanent, Redis out of memory, or transient
- connection.py  redis-py clients with the seed's timeouts; the server version floor
- auth.py        the password file and TLS, once for both kinds of connection
- options.py     the options every redis-py client is made with (RESP2, no library
                 retries, the timeouts, no CLIENT SETINFO, a name)
- sentinel.py    the current master through Sentinel
- cluster.py     cluster clients and the queue's slot
- diagnose.py    the one line the CLI prints for an outage, its cause looked up
- keys.py        key names (hash-tagged on a cluster), the console's keys, the pause
                 flag's format and the presence keys' lifetimes
- resp.py        the lean hot-path connection (hiredis on an asyncio protocol) the
                 worker reads and acks through
- wire.py        its protocol: each reply to its future, or to a hook that handles it
                 where it is parsed
- deadlines.py   one event-loop timer for the time limits of a connection's calls
- scripts.py     Lua scripts on it: EVALSHA, SCRIPT LOAD on NOSCRIPT
"""
