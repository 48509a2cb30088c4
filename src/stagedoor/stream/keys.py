"""Key names: flat, or hash-tagged so that every script touches one cluster slot.

Redis Cluster runs a script, or a command of several keys (DEL a b c), only when all
its keys hash to one slot.  The queue's keys (the stream, the dead-letter stream, the
start counts, settled starts and last errors of its entries, the workers' out-of-memory
probes) share the stream's hash tag, and an order's keys (the order hash, the lease of
each of its jobs, the hash of their done marks) share a tag of the order id, so orders
spread over the cluster and each script stays on one slot.  Nothing atomic spans the
queue and an order.

    flat (stream `jobs`, the layout before Cluster; standalone and Sentinel default)
        jobs  jobs:dead  stagedoor:starts:<entry id>  stagedoor:settled:<entry id>
        stagedoor:dead-trimmed:jobs  stagedoor:trimmed:jobs
        stagedoor:lasterr:<entry id>  stagedoor:probe:<consumer>
        stagedoor:order:<order id>  stagedoor:marks:<outbox id // 128>
        stagedoor:running:<outbox id>  (stagedoor:done:<outbox id>: read only, old marks)
    tagged (the stream's name has a hash tag, `{jobs}`: the redis+cluster:// default)
        {jobs}  {jobs}:dead  stagedoor:starts:{jobs}:<entry id>  (settled, lasterr: the same)
        stagedoor:dead-trimmed:{jobs}  stagedoor:trimmed:{jobs}
        stagedoor:probe:{jobs}:<consumer>
        stagedoor:order:{<order id>}  stagedoor:marks:{<order id>}
        stagedoor:running:{<order id>}:<outbox id>  (stagedoor:done:{<order id>}:<outbox id>)

The console's keys (the pause flag, the workers' presence records and their names, the
audit stream, the dead letters removed, the owner of a consumer name, the per-kind
ring) are on the stream's hash tag; the pause flag's format (PauseState, parse_pause)
and how long the presence keys live (presence_ttl_ms, FLEET_TTL_S) are here with their
names, because the worker writes and reads them as well as the console.

The layout follows the stream's name, so an existing deployment keeps its keys until
it renames its stream (docs/scaling.md, "Moving to Cluster", says how to move).

Last errors and probes were not tagged before (a cluster's DEL of an entry's three
keys crossed slots).  Such keys an older worker wrote are neither read nor deleted by
a newer one: a last error is lost to the poison verdict and `pending` of its entry and
runs out with its 24 h TTL (at most one per entry pending at the upgrade, so bounded
by the pending list); a probe lives 10 s.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from ..config import Settings
from ..config.urls import hash_tag  # the settings check a cluster's stream has one


def tagged(settings: Settings) -> bool:
    return hash_tag(settings.stream) is not None


def _on_stream_tag(settings: Settings, name: str, rest: str) -> str:
    """`<prefix><name>:{<stream's tag>}:<rest>` in the tagged layout, else
    `<prefix><name>:<rest>`: a key written or deleted together with the queue's keys
    (one DEL, one pipeline to one node), or standing for the queue's node."""
    if tagged(settings):
        return settings.key(name, "{" + str(hash_tag(settings.stream)) + "}", rest)
    return settings.key(name, rest)


def starts_key(settings: Settings, entry_id: str) -> str:
    return _on_stream_tag(settings, "starts", entry_id)


def dead_trimmed_key(settings: Settings) -> str:
    """The count of dead letters MAXLEN ~ dead_maxlen trimmed away (an integer string).

    Named after the job stream, whose name carries the hash tag when there is one: the
    dead-letter script updates it on the stream's slot."""
    return settings.key("dead-trimmed", settings.stream)


def settled_key(settings: Settings, entry_id: str) -> str:
    """How many of the entry's recorded starts ended in a failure the worker lived to
    report (worker/redelivery.py): starts beyond it are the ones that may have crashed."""
    return _on_stream_tag(settings, "settled", entry_id)


def lasterr_key(settings: Settings, entry_id: str) -> str:
    """The last failure a worker reported for an entry (text, capped): what a poison
    verdict, `pending` and a job's story say went wrong; kept as long as its starts.

    On the stream's tag like them: the console's dead-letter deletes the three in one
    DEL, and a worker's ack of a redelivered entry sends its DEL with the XACK, which a
    cluster takes only for keys of one slot (before, the DEL failed with the last error
    on another slot, and a worker's split in two went to two nodes)."""
    return _on_stream_tag(settings, "lasterr", entry_id)


def trimmed_key(settings: Settings) -> str:
    """The count of jobs trimmed before any worker read them (a hash: stream/backlog.py
    keeps it, the producer's and the audit's scripts write it)."""
    return settings.key("trimmed", settings.stream)


def probe_key(settings: Settings, consumer: str) -> str:
    """The tiny key a worker writes (with a short expiry) to learn that Redis takes
    writes again after running out of memory (worker/outage.py).

    On the stream's tag: on a cluster each master runs out of memory on its own, and
    the writes the worker waits for (XACK, dead letters, start counts) go to the
    queue's node; an untagged probe asked a node picked by the consumer's name, which
    could take writes while the queue's refused them."""
    return _on_stream_tag(settings, "probe", consumer)


def order_key(settings: Settings, order_id: int) -> str:
    if tagged(settings):
        return settings.key("order", f"{{{order_id}}}")
    return settings.key("order", order_id)


# Done marks by the MARK_BUCKET consecutive outbox ids share one hash (flat layout): a
# mark is a ~25-byte field of a small hash instead of a ~104-byte key of its own.
MARK_BUCKET = 128


def marks_key(settings: Settings, order_id: int, outbox_id: int) -> str:
    """The hash of done marks that holds outbox_id's (field: the outbox id, value: the
    kind), with the TTL of its newest mark (handlers/marks.py).  On the order's hash tag
    in the tagged layout, so the render script reaches it with the order; flat, by
    outbox_id // MARK_BUCKET (a relay's outbox ids are consecutive)."""
    if tagged(settings):
        return settings.key("marks", f"{{{order_id}}}")
    return settings.key("marks", outbox_id // MARK_BUCKET)


def done_key(settings: Settings, order_id: int, outbox_id: int) -> str:
    """A done mark as a key of its own: how marks were kept before issue 36 (7 days).
    Read only, so a job done just before an upgrade is still skipped as done."""
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


@dataclasses.dataclass
class PauseState:
    """The pause flag's value, read (parse_pause): the worker's heartbeat and the console
    read the one format."""
    paused: bool
    since: float | None = None  # epoch seconds the flag was set
    by: str | None = None
    reason: str | None = None
    key: str = ""
    # pause(): the fleet was paused already, and that pause (its time, who, its reason)
    # is kept: a second pause changes nothing, and says so
    kept_earlier: bool = False
    resumed: float | None = None  # epoch seconds of the resume the flag records, if so

    def to_json(self) -> dict[str, Any]:
        """What --json prints (as telemetry/records.Record's)."""
        return dataclasses.asdict(self)


def parse_pause(raw: Any, key: str) -> PauseState:
    """The flag's value -> its state: absent (never paused, or lost), a resumed record,
    or a pause (any other value: a flag that cannot be read still pauses)."""
    if raw is None:
        return PauseState(paused=False, key=key)
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        doc = {}
    if not isinstance(doc, dict):
        doc = {}
    by = str(doc["by"]) if doc.get("by") is not None else None
    resumed = doc.get("resumed")
    if isinstance(resumed, int | float) and not isinstance(resumed, bool):
        return PauseState(paused=False, by=by, key=key, resumed=float(resumed))
    since = doc.get("since")
    return PauseState(paused=True, since=float(since) if isinstance(since, int | float) else None,
                      by=str(doc["by"]) if doc.get("by") is not None else None,
                      reason=str(doc["reason"]) if doc.get("reason") is not None else None,
                      key=key)


def presence_key(settings: Settings, consumer: str) -> str:
    """One worker's presence record (JSON), written at its heartbeat with an expiry."""
    return settings.key("worker", settings.stream, consumer)


def presence_ttl_ms(settings: Settings) -> int:
    """How long a presence record outlives its last beat: five beats (a beat is the
    heartbeat, at least a second apart: worker/presence.py), so at least 5 s."""
    return max(5_000, int(settings.heartbeat_interval * 5_000))


def fleet_key(settings: Settings) -> str:
    """The names of the workers that wrote a presence record (hash consumer -> last ms),
    kept FLEET_TTL_S after the last write."""
    return settings.key("fleet", settings.stream)


FLEET_TTL_S = 86_400


def kinds_key(settings: Settings, slot: int) -> str:
    """One minute's hash of the per-kind ring (telemetry/kindstats.py), on the stream's
    hash tag like the console's other keys."""
    return settings.key("kinds", settings.stream, slot)


def audit_key(settings: Settings) -> str:
    """The audit stream: one entry per operator action, from the console or the CLI
    (console/audit.py), capped by MAXLEN ~ audit_maxlen; on the stream's hash tag."""
    return settings.key("audit", settings.stream)


def dead_gone_key(settings: Settings) -> str:
    """The dead letters the console removed (replayed, deleted, purged) or the
    dead-letter stream's cap trimmed (stream/queue.py's script): a stream of
    (source_id, dead_id, how, new_id), capped by MAXLEN ~ dead_maxlen, so a job
    dead-lettered is still told DEAD after its dead letter went (console/deadletters.py).
    On the stream's hash tag: the replay and delete scripts write it with the streams."""
    return settings.key("dead-gone", settings.stream)


def owner_key(settings: Settings, consumer: str) -> str:
    """Who reads under a consumer name now (worker/ownership.py): one small key per live
    name, with an expiry, on the stream's hash tag like the presence record."""
    return settings.key("owner", settings.stream, consumer)


def released_key(settings: Settings, consumer: str) -> str:
    """Set for a claim's TTL when a worker released its name at a clean exit
    (worker/ownership.py): the name is free at once, not vanished."""
    return settings.key("owner-released", settings.stream, consumer)
