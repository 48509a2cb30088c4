"""The worker's hot path in C (worker/_entries.pyx), which the worker requires.

`fast_job(fields, kind_names, max)` the common entry -> Job, `FastDispatch` a reply's
first deliveries run, `tally` settle.py's arithmetic, `pack_xack` the XACK as RESP,
and the read-ahead's `Streak` and `ReplyWait`.  There is no Python fallback (as
asyncpg has none for its protocol): a checkout whose extensions were never built
fails here with NativeMissing, which the worker turns into a one-line error and exit
code 78 (EX_CONFIG: a restart cannot fix it; worker/child.py, cli/commands/work.py).
`stagedoor doctor` reports it too.
"""

from __future__ import annotations

from ..errors import StagedoorError


class NativeMissing(StagedoorError, ImportError):
    """stagedoor.worker._entries cannot be imported: the extensions were not built."""


try:
    from ._entries import FastDispatch, ReplyWait, Streak, fast_job, pack_xack, tally
except ImportError as e:  # pragma: no cover - a checkout whose extensions were not built
    raise NativeMissing(
        f"the worker's extension stagedoor.worker._entries is not importable ({e}); "
        "build it with `pip install .` or `python setup.py build_ext --inplace`") from e

__all__ = ["FastDispatch", "NativeMissing", "ReplyWait", "Streak", "fast_job", "pack_xack",
           "tally"]
