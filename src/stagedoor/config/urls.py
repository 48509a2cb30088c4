"""Redis URLs as settings: the schemes stagedoor takes, each checked when the settings
load (a bad port, database, query value or unencoded password is a ConfigError, exit
78, not a traceback at the first connect), and the parts of a Sentinel or Cluster URL
(stream/sentinel.py and stream/cluster.py connect with them).

    redis+sentinel://[user[:password]@]host:port[,host:port...]/<master-name>[/<db>][?opts]
    redis+cluster://host:port[,host:port...][/0][?opts]      (rediss+...: TLS)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

from ..errors import ConfigError
from ..redaction import redact, remember, remember_url

_URL_SCHEMES = ("redis", "rediss", "unix", "redis+sentinel", "rediss+sentinel",
                "redis+cluster", "rediss+cluster")


@dataclass(frozen=True)
class SentinelTarget:
    """A parsed redis+sentinel:// URL."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int
    username: str | None
    password: str | None
    tls: bool
    options: dict[str, str]  # the query: ssl_* options of the master connection


@dataclass(frozen=True)
class ClusterTarget:
    seeds: tuple[tuple[str, int], ...]
    username: str | None
    password: str | None
    tls: bool
    options: dict[str, str]


def _hosts(netloc: str, where: str) -> list[tuple[str, int]]:
    """The host:port list of a Sentinel or Cluster URL (after any userinfo)."""
    out: list[tuple[str, int]] = []
    for item in netloc.rsplit("@", 1)[-1].split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"{where}: {item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    return out


def _userinfo(netloc: str) -> tuple[str | None, str | None]:
    userinfo = netloc.rsplit("@", 1)[0] if "@" in netloc else ""
    user, _, password = userinfo.partition(":")
    remember(unquote(password))  # masked in every output (redaction.py)
    return unquote(user) or None, unquote(password) or None


def parse_sentinel(url: str) -> SentinelTarget:
    parts = urlsplit(url)
    where = "redis_url (sentinel)"
    sentinels = _hosts(parts.netloc, where)
    path = [p for p in parts.path.split("/") if p]
    if not path or len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise ConfigError(f"{where}: the path must be /<master-name>[/<db>]")
    username, password = _userinfo(parts.netloc)
    return SentinelTarget(
        sentinels=tuple(sentinels), service=unquote(path[0]),
        db=int(path[1]) if len(path) == 2 else 0, username=username, password=password,
        tls=parts.scheme == "rediss+sentinel", options=dict(parse_qsl(parts.query)))


def parse_cluster(url: str) -> ClusterTarget:
    parts = urlsplit(url)
    where = "redis_url (cluster)"
    seeds = _hosts(parts.netloc, where)
    if parts.path.strip("/") not in ("", "0"):
        raise ConfigError(f"{where}: a cluster has only database 0")
    username, password = _userinfo(parts.netloc)
    return ClusterTarget(tuple(seeds), username, password, parts.scheme == "rediss+cluster",
                         dict(parse_qsl(parts.query)))


def hash_tag(name: str) -> str | None:
    """What Redis Cluster hashes of `name`: the text between the first { and the next }."""
    start = name.find("{")
    end = name.find("}", start + 1) if start >= 0 else -1
    if start < 0 or end <= start + 1:
        return None
    return name[start + 1:end]


def check_slots(stream: str, dead_stream: str) -> None:
    """Scripts touch the stream and the dead-letter stream together: one cluster slot.

    And the stream's name carries a hash tag: the queue's other keys take it to share
    its slot (stream/keys.py, the tagged layout).  Untagged, they got the flat names,
    spread over the cluster: the enqueue script's counter on another node ("non local
    key", nothing enqueued) and every order script across slots."""
    from redis.crc import key_slot  # not at import: `import stagedoor` stays light

    if hash_tag(stream) is None:
        raise ConfigError(f"stream={stream!r} has no hash tag: on a cluster the queue's "
                          "keys take the stream's tag to share its slot; name it with "
                          "one, e.g. '{jobs}' and '{jobs}:dead'")
    if key_slot(stream.encode()) != key_slot(dead_stream.encode()):
        raise ConfigError(f"stream={stream!r} and dead_stream={dead_stream!r} hash to "
                          "different cluster slots: give both one hash tag, e.g. '{jobs}' "
                          "and '{jobs}:dead'")


_URL_DB = re.compile(r"/?([0-9]{1,5})?")


def validate_url(url: str) -> None:
    """The URL as redis-py will read it, checked now: a bad port, database or query
    value is a config error (exit 78) here, not a traceback at the first connect."""
    remember_url(url)
    parts = urlsplit(url)
    if parts.password:  # a quote or space in it ends the URL for redact's pattern
        remember(parts.password, unquote(parts.password))
    shown = _redact(url)
    _refuse_unencoded_password(url, parts.netloc, shown)
    if parts.scheme not in _URL_SCHEMES:
        raise ConfigError(f"redis_url={shown!r}: scheme must be one of redis://, rediss://, "
                          "unix://, redis+sentinel://, rediss+sentinel://, redis+cluster://, "
                          "rediss+cluster://")
    if parts.scheme.endswith("+sentinel"):
        parse_sentinel(url)  # ConfigError with one line if malformed
        return
    if parts.scheme.endswith("+cluster"):
        parse_cluster(url)
        return
    if parts.scheme != "unix":
        try:
            port = parts.port
        except ValueError:
            port = -1
        if port is not None and not 1 <= port <= 65_535:
            raise ConfigError(f"redis_url={shown!r}: the port must be a number 1-65535")
        if not _URL_DB.fullmatch(parts.path or ""):
            raise ConfigError(f"redis_url={shown!r}: the path must be a database number "
                              f"like /0, not {parts.path!r}")
    from redis.connection import parse_url  # not at import: `import stagedoor` stays light

    try:
        kwargs = parse_url(url)
    except ValueError as e:
        raise ConfigError(f"redis_url={shown!r}: {e}") from None
    remember(kwargs.get("password"))  # as redis-py reads it, odd characters and all
    for name, value in kwargs.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"redis_url={shown!r}: {name} must be a finite number")


def _refuse_unencoded_password(url: str, netloc: str, shown: str) -> None:
    """A password with an unencoded /, # or ? ends the URL's authority early: urlsplit
    (and redis-py) read the rest as a path, query or fragment, and the error would be a
    wrong port or host.  Name the cause instead: a userinfo (a colon) before an @ that
    comes after the authority, where the authority itself is no host:port."""
    rest = url.split("://", 1)[1][len(netloc):]
    if "@" in netloc or "@" not in rest:
        return
    host, _, port = netloc.rpartition(":")
    if netloc.startswith(":") or (host and not port.isdigit()):
        raise ConfigError(f"redis_url={shown!r}: the password holds a character that "
                          "must be percent-encoded in a URL (/ as %2F, # as %23, ? as %3F, "
                          "@ as %40), or put it in redis_password_file")


def _redact(url: str) -> str:
    """A URL fit for a log line: the password replaced by *** (redaction.redact)."""
    return redact(url)


redact_url = _redact
