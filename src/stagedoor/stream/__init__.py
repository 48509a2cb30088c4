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
- resp.py        the lean hot-path connection (hiredis on an asyncio protocol) the
                 worker reads and acks through
"""
