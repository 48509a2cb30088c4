"""The console's credentials: one password file per role.

A password file holds the password on its one line, as systemd's LoadCredential= hands
it over (`%d/viewer-password`); a trailing newline is not part of it.  The user name
asked at log-in is the role's name.  There are no default credentials: a role without
a password file cannot log in, and without any file the console does not start.

Passwords are compared as SHA-256 digests with hmac.compare_digest, so the time a
comparison takes says nothing about the password (nor about its length).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..config import ConfigError

ROLES = ("viewer", "operator")
# what each role may do: the operator acts, the viewer only looks
ACTS = frozenset({"operator"})


@dataclass(frozen=True)
class Credentials:
    digests: Mapping[str, bytes]  # role -> sha256(password)

    def check(self, user: str, password: str) -> str | None:
        """The role for a right user name and password, else None (constant time in
        the password; a role without a file never matches)."""
        given = hashlib.sha256(password.encode("utf-8", "surrogateescape")).digest()
        role = user if user in ROLES else None
        want = self.digests.get(role or "", b"\0" * 32)
        ok = hmac.compare_digest(given, want)
        return role if ok and role in self.digests else None

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(r for r in ROLES if r in self.digests)


def read_password_file(path: str, role: str) -> str:
    """The password in `path`: its one line without the line end; ConfigError (one
    line, exit 78) for a missing, unreadable, empty or multi-line file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"--{role}-password-file {path}: cannot read it ({e.__class__.__name__}: "
                          f"{getattr(e, 'strerror', None) or e})") from None
    if text.endswith("\r\n"):
        text = text[:-2]
    elif text.endswith("\n"):
        text = text[:-1]
    if not text:
        raise ConfigError(f"--{role}-password-file {path}: the file is empty")
    if "\n" in text or "\r" in text:
        raise ConfigError(f"--{role}-password-file {path}: the password must be on one line")
    return text


def load(files: Mapping[str, str | None]) -> Credentials:
    """Credentials from {role: password file or None}; at least one role needed."""
    digests = {role: hashlib.sha256(read_password_file(path, role).encode()).digest()
               for role, path in files.items() if path}
    if not digests:
        raise ConfigError("no password file given: the console needs --viewer-password-file "
                          "and/or --operator-password-file (there are no default credentials)")
    return Credentials(digests)
