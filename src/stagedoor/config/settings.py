"""The Settings dataclass: every knob with its default, help text and bounds, and the
checks a Settings passes however it was built (the URL's own are urls.py's)."""

from __future__ import annotations

import dataclasses
import math
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from ..errors import ConfigError
from .urls import check_slots, validate_url


def _opt(default: Any, help: str, *, lo: float | None = None, hi: float | None = None,
         flag: bool = True) -> Any:
    return field(default=default, metadata={"help": help, "lo": lo, "hi": hi, "flag": flag})


def _list_opt(help: str, default: Sequence[str] = ()) -> Any:
    return field(default_factory=lambda: list(default),
                 metadata={"help": help, "lo": None, "hi": None, "flag": True})


# The renderer's fonts (render/fonts.py): Noto from Debian's fonts-noto-core and
# fonts-noto-cjk, Symbola (fonts-symbola) for emoji; scripts.setup.sh installs them.
_CJK = "NotoSansCJK-Regular.ttc"
FONT_DIRS = ("/usr/share/fonts/truetype/noto", "/usr/share/fonts/opentype/noto",
             "/usr/share/fonts/truetype/ancient-scripts")
SCRIPT_FONTS = (
    "Latn=NotoSans-Regular.ttf", "Grek=NotoSans-Regular.ttf", "Cyrl=NotoSans-Regular.ttf",
    "Arab=NotoSansArabic-Regular.ttf", "Hebr=NotoSansHebrew-Regular.ttf",
    "Deva=NotoSansDevanagari-Regular.ttf", "Thai=NotoSansThai-Regular.ttf",
    f"Hang={_CJK}#1", "Armn=NotoSansArmenian-Regular.ttf", "Geor=NotoSansGeorgian-Regular.ttf",
    "Beng=NotoSansBengali-Regular.ttf", "Taml=NotoSansTamil-Regular.ttf",
    "Telu=NotoSansTelugu-Regular.ttf", "Knda=NotoSansKannada-Regular.ttf",
    "Mlym=NotoSansMalayalam-Regular.ttf", "Gujr=NotoSansGujarati-Regular.ttf",
    "Guru=NotoSansGurmukhi-Regular.ttf", "Orya=NotoSansOriya-Regular.ttf",
    "Sinh=NotoSansSinhala-Regular.ttf", "Khmr=NotoSansKhmer-Regular.ttf",
    "Laoo=NotoSansLao-Regular.ttf", "Mymr=NotoSansMyanmar-Regular.ttf",
    "Ethi=NotoSansEthiopic-Regular.ttf")
FALLBACK_FONTS = ("NotoSans-Regular.ttf", "NotoSansSymbols-Regular.ttf",
                  "NotoSansSymbols2-Regular.ttf", "NotoSansMath-Regular.ttf", "Symbola_hint.ttf")
HAN_FONTS = (f"zh-Hans={_CJK}#2", f"zh-Hant={_CJK}#3", f"zh-HK={_CJK}#4", f"ja={_CJK}#0",
             f"ko={_CJK}#1")
HAN_ORDER = ("zh-Hans", "zh-Hant", "ja", "ko")
# faces an order's language (its locale's primary subtag) asks for: Urdu is written in
# Nastaliq, the Arabic faces are Naskh
LANG_FONTS = ("ur=Arab:NotoNastaliqUrdu-Regular.ttf",)
# colour emoji (render/emoji.py): Noto Color Emoji from fonts-noto-color-emoji
EMOJI_FONTS = ("NotoColorEmoji.ttf",)


@dataclass(frozen=True, slots=True)
class Settings:
    # -- where the queue lives -------------------------------------------------
    redis_url: str = _opt("", "Redis URL: redis://, rediss://, unix://, or Sentinel: "
                              "redis+sentinel://host:port[,host:port...]/<master>[/<db>] "
                              "(rediss+sentinel: TLS to the master), or Cluster: "
                              "redis+cluster://host:port[,host:port...] (stream default "
                              "{jobs}, dead stream {jobs}:dead). Required (empty is a "
                              "config error, exit 78) but by `stagedoor demo`, which then "
                              "starts an embedded redis-server under --state-dir.")
    redis_password_file: str = _opt("", "File holding the Redis password (systemd "
                                        "LoadCredential); keeps it out of the URL and ps.")
    sentinel_username: str = _opt("", "User name on the sentinels (their own ACL, not the "
                                      "master's).")
    sentinel_password_file: str = _opt("", "File holding the sentinels' password (not the "
                                           "master's).")
    sentinel_tls_ca_file: str = _opt("", "CA file for TLS to the sentinels; empty: plain "
                                         "text to the sentinels.")
    wait_replicas: int = _opt(-1, "Replicas a producer's XADDs must reach (WAIT) before "
                                  "enqueue returns; -1: 1 with a Sentinel URL, else 0 (off).",
                              lo=-1, hi=100)
    wait_timeout_ms: int = _opt(1000, "How long WAIT waits for those replicas (ms); fewer "
                                      "is an error for the producer.", lo=1, hi=600_000)
    stream: str = _opt("jobs", "The job stream.")
    group: str = _opt("workers", "The consumer group on the job stream.")
    dead_stream: str = _opt("jobs:dead", "The dead-letter stream.")
    key_prefix: str = _opt("stagedoor:", "Prefix of the other keys (orders, idempotency marks).")
    # -- the loop (seed defaults) ----------------------------------------------
    count: int = _opt(10, "XREADGROUP COUNT: most entries asked for per read.", lo=1, hi=10_000)
    block_ms: int = _opt(5000, "XREADGROUP BLOCK in ms: how long a read waits for work.",
                         lo=1, hi=3_600_000)
    concurrency: int = _opt(8, "Jobs in flight per worker process.", lo=1, hi=10_000)
    read_ahead: int = _opt(2, "Reads on the wire at once while the stream has a backlog, "
                              "each for at most concurrency / read_ahead entries and never "
                              "more than the free slots: Redis serves the next read while "
                              "this one's jobs run. 1: one read at a time.", lo=1, hi=64)
    socket_timeout: float = _opt(0.1, "Socket timeout in s of every Redis call but the "
                                      "blocking read.", lo=0.001, hi=60)
    connect_timeout: float = _opt(1.0, "Connect timeout in s.", lo=0.001, hi=60)
    claim_idle_ms: int = _opt(60_000, "XAUTOCLAIM threshold in ms: pending entries idle "
                                      "longer than this are taken over.", lo=1, hi=86_400_000)
    reclaim_interval: float = _opt(30.0, "Seconds between reclaim passes of a busy worker; "
                                         "an idle one (a read found nothing new) reclaims "
                                         "at most once per block_ms, and a pass that runs "
                                         "out of slots goes on as they free.",
                                   lo=0.01, hi=86_400)
    reclaim_count: int = _opt(10, "XAUTOCLAIM COUNT.", lo=1, hi=10_000)
    maxlen: int = _opt(100_000, "MAXLEN ~ of the job stream on every XADD.", lo=1)
    dead_maxlen: int = _opt(10_000, "MAXLEN ~ of the dead-letter stream.", lo=1)
    audit_maxlen: int = _opt(10_000, "MAXLEN ~ of the audit stream: the operator actions "
                                     "(pause, resume, replay, delete, purge, ticket download) "
                                     "of the console and the CLI, newest kept.", lo=1)
    backlog_warn_fraction: float = _opt(
        0.8, "A producer logs a warning once the group's backlog (undelivered + pending) "
             "reaches this fraction of maxlen.", lo=0.01, hi=1.0)
    backlog_refuse_fraction: float = _opt(
        0.95, "A producer refuses jobs beyond this fraction of maxlen (BacklogFull; exit "
              "75 from `stagedoor enqueue`), and `dead replay` stops there (exit 75), "
              "before MAXLEN ~ would trim unread jobs.",
        lo=0.01, hi=1.0)
    max_deliveries: int = _opt(5, "A job delivered more often than this is poison: it is "
                                  "dead-lettered without running.", lo=1, hi=1_000_000)
    ack_flush_ms: float = _opt(5.0, "Longest an ack waits for the next read to carry it (ms); "
                                    "at once while the read blocks.",
                               lo=0, hi=1000)
    # -- the handler policy ------------------------------------------------------
    job_timeout: float = _opt(30.0, "Default per-job time limit in s; must stay below the "
                                    "claim threshold.", lo=0.001)
    retries: int = _opt(3, "Retries of a transient failure inside one delivery.", lo=0, hi=100)
    retry_backoff: float = _opt(0.05, "First retry delay in s; doubles each retry, with "
                                      "jitter.", lo=0, hi=60)
    retry_backoff_max: float = _opt(2.0, "Longest retry delay in s.", lo=0, hi=600)
    outage_log_interval: float = _opt(
        10.0, "While Redis refuses writes (out of memory), a worker logs one line per this "
              "many seconds.", lo=0.1, hi=3600)
    handlers: list[str] = _list_opt("Extra handler registries as module:attr (repeatable).")
    render_threads: int = _opt(8, "Threads in the render pool of each worker.", lo=1, hi=256)
    render_isolation: str = _opt(
        "process", "Where render_tickets renders: process (a render process per worker, so "
                   "a crash inside the renderer costs only the order that caused it) or "
                   "none (in the worker: a crash takes the worker and its other jobs).")
    render_timeout: float = _opt(
        20.0, "Longest a render may take in the render process (s): then it is taken as "
              "hung, the process is killed and its renders run again one at a time; one "
              "that hangs alone is its order's failure (dead-lettered).  Keep it below "
              "render_tickets' time limit (job_timeout).", lo=0.1, hi=3600)
    render_fallback: str = _opt(
        "none", "When the native renderer cannot load: none (a worker with render_tickets "
                "refuses to start, exit 78) or reference (render with the pure-Python "
                "reference, ~100x slower; needs stagedoor[reference]).")
    render_font_dirs: list[str] = _list_opt(
        "Directories where the ticket fonts are looked up by file name.", FONT_DIRS)
    render_fonts: list[str] = _list_opt(
        "Fonts per script: ISO 15924 code=file[#face][|file...] in order of preference "
        "(bold: the -Bold file beside a -Regular one); a list replaces the whole "
        "default.", SCRIPT_FONTS)
    render_font_fallback: list[str] = _list_opt(
        "Fonts tried for characters their script's fonts lack (symbols, emoji).",
        FALLBACK_FONTS)
    render_han_fonts: list[str] = _list_opt(
        "The face of Han characters per order locale: locale=file[#face].", HAN_FONTS)
    render_han_order: list[str] = _list_opt(
        "Han faces tried (by locale key) when an order has no locale; kana in an order "
        "puts ja first.", HAN_ORDER)
    render_lang_fonts: list[str] = _list_opt(
        "The face of a script for an order language (its locale's primary subtag): "
        "lang=Script:file[#face], tried before the script's faces.", LANG_FONTS)
    render_font_discover: int = _opt(
        1, "1: derive the faces of every script from what the fonts in render_font_dirs "
           "cover (render_fonts first); 0: only the configured fonts.", lo=0, hi=1)
    render_emoji_fonts: list[str] = _list_opt(
        "Colour emoji fonts (PNG glyphs), the first found draws every emoji sequence "
        "(flags, skin tones, joined emoji) as one glyph; empty: emoji in black, a "
        "sequence as its base emoji.", EMOJI_FONTS)
    tickets_dir: str = _opt("var/tickets", "Where ticket PDFs are written.")
    idempotency_ttl: int = _opt(
        7 * 86_400, "Longest a finished outbox_id is remembered, in s: a done mark lives "
        "for the stream's window (the age of its oldest entry), never less than "
        "claim_idle_ms + reclaim_interval, never more than this.", lo=1)
    max_field_bytes: int = _opt(256, "Largest accepted job field value in bytes.", lo=8,
                                hi=65_536)
    # -- the process ---------------------------------------------------------------
    consumer: str = _opt("", "Consumer name prefix; default the host name. Slot k is "
                             "<prefix>-<k>.")
    state_dir: str = _opt("var", "Directory for the embedded Redis, pid files and scratch.")
    workers: int = _opt(4, "Worker processes under the supervisor.", lo=1, hi=256)
    heartbeat_interval: float = _opt(1.0, "Seconds between worker heartbeats.", lo=0.01, hi=60)
    heartbeat_timeout: float = _opt(30.0, "A worker silent this long is hung: SIGABRT, "
                                          "then SIGKILL.", lo=0.05, hi=3600)
    boot_timeout: float = _opt(30.0, "A worker not READY this long after fork failed to "
                                     "boot.", lo=0.1, hi=3600)
    graceful_timeout: float = _opt(30.0, "Seconds a stopping worker gets to finish its "
                                         "jobs.", lo=0, hi=3600)
    max_worker_memory: int = _opt(0, "RSS in MB, the worker's with its render "
                                     "process's, above which a worker is recycled "
                                     "gracefully; 0 is off.", lo=0)
    metrics_port: int = _opt(0, "Port of the Prometheus endpoint on 127.0.0.1; 0 is off.",
                             lo=0, hi=65_535)
    metrics_host: str = _opt("127.0.0.1", "Address of the Prometheus endpoint.")
    log_format: str = _opt("auto", "Log format: auto (journal under systemd, text on a "
                                   "terminal, else json), json, text or journal (json "
                                   "with the syslog priority prefix).")
    log_level: str = _opt("info", "Log level: debug, info, warning, error.")

    # ------------------------------------------------------------------------------
    def __post_init__(self) -> None:
        if (self.redis_url.split("://", 1)[0].endswith("+cluster")
                and (self.stream, self.dead_stream) == ("jobs", "jobs:dead")):
            # On a cluster the queue's keys need one hash tag: the defaults get it
            # (stream/keys.py; an existing standalone deployment keeps `jobs`).
            object.__setattr__(self, "stream", "{jobs}")
            object.__setattr__(self, "dead_stream", "{jobs}:dead")
        _validate(self)

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    @property
    def consumer_prefix(self) -> str:
        return self.consumer or socket.gethostname().split(".")[0] or "worker"

    def consumer_name(self, slot: int) -> str:
        """Stable per slot and reused on respawn, so a restart recovers its own PEL."""
        return f"{self.consumer_prefix}-{slot:02d}"

    def key(self, *parts: str | int) -> str:
        return self.key_prefix + ":".join(str(p) for p in parts)

    @property
    def replicas_to_wait(self) -> int:
        """wait_replicas with -1 resolved: 1 under Sentinel (it implies replicas), else 0."""
        if self.wait_replicas >= 0:
            return self.wait_replicas
        return 1 if self.redis_url.split("://", 1)[0].endswith("+sentinel") else 0

    @property
    def read_socket_timeout(self) -> float:
        """The blocking read's own timeout: longer than BLOCK, because waiting is its job."""
        return self.block_ms / 1000 + max(1.0, self.socket_timeout * 10)


# -- the checks a Settings passes, whichever way it was built ----------------------------

_NAME = re.compile(r"[A-Za-z0-9._:{}\-]{1,200}")


def _validate(s: Settings) -> None:
    for f in fields(s):
        lo, hi = f.metadata.get("lo"), f.metadata.get("hi")
        value = getattr(s, f.name)
        # NaN compares false with every bound, so it would pass them all; inf is no
        # timeout or size anyone means.  Whatever way a Settings was built, refuse them.
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{f.name}={value!r}: must be a finite number")
        if lo is not None and value < lo:
            raise ConfigError(f"{f.name}={value!r}: must be at least {lo:g}")
        if hi is not None and value > hi:
            raise ConfigError(f"{f.name}={value!r}: must be at most {hi:g}")
    if s.redis_url:
        validate_url(s.redis_url)
        if s.redis_url.split("://", 1)[0].endswith("+cluster"):
            check_slots(s.stream, s.dead_stream)
            if s.wait_replicas > 0:
                raise ConfigError("wait_replicas: WAIT is not supported with redis+cluster:// "
                                  "(it has no key to route by); use 0")
    for name in ("stream", "group", "dead_stream"):
        if not _NAME.fullmatch(getattr(s, name)):
            raise ConfigError(f"{name}={getattr(s, name)!r}: use 1-200 of A-Z a-z 0-9 . _ : - {{}}")
    if s.stream == s.dead_stream:
        raise ConfigError("dead_stream must differ from stream")
    if s.job_timeout * 1000 >= s.claim_idle_ms:
        raise ConfigError(f"job_timeout={s.job_timeout:g}s must be below claim_idle_ms="
                          f"{s.claim_idle_ms} or live jobs would be reclaimed from their worker")
    if s.backlog_warn_fraction > s.backlog_refuse_fraction:
        raise ConfigError(f"backlog_warn_fraction={s.backlog_warn_fraction:g} must not be "
                          f"above backlog_refuse_fraction={s.backlog_refuse_fraction:g}")
    if s.heartbeat_timeout <= s.heartbeat_interval:
        raise ConfigError("heartbeat_timeout must be longer than heartbeat_interval")
    if s.log_format not in ("auto", "json", "text", "journal"):
        raise ConfigError(f"log_format={s.log_format!r}: expected auto, json, text or "
                          "journal")
    if s.render_isolation not in ("process", "none"):
        raise ConfigError(f"render_isolation={s.render_isolation!r}: expected process or none")
    if s.render_fallback not in ("none", "reference"):
        raise ConfigError(f"render_fallback={s.render_fallback!r}: expected none or reference")
    if s.log_level.lower() not in ("debug", "info", "warning", "error"):
        raise ConfigError(f"log_level={s.log_level!r}: expected debug, info, warning or error")
    for spec in s.handlers:
        if ":" not in spec:
            raise ConfigError(f"handlers: {spec!r} is not module:attr")
