"""Files the handlers write and delete: atomic writes, confinement, stale temporaries.

    write_atomic   an unnamed file (O_TMPFILE) + fsync + link it in + fsync(dir), or,
                   where the file system or /proc does not allow that, tmp + fsync +
                   rename + fsync(dir); a failure half way (ENOSPC, EROFS, a cancel)
                   leaves nothing behind: the unnamed file vanishes with its fd, the
                   tmp file is removed; the directory fsync can be shared by the
                   writers whose entries land together (durable.GroupSyncs)
    confined       the one check before any write or delete: the path, resolved, is the
                   expected file directly inside the tickets directory, resolved; the
                   order store's `rendered` field is data, not a path to trust
    sweep_stale    at worker start: temporaries of our own naming whose writer is gone

Temporary names are `.<name>.<pid>.<thread id>.tmp`, unique per writer, so a sweep can
tell ours from anyone else's and a live writer's from a dead one's.

Why O_TMPFILE: a named tmp file costs two operations under the directory's lock (the
create and the rename); the unnamed file costs one (the link), and with 8 render
threads writing into one directory that lock is where the kernel spent its time
(perf: rwsem_spin_on_owner under openat and rename); side by side against tmp + rename
(`python -m bench.measure_write`) it writes more files a second for less CPU a file
(docs/benchmarks.md, "Moved from comments").  The guarantee is the same: the bytes are
fsynced before the name exists, and the directory is fsynced after it does.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import threading
import time
from pathlib import Path

from ..errors import StagedoorError
from .durable import DirectorySync, GroupSyncs, fsync_dir

log = logging.getLogger("stagedoor.tickets.files")

_TMP = re.compile(r"\.(?P<name>order-[0-9]{1,19}\.pdf)\.(?P<pid>[0-9]{1,10})\.[0-9]{1,24}\.tmp",
                  re.ASCII)
STALE_AFTER = 86_400.0  # a tmp file this old is stale whoever wrote it (pid reuse)


class OutsideTicketsDir(StagedoorError, ValueError):
    """A path to write or delete is not where it must be; the message says which."""


def tmp_name(path: Path) -> Path:
    # Unique per call: two deliveries of one job may render at once in one process.
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def write_atomic(path: Path, data: bytes, *, make_dirs: bool = True,
                 syncs: GroupSyncs | None = None) -> None:
    """A reader sees the old file or the whole new one; nothing is left on failure.

    When it returns, the bytes were fsynced before the name was linked or renamed into
    the directory, and a directory fsync that began after that has completed (with
    `syncs`, one shared with the writers whose entries landed meanwhile: durable.py)."""
    sync = syncs.get(path.parent) if syncs is not None else None
    if (_native is not None and _TMPFILE[0] and (sync is None or sync.native)
            and _write_native(path, data, make_dirs, sync)):
        return
    if make_dirs:
        path.parent.mkdir(parents=True, exist_ok=True)
    if not _write_unnamed(path, data):
        _write_named(path, data)
    if sync is None:
        fsync_dir(path.parent)
    else:
        sync.sync_after_rename()


try:  # the same write in C, the GIL released once (tickets/_durable.pyx says why)
    from . import _durable as _native
except ImportError:  # not built (a source checkout without build_ext): the os.* path
    _native = None  # type: ignore[assignment]


def directory_missing(e: FileNotFoundError, directory: Path) -> bool:
    """The native write (_durable.write_linked, the render pool's sink) failed because
    `directory` is not there, not some other file: it names the directory it could not
    open (as text, or as bytes from the render process).  Then the writer makes the
    directory and tries once more: here, and in render_tickets (tickets.py)."""
    return e.filename in (os.fsdecode(os.fsencode(directory)), os.fsencode(directory))


def _write_native(path: Path, data: bytes, make_dirs: bool, sync: DirectorySync | None
                  ) -> bool:
    """write_atomic through _durable.write_linked: True when done (the directory fsync
    included, shared through `sync`, a native DirSync), False when this system cannot
    do the unnamed file (nothing written; the named path follows, from now on).  The
    directory is made only when it is missing: an mkdir per file was a system call and
    a caught exception for nothing."""
    assert _native is not None
    directory = os.fsencode(path.parent)
    for attempt in (1, 2):
        try:
            done = _native.write_linked(directory, os.fsencode(path.name), bytes(data),
                                        sync)  # type: ignore[arg-type]
        except FileNotFoundError as e:
            if attempt == 2 or not make_dirs or not directory_missing(e, path.parent):
                raise
            path.parent.mkdir(parents=True, exist_ok=True)
            continue
        if done == _native.NOT_HERE:
            _TMPFILE[0] = False
            return False
        return True
    raise AssertionError("unreachable")


# Errors of open(O_TMPFILE) or of the /proc link that mean "not here": the named path
# (_durable.pyx's sd_no_tmpfile is the same set).
_NO_TMPFILE = {errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT, errno.EXDEV,
               errno.EPERM}


def _write_unnamed(path: Path, data: bytes) -> bool:
    """Write data to an unnamed file in path's directory, fsync it, then give it the
    name (over an existing file through a tmp name and a rename).  False, with nothing
    written, where O_TMPFILE or linking through /proc/self/fd is not available."""
    if not _TMPFILE[0]:
        return False
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fd = os.open(".", os.O_WRONLY | os.O_TMPFILE | os.O_CLOEXEC, 0o644, dir_fd=dfd)
        except OSError as e:
            if e.errno in _NO_TMPFILE:
                _TMPFILE[0] = False
                return False
            raise
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
            proc = f"/proc/self/fd/{fd}"
            try:
                os.link(proc, path.name, dst_dir_fd=dfd, follow_symlinks=True)
            except FileExistsError:
                # The PDF is there already (a redelivery): a name of our own, then the
                # rename over it, as the named path does.
                tmp = tmp_name(path)
                os.link(proc, tmp.name, dst_dir_fd=dfd, follow_symlinks=True)
                try:
                    os.replace(tmp.name, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp.name, dir_fd=dfd)
                    raise
            except OSError as e:
                if e.errno not in _NO_TMPFILE:
                    raise
                _TMPFILE[0] = False  # no /proc here: written for nothing, once
                return False
        finally:
            os.close(fd)  # unlinked and never linked: the file is gone with its fd
    finally:
        os.close(dfd)
    return True


_TMPFILE = [hasattr(os, "O_TMPFILE")]  # off for good once the system said no


def unnamed_files() -> bool:
    """False once this system refused an unnamed file (O_TMPFILE or the /proc link):
    the writers that only do that (the native render pool) must not be used then."""
    return _TMPFILE[0]


def no_unnamed_files() -> None:
    _TMPFILE[0] = False


def _write_named(path: Path, data: bytes) -> None:
    """tmp + fsync + rename; the tmp file is removed on every failure path."""
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
