"""The doctor's checks of this host (no Redis): the native renderer and the libraries it
loaded, libthai's dictionary, ICU's Lao, Myanmar and Khmer dictionaries, the fonts and
the scripts they cover, the tickets directory, the installed systemd units, the metrics
port."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import socket
import urllib.request
from pathlib import Path

from ... import thai_dictionary
from ...config import ConfigError, Settings
from ...exitcodes import CHECK_CRITICAL, CHECK_OK, CHECK_UNKNOWN, CHECK_WARNING
from .. import sandbox
from . import Finding
from .emoji import emoji_check

BUILD_FROM_SOURCE = ("install the manylinux wheel, which carries its libraries (README "
                     "Install), or build from source: pip install . with a C compiler, "
                     "pkg-config, zlib1g-dev libdeflate-dev libharfbuzz-dev libfribidi-dev "
                     "libunibreak-dev libthai-dev libicu-dev")
FONT_PACKAGES = "apt-get install fonts-noto-core fonts-noto-cjk fonts-symbola"
# the libraries the renderer links, as they appear in /proc/self/maps
NATIVE_LIBS = ("harfbuzz", "fribidi", "unibreak", "thai", "icuuc", "icudata", "deflate", "z")
MIN_FREE, LOW_FREE = 100 << 20, 1 << 30     # bytes: CRITICAL below, WARNING below


def loaded_libraries(maps: str | None = None) -> dict[str, str]:
    """lib name (NATIVE_LIBS) -> the file this process mapped it from."""
    if maps is None:
        maps = Path("/proc/self/maps").read_text()
    paths = {line.split(None, 5)[5] for line in maps.splitlines()
             if len(line.split(None, 5)) == 6 and ".so" in line}
    found = {}
    for name in NATIVE_LIBS:
        pattern = re.compile(rf"/lib{name}(-[0-9a-f]{{8}})?\.so[.0-9]*$")
        for p in sorted(paths):
            if pattern.search(p):
                found[name] = p
    return found


def native() -> list[Finding]:
    # here: the check is whether the extension loads (~60 ms with the fonts' modules)
    from ...render import native_import_error

    why = native_import_error()
    if why is not None:
        return [Finding("native renderer", CHECK_CRITICAL, why.split("; using the")[0],
                        BUILD_FROM_SOURCE)]
    out = []
    import stagedoor._render as ext  # it loads: native_import_error() said so

    libs = loaded_libraries()
    where = ", ".join(
        f"{os.path.basename(p)} ({'the wheel' if 'stagedoor.libs' in p else os.path.dirname(p)})"
        for p in libs.values())
    missing = [n for n in NATIVE_LIBS if n not in libs]
    out.append(Finding("native renderer", CHECK_WARNING if missing else CHECK_OK,
                       f"{ext.__file__}; loaded {where}"
                       + (f"; not seen in /proc/self/maps: {', '.join(missing)}" if missing
                          else ""),
                       "rebuild or reinstall the wheel" if missing else ""))
    try:  # the worker requires it (worker/entries.py: a worker without it exits 78)
        __import__("stagedoor.worker._entries")
    except ImportError as e:
        out.append(Finding("stagedoor.worker._entries", CHECK_CRITICAL,
                           f"not importable ({e}): no worker can start", BUILD_FROM_SOURCE))
    try:
        __import__("stagedoor.tickets._durable")
    except ImportError as e:
        out.append(Finding("stagedoor.tickets._durable", CHECK_WARNING,
                           f"not importable ({e}): the render pool's durable write runs in "
                           "Python, slower", BUILD_FROM_SOURCE))
    return out


def thai() -> Finding:
    path, source = thai_dictionary.location()
    if path is None:
        return Finding("Thai dictionary", CHECK_WARNING, "libthai finds no thbrk.tri: "
                       "Thai fields too long for a line wrap mid-word",
                       "apt-get install libthai-data (or set LIBTHAI_DICTDIR)")
    return Finding("Thai dictionary", CHECK_OK, f"{path} ({source})")


# a sample of each script and where ICU's dictionaries break it (a line may break there)
DICTIONARY_SAMPLES = (("Lao", "ວຽງຈັນສູນວັດທະນະທຳ", [6, 9]),
                      ("Myanmar", "ရန်ကုန်မြို့တော်", [3, 7]),
                      ("Khmer", "ភ្នំពេញរោងមហោស្រព", [7]))


def icu_dictionaries() -> Finding | None:
    """Whether the renderer's ICU breaks Lao, Myanmar and Khmer words (its dictionaries
    are in libicudata; a trimmed ICU data build can lack them); None without the native
    renderer (native() reports that)."""
    try:  # optional: the native extension
        import stagedoor._render as ext
    except ImportError:
        return None
    lacking = [name for name, text, want in DICTIONARY_SAMPLES
               if not set(want) <= set(ext.dictionary_breaks(text))]
    if lacking:
        return Finding("word-break dictionaries", CHECK_WARNING,
                       f"ICU finds no word boundary in {', '.join(lacking)}: fields too long "
                       "for a line wrap mid-word", "install Debian's libicu72 (full ICU data)")
    return Finding("word-break dictionaries", CHECK_OK,
                   "ICU breaks Lao, Myanmar and Khmer words; libthai Thai")


LIST_MAX = 12  # scripts named in one finding; the rest counted ("and 140 more")


def _some(items: list[str]) -> str:
    shown = ", ".join(items[:LIST_MAX])
    return shown + (f" and {len(items) - LIST_MAX} more" if len(items) > LIST_MAX else "")


def font_dirs(settings: Settings) -> Finding | None:
    """The font directories: one that is not there is named (the coverage line alone
    would only list every script as lacking); None when they all exist."""
    dirs = list(settings.render_font_dirs)
    gone = [d for d in dirs if not os.path.isdir(d)]
    if not gone:
        return None
    state = CHECK_CRITICAL if len(gone) == len(dirs) else CHECK_WARNING
    return Finding("font directories", state, "not a directory: " + ", ".join(gone)
                   + ("" if state == CHECK_CRITICAL else
                      f" (the other {len(dirs) - len(gone)} are searched)"),
                   f"fix --render-font-dirs (STAGEDOOR_RENDER_FONT_DIRS), or {FONT_PACKAGES}")


def fonts_check(settings: Settings) -> list[Finding]:
    dirs = font_dirs(settings)
    return ([dirs] if dirs else []) + [_fonts(settings)]


def _fonts(settings: Settings) -> Finding:
    # here: the renderer's modules only when the fonts are checked (native() says why)
    from ...render import fonts, native_available

    try:
        plan = fonts.plan_for(settings)
    except ConfigError as e:
        return Finding("fonts", CHECK_CRITICAL, str(e), "fix --render-fonts / --render-han-fonts")
    if not native_available():
        lost = sorted({s for scripts in plan.missing.values() for s in scripts})
        return Finding("fonts", CHECK_UNKNOWN if not lost else CHECK_WARNING,
                       f"{len(plan.faces)} font files found"
                       + (f"; missing for {', '.join(lost)}" if lost else "")
                       + "; coverage needs the native renderer", FONT_PACKAGES)
    fonts.use(plan)
    rows = fonts.coverage(plan)
    lacking = [(tag, miss) for tag, _font, miss in rows if miss]
    covered = [f"{tag}" for tag, _font, miss in rows if not miss]
    files = len({p for p, _i, _b in plan.faces})
    if not lacking:
        return Finding("fonts", CHECK_OK, f"{files} font files draw all {len(rows)} sample "
                       f"scripts ({' '.join(covered)})")
    # As --check-fonts: a script the settings name, Han or emoji without a glyph is a
    # problem; one that no installed font has at all (Unicode's newest and historic
    # scripts) is listed, not warned of: it cannot be fixed by a package.
    needed = fonts.required(plan)
    if not any(tag in needed or tag == "Latn" for tag, _ in lacking):
        return Finding("fonts", CHECK_OK, f"{files} font files draw {len(covered)} of "
                       f"{len(rows)} scripts; no installed font has "
                       + " ".join(tag for tag, _ in lacking))
    state = CHECK_CRITICAL if any(tag == "Latn" for tag, _ in lacking) else CHECK_WARNING
    return Finding("fonts", state, f"{files} font files; no glyph for "
                   + _some([f"{tag} ({miss})" for tag, miss in lacking])
                   + f"; covered: {_some(covered) or 'nothing'}",
                   f"{FONT_PACKAGES}, or name fonts that have them (--render-fonts, "
                   "--render-font-dirs; `stagedoor render --check-fonts`)")


def _probe(directory: Path) -> tuple[bool, str]:
    """Write as the worker does (tickets/files.py): an unnamed file (O_TMPFILE) linked in
    through /proc/self/fd, else a named tmp file in the same directory; (the unnamed
    file worked, how the file got its name).  OSError when nothing can be written."""
    name = f".doctor-probe.{os.getpid()}.tmp"
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    fd = -1
    try:
        try:
            fd = os.open(".", os.O_WRONLY | os.O_TMPFILE | os.O_CLOEXEC, 0o640, dir_fd=dfd)
            os.write(fd, b"probe")
            os.fsync(fd)
            # linkat(AT_SYMLINK_FOLLOW) through /proc: only with a directory fd does
            # Python call linkat; the unnamed file must be on the directory's mount
            os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=dfd, follow_symlinks=True)
            how = "O_TMPFILE + link"
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT,
                               errno.EXDEV, errno.EPERM):
                raise
            if fd >= 0:
                os.close(fd)
                fd = -1
            # the worker's fallback: a named tmp renamed into place in the same directory
            wfd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640, dir_fd=dfd)
            os.close(wfd)
            how = "tmp + rename"
        same = os.stat(name, dir_fd=dfd).st_dev == os.fstat(dfd).st_dev
        return fd >= 0, how + ("" if same else " (the name landed on another file system)")
    finally:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dfd)
        os.close(dfd)


def tickets_dir(settings: Settings) -> list[Finding]:
    d = Path(settings.tickets_dir).absolute()
    name = "tickets directory"
    if not d.exists():
        parent = next(p for p in d.parents if p.exists())
        if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            return [Finding(name, CHECK_CRITICAL, f"{d} does not exist and {parent} is not "
                            f"a directory writable by uid {os.getuid()}",
                            f"mkdir -p {d} && chown <worker user> {d}, or --tickets-dir")]
        if parent != d.parent:
            # more than the last component missing: a typo, or a volume not mounted;
            # the worker would make the whole path on the disk under it
            return [Finding(name, CHECK_WARNING, f"{d} does not exist, nor does its parent "
                            f"{d.parent}: the nearest that does is {parent}",
                            f"check --tickets-dir (a typo? a volume not mounted?), then "
                            f"mkdir -p {d} && chown <worker user> {d}")]
        return [Finding(name, CHECK_OK, f"{d} does not exist yet; the worker makes it "
                        f"({parent} is writable)")]
    if not d.is_dir():
        return [Finding(name, CHECK_CRITICAL, f"{d} is not a directory", "--tickets-dir")]
    try:
        tmpfile, how = _probe(d)
    except OSError as e:
        return [Finding(name, CHECK_CRITICAL, f"{d} is not writable by uid {os.getuid()}: "
                        f"{e.strerror}",
                        f"chown <worker user> {d} (and mount it read-write), or --tickets-dir")]
    out = [Finding(name, CHECK_OK if tmpfile else CHECK_WARNING,
                   f"{d}: writable, atomic writes by {how}",
                   "" if tmpfile else "the file system has no O_TMPFILE: writes take the "
                   "slower tmp + rename path (ext4, xfs, btrfs, tmpfs have it)")]
    usage = shutil.disk_usage(d)
    free = f"{usage.free / (1 << 30):.1f} GiB free of {usage.total / (1 << 30):.1f} GiB"
    st = os.statvfs(d)
    inodes = st.f_favail if st.f_files else None
    if usage.free < MIN_FREE or (inodes is not None and inodes < 1000):
        out.append(Finding("tickets free space", CHECK_CRITICAL, f"{free}, {inodes} inodes",
                           "free space on it: the worker's writes fail with ENOSPC"))
    elif usage.free < LOW_FREE or usage.free < usage.total * 0.05:
        out.append(Finding("tickets free space", CHECK_WARNING, free,
                           "free space on it before it fills (a ticket PDF is ~20 KB)"))
    else:
        out.append(Finding("tickets free space", CHECK_OK, free))
    return out


def _unit_values(text: str, key: str) -> list[str]:
    return [line.split("=", 1)[1].strip() for line in text.splitlines()
            if line.startswith(key + "=")]


def systemd_units(unit_dir: str) -> list[Finding]:
    out = []
    for unit in ("stagedoor.service", "stagedoor@.service"):
        path = Path(unit_dir) / unit
        if not path.exists():
            continue
        text = path.read_text()
        bad = []
        prog = ""
        for exe in _unit_values(text, "ExecStart"):
            prog = exe.lstrip("@-:+!").split()[0] if exe else ""
            if prog and not os.access(prog, os.X_OK):
                bad.append(f"ExecStart={prog} is not an executable")
        # the sandbox (ProtectHome=, PrivateTmp=) hiding the installation from the service
        bad += sandbox.hidden_paths(text, prog or None)
        for doc in _unit_values(text, "Documentation"):
            if doc.startswith("file://") and not os.path.exists(doc[len("file://"):]):
                bad.append(f"Documentation={doc} does not exist")
        for cred in _unit_values(text, "LoadCredential"):
            _, _, src = cred.partition(":")
            if src.startswith("/") and not os.path.exists(src):
                bad.append(f"LoadCredential= source {src} does not exist")
        if bad:
            out.append(Finding(f"systemd {unit}", CHECK_CRITICAL, f"{path}: {'; '.join(bad)}",
                               "stagedoor systemd install (from the installation that should "
                               "run), then systemctl daemon-reload"))
        else:
            out.append(Finding(f"systemd {unit}", CHECK_OK, f"{path}: its paths exist"))
    if not out:
        out.append(Finding("systemd units", CHECK_OK, f"none installed in {unit_dir} "
                           "(stagedoor systemd install)"))
    return out


def metrics_port(settings: Settings) -> Finding:
    port = settings.metrics_port
    if not port:
        return Finding("metrics port", CHECK_OK, "off (--metrics-port 0)")
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return Finding("metrics port", CHECK_OK, f"127.0.0.1:{port} is free for the "
                           "supervisor's exporter")
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                return Finding("metrics port", CHECK_UNKNOWN, f"{port}: {e.strerror}")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            ours = b"stagedoor_" in r.read(1 << 20)
    except (OSError, ValueError):
        ours = False
    if ours:
        return Finding("metrics port", CHECK_OK, f"127.0.0.1:{port} is served by a running "
                       "stagedoor exporter")
    return Finding("metrics port", CHECK_WARNING, f"127.0.0.1:{port} is taken by another "
                   "program: the supervisor could not serve metrics there",
                   "pick another --metrics-port, or stop what holds it (ss -ltnp)")


def checks(settings: Settings, unit_dir: str) -> list[Finding]:
    icu = icu_dictionaries()
    return [*native(), thai(), *([icu] if icu else []), *fonts_check(settings),
            emoji_check(settings), *tickets_dir(settings), *systemd_units(unit_dir),
            metrics_port(settings)]
