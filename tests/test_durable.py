"""handlers/durable.py through files.write_atomic: tmp + fsync + rename + a directory
fsync shared by the renames that land together (real threads, a real directory)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from stagedoor.handlers.durable import GroupSyncs
from stagedoor.handlers.files import write_atomic


def test_threads_share_directory_fsyncs_and_every_file_is_whole(tmp_path: Path) -> None:
    syncs = GroupSyncs()
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


def test_one_writer_alone_pays_one_directory_fsync_per_file(tmp_path: Path) -> None:
    syncs = GroupSyncs()
    for i in range(5):
        write_atomic(tmp_path / f"order-{i}.pdf", b"x", syncs=syncs)
    assert syncs.get(tmp_path).fsyncs == 5


def test_write_atomic_replaces_an_existing_pdf_and_leaves_nothing_behind(
        tmp_path: Path) -> None:
    """The unnamed-file path over an existing PDF (a redelivery): a name of our own,
    then the rename over it; and the named path (tmp + rename) where O_TMPFILE is not
    available, forced here.  Both leave exactly the PDF, with the new bytes."""
    from stagedoor.handlers import files

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
