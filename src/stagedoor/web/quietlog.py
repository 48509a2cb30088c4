"""Log lines that repeat, at most one a minute each: an outage is a few lines, not one
per second (the sampler's tick) or per request.

`warning(key, ...)` logs the first line of its key at once, then counts the ones that
follow for `every` seconds; the next line logged says how many were left out.
`recovered(key, ...)` logs one line when a key that was failing stops (and how many
were left out since the last line).  The state is a few counters per key in memory.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass


@dataclass
class _Seen:
    last: float  # monotonic time of the last line logged
    left_out: int = 0


class QuietLog:
    def __init__(self, log: logging.Logger, every: float = 60.0) -> None:
        self.log = log
        self.every = every
        self._seen: dict[str, _Seen] = {}

    def warning(self, key: str, message: str, *args: object) -> None:
        now = time.monotonic()
        seen = self._seen.get(key)
        if seen is not None and now - seen.last < self.every:
            seen.left_out += 1
            return
        more = (f" ({seen.left_out} more like it in the last {now - seen.last:.0f} s "
                "not logged)") if seen is not None and seen.left_out else ""
        self.log.warning(message + "%s", *args, more)
        self._seen[key] = _Seen(last=now)

    def recovered(self, key: str, message: str, *args: object) -> None:
        seen = self._seen.pop(key, None)
        if seen is None:
            return
        more = f" ({seen.left_out} failures not logged since the last line)" \
            if seen.left_out else ""
        self.log.warning(message + "%s", *args, more)
