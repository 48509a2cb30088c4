"""tickets/durable.py through files.write_atomic: tmp + fsync + rename + a directory
fsync shared by the renames that land together (real threads, a real directory).

Every test runs twice: with the C write and group commit (tickets/_durable.pyx, what
the worker uses) and with the os.* path and durable.GroupSync (the fallback when the
extension is not built)."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from stagedoor.tickets import files
from stagedoor.tickets.durable import GroupSync, GroupSyncs
from stagedoor.tickets.files import write_atomic


@pytest.fixture(params=["native", "python"])
def writer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "native":
        built = getattr(files, "_native", None) is not None
        assert built, "stagedoor.tickets._durable is not built"
    else:
        monkeypatch.setattr(files, "_native", None)
    yield request.param


def _syncs(writer: str) -> GroupSyncs:
    syncs = GroupSyncs(native=writer == "native")
    made = syncs.get(Path("/"))
    assert isinstance(made, GroupSync) == (writer == "python")
    return syncs


def test_threads_share_directory_fsyncs_and_every_file_is_whole(tmp_path: Path,
                                                                writer: str) -> None:
    syncs = _syncs(writer)
    n, threads = 96, 8

    def write(k: int) -> None:
        for i in range(k, n, threads):
            write_atomic(tmp_path / f"order-{i}.pdf", b"%PDF" + bytes([i]) * 5000,
                         syncs=syncs)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(write, range(threads)))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"order-{i}.pdf"
                                                                for i in range(n))
    for i in range(n):
        assert (tmp_path / f"order-{i}.pdf").read_bytes() == b"%PDF" + bytes([i]) * 5000
    fsyncs = syncs.get(tmp_path).fsyncs
    assert 1 <= fsyncs <= n


def test_one_writer_alone_pays_one_directory_fsync_per_file(tmp_path: Path,
                                                            writer: str) -> None:
    syncs = _syncs(writer)
    for i in range(5):
        write_atomic(tmp_path / f"order-{i}.pdf", b"x", syncs=syncs)
    assert syncs.get(tmp_path).fsyncs == 5


def test_write_atomic_replaces_an_existing_pdf_and_leaves_nothing_behind(
        tmp_path: Path, writer: str) -> None:
    """The unnamed-file path over an existing PDF (a redelivery): a name of our own,
    then the rename over it; and the named path (tmp + rename) where O_TMPFILE is not
    available, forced here.  Both leave exactly the PDF, with the new bytes."""
    pdf = tmp_path / "order-1.pdf"
    write_atomic(pdf, b"%PDF first")
    write_atomic(pdf, b"%PDF second")
    assert pdf.read_bytes() == b"%PDF second"
    assert [p.name for p in tmp_path.iterdir()] == ["order-1.pdf"]
    saved = files._TMPFILE[0]
    files._TMPFILE[0] = False
    try:
        write_atomic(pdf, b"%PDF third")
        write_atomic(tmp_path / "order-2.pdf", b"%PDF new")
    finally:
        files._TMPFILE[0] = saved
    assert pdf.read_bytes() == b"%PDF third"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["order-1.pdf", "order-2.pdf"]
    assert oct((tmp_path / "order-2.pdf").stat().st_mode & 0o777) == oct(0o644 & ~_umask())


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_missing_directory_is_made_and_errors_name_the_path(tmp_path: Path,
                                                              writer: str) -> None:
    """The tickets directory is made when missing (not with an mkdir per file), and a
    failure is an OSError with its errno and the path, leaving nothing behind."""
    syncs = _syncs(writer)
    deep = tmp_path / "a" / "b"
    write_atomic(deep / "order-1.pdf", b"%PDF", syncs=syncs)
    assert (deep / "order-1.pdf").read_bytes() == b"%PDF"
    with pytest.raises(FileNotFoundError) as e:
        write_atomic(tmp_path / "none" / "order-2.pdf", b"%PDF", make_dirs=False)
    assert e.value.errno == errno.ENOENT and "none" in str(e.value.filename)
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(OSError):  # ENOTDIR (C) or EEXIST (mkdir, the os.* path)
        write_atomic(tmp_path / "file" / "order-3.pdf", b"%PDF", syncs=syncs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "file"]
    assert os.listdir(deep) == ["order-1.pdf"]
