"""How fast can one guess the console's passwords: `python -m bench.measure_login_throttle`.

A real `stagedoor web` (bench/measure_console.console) against a redis-server of its
own; 50 clients in parallel, each posting wrong passwords as fast as the console
answers, for --seconds (default 30), twice:

  login_guesses_per_s_one_source    all 50 from 127.0.0.1 (one attacker's host)
  login_guesses_per_s_50_sources    each from its own address, 127.0.0.2 .. 127.0.0.51
                                    (a botnet: the console's global budget is what holds)

A guess counts when the console checked the password (401: wrong user name or
password); a 429 (throttled: the password not looked at) is not a guess.  Target < 5
a second for both (docs/benchmarks.md); before the throttle, 491-727 a second.
"""

from __future__ import annotations

import argparse
import http.client
import sys
import threading
import time
from urllib.parse import urlsplit

from . import measure_common as mc
from .measure_console import console

CLIENTS = 50


def _token(base: str) -> str:
    u = urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname or "", u.port or 80, timeout=30)
    try:
        conn.request("GET", "/login")
        r = conn.getresponse()
        r.read()
        cookie = next(v for k, v in r.getheaders() if k.lower() == "set-cookie"
                      and v.startswith("sd_login="))
        return cookie.split(";")[0].split("=", 1)[1]
    finally:
        conn.close()


def _guesser(base: str, token: str, source: str, stop: threading.Event,
             counts: dict[int, int], lock: threading.Lock) -> None:
    u = urlsplit(base)
    body = f"csrf={token}&username=operator&password=wrong-guess"
    headers = {"Cookie": f"sd_login={token}",
               "Content-Type": "application/x-www-form-urlencoded"}
    conn = http.client.HTTPConnection(u.hostname or "", u.port or 80, timeout=30,
                                      source_address=(source, 0))
    try:
        while not stop.is_set():
            conn.request("POST", "/login", body, headers)
            r = conn.getresponse()
            r.read()
            with lock:
                counts[r.status] = counts.get(r.status, 0) + 1
    finally:
        conn.close()


def guesses_per_second(base: str, sources: list[str], seconds: float) -> tuple[float, dict]:
    token = _token(base)
    stop, lock = threading.Event(), threading.Lock()
    counts: dict[int, int] = {}
    threads = [threading.Thread(target=_guesser, args=(base, token, sources[i % len(sources)],
                                                       stop, counts, lock), daemon=True)
               for i in range(CLIENTS)]
    started = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(35)
    elapsed = time.monotonic() - started
    return counts.get(401, 0) / elapsed, counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    args = ap.parse_args(argv)
    with mc.redis_server() as server:
        for name, sources in (("one_source", ["127.0.0.1"]),
                              ("50_sources", [f"127.0.0.{2 + i}" for i in range(CLIENTS)])):
            with console(server.url) as base:  # a fresh console: full buckets
                rate, counts = guesses_per_second(base, sources, args.seconds)
            shown = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
            print(f"login_guesses_per_s_{name} {rate:.2f}  ({args.seconds:g} s, "
                  f"{CLIENTS} clients; responses {shown}; target < 5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
