"""The stream boundary: what goes on the Redis stream and how we talk to Redis.

- job.py         Job and parse_job: five fields of bytes -> a typed job or a reason
- queue.py       the producer side: ensure the group, enqueue (single, bulk; one script
                 per chunk with the backlog check), and the dead-letter script
- backlog.py     jobs trimmed before any read: counted in Redis; the group's backlog
- errors.py      what an error means: permanent, Redis out of memory, or transient
- connection.py  redis-py clients with the seed's timeouts; the server version floor
- auth.py        the password file and TLS, once for both kinds of connection
- resp.py        the lean hot-path connection (hiredis on an asyncio protocol) the
                 worker reads and acks through
"""
