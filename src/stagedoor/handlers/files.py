"""Files the handlers write and delete: atomic writes, confinement, stale temporaries.

    write_atomic   tmp + fsync + rename + fsync(dir); the tmp file is removed on every
                   failure path (ENOSPC half way, EROFS, a cancel), so a full disk does
                   not fill up with partial files; the directory fsync can be shared
                   by the renames that land together (durable.GroupSyncs)
    confined       the one check before any write or delete: the path, resolved, is the
                   expected file directly inside the tickets directory, resolved; the
                   order store's `rendered` field is data, not a path to trust
    sweep_stale    at worker start: temporaries of our own naming whose writer is gone

Temporary names are `.<name>.<pid>.<thread id>.tmp`, unique per writer, so a sweep can
tell ours from anyone else's and a live writer's from a dead one's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from pathlib import Path

from .durable import GroupSyncs, fsync_dir

log = logging.getLogger("stagedoor.handlers.files")

_TMP = re.compile(r"\.(?P<name>order-[0-9]{1,19}\.pdf)\.(?P<pid>[0-9]{1,10})\.[0-9]{1,24}\.tmp",
                  re.ASCII)
STALE_AFTER = 86_400.0  # a tmp file this old is stale whoever wrote it (pid reuse)


class OutsideTicketsDir(ValueError):
    """A path to write or delete is not where it must be; the message says which."""


def tmp_name(path: Path) -> Path:
    # Unique per call: two deliveries of one job may render at once in one process.
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def write_atomic(path: Path, data: bytes, *, make_dirs: bool = True,
                 syncs: GroupSyncs | None = None) -> None:
    """A reader sees the old file or the whole new one; nothing is left on failure.

    When it returns, the bytes were fsynced before the rename and a directory fsync
    that began after the rename has completed (with `syncs`, one shared with the
    writers whose renames landed meanwhile: durable.py)."""
    if make_dirs:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        # ENOSPC half way, EROFS on the rename, a cancel: never leave the partial file.
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if syncs is None:
        fsync_dir(path.parent)
    else:
        syncs.get(path.parent).sync_after_rename()


def confined(tickets_dir: str | Path, path: str | Path, expected_name: str) -> Path:
    """`path` if it is <tickets_dir>/<expected_name> once both are resolved, else raise.

    The directory part is resolved (symlinks, `..`), the file itself is not followed:
    deleting a symlink named order-5.pdf removes the link, never what it points to."""
    base = Path(tickets_dir).resolve()
    p = Path(path)
    where = p.parent.resolve() if p.is_absolute() else (Path.cwd() / p).parent.resolve()
    if where != base and base not in where.parents:
        raise OutsideTicketsDir(f"path {str(path)!r} is outside the tickets directory {base}")
    if where != base or p.name != expected_name:
        raise OutsideTicketsDir(f"path {str(path)!r} is not {expected_name} in the tickets "
                                f"directory {base}")
    return base / p.name


def sweep_stale(tickets_dir: str | Path, *, now: float | None = None) -> int:
    """Remove our temporaries whose writing process is gone (or older than a day)."""
    base = Path(tickets_dir)
    try:
        names = os.listdir(base)
    except FileNotFoundError:
        return 0
    removed = 0
    now = time.time() if now is None else now
    for name in names:
        m = _TMP.fullmatch(name)
        if not m:
            continue
        path = base / name
        try:
            old = now - path.lstat().st_mtime > STALE_AFTER
        except FileNotFoundError:
            continue
        if not old and _alive(int(m["pid"])):
            continue
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed += 1
    if removed:
        log.warning("removed %d stale temporary files of dead writers from %s", removed, base)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return pid <= 2**22  # PermissionError: it exists; OverflowError: it cannot
    return True
