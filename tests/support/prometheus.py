"""Prometheus text as the tests read it: parsed by prometheus_client's own parser (what
a Prometheus server accepts), so a malformed exposition fails the test that reads it."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Labels = tuple[tuple[str, str], ...]


def samples(text: bytes | str) -> dict[tuple[str, Labels], float]:
    """Every sample: (name, its labels sorted) -> value."""
    if isinstance(text, bytes):
        text = text.decode()
    out: dict[tuple[str, Labels], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def first(text: bytes | str, name: str) -> float | None:
    """The first sample of that name, whatever its labels; None if there is none."""
    return next((v for (n, _labels), v in samples(text).items() if n == name), None)


def scrape(port: int, timeout: float = 5) -> str:
    """GET /metrics of the listener on this loopback port."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as resp:
        return str(resp.read().decode())
