"""Run every worker of the test suite as the least-privilege ACL user: SD_TEST_ACL=1.

The test side (fixtures that seed data, check invariants, flush) stays the default
user; only the workers and supervisors under test connect as `stagedoor-worker`
with the exact ACL line of docs/security.md.  The servers the suite starts define
the user at startup (`--user`), so a Redis restarted empty still has it.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from urllib.parse import urlsplit

# Not STAGEDOOR_*: the product refuses unknown variables of its own prefix (exit 78).
ACL_MODE = os.environ.get("SD_TEST_ACL") == "1"
USER = "stagedoor-worker"
PASSWORD = "acl-mode-" + hashlib.sha256(b"stagedoor tests").hexdigest()[:16]
DOC = Path(__file__).parents[2] / "docs" / "security.md"


def acl_rules(cluster: bool = False) -> str:
    """The documented rules after the user name, with this suite's password: the first
    line of docs/security.md, or the second, the one for Redis Cluster."""
    flat, tagged = re.findall(rf"^ACL SETUSER {USER} (.*)$", DOC.read_text(), re.M)
    line = tagged if cluster else flat
    digest = hashlib.sha256(PASSWORD.encode()).hexdigest()
    return line.replace("#<sha256-of-password>", f"#{digest}")


def server_args(cluster: bool = False) -> list[str]:
    """redis-server arguments that define the worker user (empty unless in ACL mode)."""
    return ["--user", USER, *acl_rules(cluster).split()] if ACL_MODE else []


def worker_url(url: str) -> str:
    """The URL a worker under test connects with: as the ACL user in ACL mode.

    A URL that names a user already (a test of its own ACL) is left as it is."""
    parts = urlsplit(url)
    if not ACL_MODE or "@" in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    return parts._replace(netloc=f"{USER}:{PASSWORD}@{host}").geturl()
