"""Which paths a unit's sandbox hides from its service, so the installer can say so.

The shipped units run with ProtectHome=yes (/home, /root and /run/user are empty and
inaccessible to the service) and PrivateTmp=yes (the service gets /tmp and /var/tmp
of its own, empty).  An ExecStart= under one of them, or an interpreter, a venv or a
standard library there (a venv made from a pyenv Python under /root, a checkout under
/home, a test venv under /tmp), cannot start: systemd reports 203/EXEC or Python does
not find its modules, long after `stagedoor systemd install` said "wrote".

EnvironmentFile= and LoadCredential= are read by the service manager before the
sandbox is set up, so --config-dir may be anywhere.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

import stagedoor

HOME_DIRS = ("/home", "/root", "/run/user")
TMP_DIRS = ("/tmp", "/var/tmp")
HIDING = {"yes", "true", "on", "1", "tmpfs"}  # ProtectHome= values that hide (not read-only)


def directives(unit_text: str) -> dict[str, str]:
    """The [Service] settings of a unit (the last assignment wins, as in systemd)."""
    out: dict[str, str] = {}
    for line in unit_text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")) and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def _under(path: str, roots: Iterable[str]) -> str | None:
    return next((r for r in roots if path == r or path.startswith(r + "/")), None)


def why_hidden(unit_text: str, path: str) -> str | None:
    """The sandbox setting that hides path from the unit's service, or None."""
    d = directives(unit_text)
    candidates = {path, str(Path(path).resolve())}
    for p in sorted(candidates):
        root = _under(p, HOME_DIRS)
        if root and d.get("ProtectHome", "no").lower() in HIDING:
            return (f"{p} is under {root}, which ProtectHome={d['ProtectHome']} hides from "
                    "the service")
        root = _under(p, TMP_DIRS)
        if root and d.get("PrivateTmp", "no").lower() in ("yes", "true", "on", "1"):
            return (f"{p} is under {root}, which PrivateTmp=yes replaces with an empty "
                    "directory of the service's own")
    return None


def interpreter(executable: str) -> str | None:
    """The #! interpreter of a script, if it has one."""
    try:
        with open(executable, "rb") as fh:
            first = fh.readline(4096)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode(errors="replace").split()
    return words[0] if words else None


def hidden_paths(unit_text: str, executable: str | None) -> list[str]:
    """Why the unit's service could not run this installation, one reason per path: the
    ExecStart= program, its interpreter, this Python's prefix and standard library, and
    the stagedoor package."""
    paths = [executable, interpreter(executable) if executable else None, sys.prefix,
             sys.base_prefix, str(Path(stagedoor.__file__).parent)]
    reasons: list[str] = []
    for path in dict.fromkeys(p for p in paths if p):
        why = why_hidden(unit_text, path)
        if why and why not in reasons:
            reasons.append(why)
    return reasons
