"""The durable write on its own: the unnamed file against tmp + rename.

    python -m bench.measure_write [--n 2000] [--rounds 6] [--threads 8] [--size 20000]

Two contenders, both stagedoor.tickets.files.write_atomic with its own directory fsync
per file, into a fresh directory on the real disk (SD_BENCH_DISK_DIR, else the system
temp dir), from `--threads` threads, interleaved (A B, then B A, ...):

  unnamed   O_TMPFILE + write + fsync + link into the directory (the default)
  named     tmp file + write + fsync + rename (the fallback where O_TMPFILE or /proc
            is not available), forced by switching the unnamed path off

Prints files/s and process CPU per file (user + system, all threads) per round, then
the medians and the ratio unnamed / named.  The kernel's directory lock is the point
(tickets/files.py says why): each named write takes it twice, each unnamed one once.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from stagedoor.tickets import files


def one_round(mode: str, n: int, threads: int, data: bytes) -> tuple[float, float]:
    """(files/s, CPU us per file) for n durable writes in a fresh directory."""
    root = os.environ.get("SD_BENCH_DISK_DIR") or None
    d = Path(tempfile.mkdtemp(prefix="sd-write-", dir=root))
    saved = files._TMPFILE[0]
    files._TMPFILE[0] = mode == "unnamed" and saved
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda i: files.write_atomic(d / f"order-{i}.pdf", data,
                                                       make_dirs=False), range(n)))
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        files._TMPFILE[0] = saved
        shutil.rmtree(d, ignore_errors=True)
    return n / seconds, cpu / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--size", type=int, default=20_000, help="bytes per file")
    a = ap.parse_args()
    data = os.urandom(a.size)
    got: dict[str, list[tuple[float, float]]] = {"unnamed": [], "named": []}
    for k in range(a.rounds):
        for mode in (("unnamed", "named") if k % 2 == 0 else ("named", "unnamed")):
            rate, cpu = one_round(mode, a.n, a.threads, data)
            got[mode].append((rate, cpu))
            print(f"round {k + 1}/{a.rounds} {mode:8s} {rate:8,.0f} files/s "
                  f"{cpu:7,.0f} us CPU/file", flush=True)
    med = {m: (statistics.median(r for r, _ in v), statistics.median(c for _, c in v))
           for m, v in got.items()}
    for m, (rate, cpu) in med.items():
        print(f"median {m:8s} {rate:8,.0f} files/s {cpu:7,.0f} us CPU/file")
    print(f"unnamed / named: {med['unnamed'][0] / med['named'][0]:.2f}x the files/s, "
          f"{med['unnamed'][1] / med['named'][1]:.2f}x the CPU per file")


if __name__ == "__main__":
    main()
