"""The console's credentials: one password file per role.

A password file holds the password on its one line, as systemd's LoadCredential= hands
it over (`%d/viewer-password`); a trailing newline is not part of it.  The user name
asked at log-in is the role's name.  There are no default credentials: a role without
a password file cannot log in, and without any file the console does not start.

Passwords are compared as SHA-256 digests with hmac.compare_digest, so the time a
comparison takes says nothing about the password (nor about its length).

A file is refused (exit 78 at start) when its password is shorter than MIN_LENGTH
characters, or when others may read or write it, or its group write it (mode o+r,
o+w, g+w): a password anyone on the host can read or replace protects nothing.
systemd's LoadCredential= hands over files only the service can read.

The files are looked at again (a stat) at each log-in and each request of a session:
a changed password ends the sessions of its role (Session.stamp), and a file that
became bad takes the role's log-in away until it is fixed.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass

from ..config import ConfigError

log = logging.getLogger("stagedoor.web")
ROLES = ("viewer", "operator")
# what each role may do: the operator acts, the viewer only looks
ACTS = frozenset({"operator"})
MIN_LENGTH = 12
LOOSE_MODE = stat.S_IROTH | stat.S_IWOTH | stat.S_IWGRP
RECHECK_SECONDS = 1.0  # a file is stat'ed at most this often


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


def file_signature(path: str) -> tuple[int, ...] | None:
    """What changes when the file is replaced or rewritten (None: cannot stat it)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


def read_password_file(path: str, role: str) -> str:
    """The password in `path`: its one line without the line end; ConfigError (one
    line, exit 78) for a missing, unreadable, empty, multi-line, short or loosely
    permitted file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            mode = os.fstat(fd).st_mode
            with os.fdopen(fd, "rb", closefd=False) as f:
                data = f.read(64 * 1024)
        finally:
            os.close(fd)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"--{role}-password-file {path}: cannot read it ({e.__class__.__name__}: "
                          f"{getattr(e, 'strerror', None) or e})") from None
    if mode & LOOSE_MODE:
        raise ConfigError(f"--{role}-password-file {path}: mode {stat.S_IMODE(mode):04o} lets "
                          "others read or change it: chmod 600 (or 640) it")
    if text.endswith("\r\n"):
        text = text[:-2]
    elif text.endswith("\n"):
        text = text[:-1]
    if not text:
        raise ConfigError(f"--{role}-password-file {path}: the file is empty")
    if "\n" in text or "\r" in text:
        raise ConfigError(f"--{role}-password-file {path}: the password must be on one line")
    if len(text) < MIN_LENGTH:
        raise ConfigError(f"--{role}-password-file {path}: the password has {len(text)} "
                          f"characters, fewer than {MIN_LENGTH}")
    return text


def _digest(password: str) -> bytes:
    return hashlib.sha256(password.encode("utf-8", "surrogateescape")).digest()


def load(files: Mapping[str, str | None]) -> Credentials:
    """Credentials from {role: password file or None}; at least one role needed."""
    digests = {role: _digest(read_password_file(path, role))
               for role, path in files.items() if path}
    if not digests:
        raise ConfigError("no password file given: the console needs --viewer-password-file "
                          "and/or --operator-password-file (there are no default credentials)")
    return Credentials(digests)


class PasswordFiles:
    """The roles' password files, read again when they change (see the module
    docstring): `current()` is the Credentials of now, `stamp(role)` what a session of
    the role must carry to stay valid (a MAC of the role's digest under a key of this
    process; b"" for a role that cannot log in)."""

    def __init__(self, files: Mapping[str, str | None]) -> None:
        self.files = {role: path for role, path in files.items() if path}
        self._creds = load(files)  # ConfigError at start: the console does not start
        self._sigs = {role: file_signature(path) for role, path in self.files.items()}
        self._checked = time.monotonic()
        self._key = os.urandom(32)

    def current(self) -> Credentials:
        now = time.monotonic()
        if now - self._checked >= RECHECK_SECONDS:
            self._checked = now
            self._reload()
        return self._creds

    def stamp(self, role: str) -> bytes:
        digest = self.current().digests.get(role)
        if digest is None:
            return b""
        return hmac.new(self._key, digest, "sha256").digest()

    def _reload(self) -> None:
        digests = dict(self._creds.digests)
        for role, path in self.files.items():
            sig = file_signature(path)
            if sig == self._sigs.get(role):
                continue
            self._sigs[role] = sig
            try:
                digests[role] = _digest(read_password_file(path, role))
                log.warning("the %s password file changed: the %s sessions are logged out",
                            role, role)
            except ConfigError as e:
                digests.pop(role, None)
                log.error("%s: %s cannot log in until the file is fixed", e, role)
        self._creds = Credentials(digests)
