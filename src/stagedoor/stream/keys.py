"""Key names: flat, or hash-tagged so that every script touches one cluster slot.

Redis Cluster runs a script only when all its keys hash to one slot.  The queue's
keys (the stream, the dead-letter stream, the start counts of its entries) share the
stream's hash tag, and an order's keys (the order hash, the lease and the done mark
of each of its jobs) share a tag of the order id, so orders spread over the cluster
and each script stays on one slot.  Nothing atomic spans the queue and an order.

    flat (stream `jobs`, the layout before Cluster; standalone and Sentinel default)
        jobs  jobs:dead  stagedoor:starts:<entry id>  stagedoor:settled:<entry id>
        stagedoor:dead-trimmed:jobs
        stagedoor:order:<order id>  stagedoor:done:<outbox id>  stagedoor:running:<outbox id>
    tagged (the stream's name has a hash tag, `{jobs}`: the redis+cluster:// default)
        {jobs}  {jobs}:dead  stagedoor:starts:{jobs}:<entry id>  (settled: the same)
        stagedoor:dead-trimmed:{jobs}
        stagedoor:order:{<order id>}  stagedoor:done:{<order id>}:<outbox id>
        stagedoor:running:{<order id>}:<outbox id>

The layout follows the stream's name, so an existing deployment keeps its keys until
it renames its stream (docs/scaling.md, "Moving to Cluster", says how to move).
"""

from __future__ import annotations

from ..config import Settings


def hash_tag(name: str) -> str | None:
    """What Redis Cluster hashes of `name`: the text between the first { and the next }."""
    start = name.find("{")
    end = name.find("}", start + 1) if start >= 0 else -1
    if start < 0 or end <= start + 1:
        return None
    return name[start + 1:end]


def tagged(settings: Settings) -> bool:
    return hash_tag(settings.stream) is not None


def starts_key(settings: Settings, entry_id: str) -> str:
    if tagged(settings):
        return settings.key("starts", "{" + str(hash_tag(settings.stream)) + "}", entry_id)
    return settings.key("starts", entry_id)


def dead_trimmed_key(settings: Settings) -> str:
    """The count of dead letters MAXLEN ~ dead_maxlen trimmed away (an integer string).

    Named after the job stream, whose name carries the hash tag when there is one: the
    dead-letter script updates it on the stream's slot."""
    return settings.key("dead-trimmed", settings.stream)


def settled_key(settings: Settings, entry_id: str) -> str:
    """How many of the entry's recorded starts ended in a failure the worker lived to
    report (worker/redelivery.py): starts beyond it are the ones that may have crashed."""
    if tagged(settings):
        return settings.key("settled", "{" + str(hash_tag(settings.stream)) + "}", entry_id)
    return settings.key("settled", entry_id)


def order_key(settings: Settings, order_id: int) -> str:
    if tagged(settings):
        return settings.key("order", f"{{{order_id}}}")
    return settings.key("order", order_id)


def done_key(settings: Settings, order_id: int, outbox_id: int) -> str:
    if tagged(settings):
        return settings.key("done", f"{{{order_id}}}", outbox_id)
    return settings.key("done", outbox_id)


def lease_key(settings: Settings, order_id: int, outbox_id: int) -> str:
    if tagged(settings):
        return settings.key("running", f"{{{order_id}}}", outbox_id)
    return settings.key("running", outbox_id)


# -- the console's keys (issue 26): on the stream's hash tag, so a Cluster keeps them in
# the queue's slot and one pipeline (or script) reaches them with the stream's keys.

def paused_key(settings: Settings) -> str:
    """The fleet-wide pause flag (JSON: since, by, reason); absent means running."""
    return settings.key("paused", settings.stream)


def presence_key(settings: Settings, consumer: str) -> str:
    """One worker's presence record (JSON), written at its heartbeat with an expiry."""
    return settings.key("worker", settings.stream, consumer)


def fleet_key(settings: Settings) -> str:
    """The names of the workers that wrote a presence record (hash consumer -> last ms)."""
    return settings.key("fleet", settings.stream)


JOB_INDEX_TTL_S = 86_400 + 3_600  # each hour's job index lives a day past its hour


def job_index_prefix(settings: Settings) -> str:
    """job_index_key without the hour: the scripts append it (ids' ms // 3600000)."""
    return settings.key("jobidx", settings.stream, "")


def job_index_key(settings: Settings, hour: int) -> str:
    """The job index of one hour of entry ids (hash: o:<order id> -> entry ids,
    b:<outbox id> -> entry id, d:<entry id> -> dead-letter id); `hour` is id ms // 3.6e6."""
    return settings.key("jobidx", settings.stream, hour)


def owner_key(settings: Settings, consumer: str) -> str:
    """Who reads under a consumer name now (worker/ownership.py): one small key per live
    name, with an expiry, on the stream's hash tag like the presence record."""
    return settings.key("owner", settings.stream, consumer)
