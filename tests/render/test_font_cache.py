"""The fonts' coverage on disk (render/installed.py): a worker reads what the last scan
found instead of reading every font's cmap at each start (issue 27), and scans again
whenever anything the scan read may have changed."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from stagedoor.config import Settings
from stagedoor.render import fonts, installed

NOTO = Path("/usr/share/fonts/truetype/noto")
FONTS = ("NotoSansCherokee-Regular.ttf", "NotoSansThaana-Regular.ttf",
         "NotoSerifTibetan-Regular.ttf")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cache directory of this test's own; scan()'s per-process memo cleared."""
    monkeypatch.delenv("CACHE_DIRECTORY", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    installed.scan.cache_clear()
    installed.script_samples.cache_clear()
    yield tmp_path / "xdg" / "stagedoor"
    installed.scan.cache_clear()
    installed.script_samples.cache_clear()


def font_dir(tmp_path: Path, names: tuple[str, ...] = FONTS[:2]) -> Path:
    d = tmp_path / "fonts"
    d.mkdir(exist_ok=True)
    for name in names:
        (d / name).write_bytes((NOTO / name).read_bytes())  # copies: their stat is ours
    return d


def scan_again(d: Path) -> installed.Coverage:
    installed.scan.cache_clear()
    return installed.scan((str(d),))


def cache_file(cache: Path) -> Path:
    [path] = [p for p in cache.glob("fonts-*.json")]
    return path


def tamper(path: Path) -> None:
    """Rewrite the cached coverage so that a read of the cache is told from a scan: the
    Cherokee face is cached as covering one code point."""
    data = json.loads(path.read_text())
    data["value"]["faces"]["Cher"] = [[p, i, 1] for p, i, _ in data["value"]["faces"]["Cher"]]
    path.write_text(json.dumps(data))


def test_a_second_start_reads_the_cache(tmp_path: Path, cache: Path) -> None:
    d = font_dir(tmp_path)
    first = installed.scan((str(d),))
    assert first.faces["Cher"][0][0] == str(d / FONTS[0])
    assert scan_again(d) == first  # from the file, the same coverage
    tamper(cache_file(cache))
    assert scan_again(d).faces["Cher"][0][2] == 1  # read, not scanned


@pytest.mark.parametrize("change", ["touched", "added", "removed", "replaced"])
def test_a_changed_font_directory_is_scanned_again(tmp_path: Path, cache: Path,
                                                   change: str) -> None:
    d = font_dir(tmp_path)
    installed.scan((str(d),))
    tamper(cache_file(cache))
    if change == "touched":
        st = os.stat(d / FONTS[0])
        os.utime(d / FONTS[0], ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    elif change == "added":
        font_dir(tmp_path, FONTS[2:])
    elif change == "removed":
        (d / FONTS[1]).unlink()
    else:  # the same bytes under the same name and time: a new inode (a package upgrade)
        st = os.stat(d / FONTS[0])
        (d / "new").write_bytes((d / FONTS[0]).read_bytes())
        os.utime(d / "new", ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(d / "new", d / FONTS[0])
    cov = scan_again(d)
    assert cov.faces["Cher"][0][2] > 1, "the tampered cache was used"
    assert ("Tibt" in cov.faces) == (change == "added")
    assert ("Thaa" in cov.faces) == (change != "removed")


@pytest.mark.parametrize("damage", ["garbage", "truncated", "wrong shape", "foreign path"])
def test_a_damaged_cache_file_is_ignored_and_rewritten(tmp_path: Path, cache: Path,
                                                       damage: str) -> None:
    d = font_dir(tmp_path)
    good = installed.scan((str(d),))
    path = cache_file(cache)
    text = path.read_text()
    data = json.loads(text)
    if damage == "garbage":
        path.write_bytes(b"\x00\xff not json")
    elif damage == "truncated":
        path.write_text(text[: len(text) // 2])
    elif damage == "wrong shape":
        data["value"]["faces"]["Cher"] = [["x"]]
        path.write_text(json.dumps(data))
    else:  # a face outside the font directories is never handed to the renderer
        data["value"]["faces"]["Cher"] = [["/etc/passwd", 0, 99999]]
        path.write_text(json.dumps(data))
    assert scan_again(d) == good
    assert json.loads(path.read_text()) == json.loads(text)


def test_without_a_writable_cache_directory_it_scans(tmp_path: Path, cache: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    d = font_dir(tmp_path)
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    first = installed.scan((str(d),))
    assert scan_again(d) == first
    assert blocker.read_text() == ""


def test_systemd_cache_directory_comes_first(tmp_path: Path, cache: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    d = font_dir(tmp_path)
    monkeypatch.setenv("CACHE_DIRECTORY", str(tmp_path / "unit-cache"))
    installed.scan((str(d),))
    assert list((tmp_path / "unit-cache").glob("fonts-*.json"))
    assert not cache.exists()


def test_script_samples_are_kept_too(cache: Path) -> None:
    computed = installed.script_samples()
    assert (cache / "scripts.json").exists()
    installed.script_samples.cache_clear()
    assert installed.script_samples() == computed
    assert list(installed.script_samples()) == list(computed)  # the order of Unicode's


def test_old_cache_files_are_pruned(tmp_path: Path, cache: Path) -> None:
    cache.mkdir(parents=True)
    stale, recent = cache / "fonts-0000000000000000.json", cache / "fonts-1111.json"
    for p in (stale, recent):
        p.write_text("{}")
    old = os.stat(stale).st_mtime - installed.CACHE_PRUNE_AGE - 60
    os.utime(stale, (old, old))
    installed.scan((str(font_dir(tmp_path)),))
    assert not stale.exists() and recent.exists()


def test_what_harfbuzz_found_is_not_handed_to_the_fonttools_path(
        tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The library that read the cmaps is part of the key, asked at every lookup: a
    process without the extension (or a test forcing fontTools) scans for itself."""
    d = font_dir(tmp_path)
    installed.scan((str(d),))
    tamper(cache_file(cache))
    monkeypatch.setattr(installed, "_native", lambda: None)
    assert scan_again(d).faces["Cher"][0][2] > 1
    assert json.loads(cache_file(cache).read_text())["key"][1].startswith("fontTools ")


def test_the_plan_of_the_same_settings_is_made_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that starts its render process early makes the plan of its settings, and
    its start-up warnings need the same plan: fonts.use_settings makes it once (the font
    directories are read once), and anew for other font settings or after another plan
    was put in use."""
    made: list[object] = []
    real = fonts.plan_for

    def counting(settings: Settings) -> fonts.FontPlan:
        made.append(settings)
        return real(settings)

    monkeypatch.setattr(fonts, "plan_for", counting)
    before = fonts.current()
    try:
        s = Settings()
        first = fonts.use_settings(s)
        assert fonts.use_settings(Settings()) is first and fonts.current() is first
        assert len(made) == 1
        other = fonts.use_settings(Settings(render_font_discover=0))
        assert other is not first and len(made) == 2
        fonts.use(first)
        assert fonts.use_settings(s) is not first and len(made) == 3
    finally:
        fonts.use(before)
