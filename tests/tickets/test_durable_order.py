"""An acked render_tickets job's PDF is durable: file fsync -> name -> directory fsync -> XACK.

The worker runs as a real process under strace (-f: every thread; -y: the path of
each fd), draining render_tickets jobs with the seed's 8 in flight, so the directory
fsyncs are shared between renames (the group commit of tickets/durable.py).  From
the system calls themselves, for every job:

  1. the fsync of its file completed before the file got its name: the link of the
     unnamed (O_TMPFILE) file, or the rename of the tmp file where that is not
     available (tickets/files.py);
  2. a directory fsync that began after that link or rename completed, completed before
  3. the write that carried the job's entry id in an XACK began.

Nothing is mocked: the file system, the threads and Redis are real; strace only
records the order in which the kernel saw the calls.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import redis

from stagedoor.config import Settings
from stagedoor.demo.orders import demo_order
from stagedoor.tickets.orders import put_orders_sync
from tests.support.aclmode import worker_url
from tests.support.worker import add_jobs

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Call:
    pid: str
    name: str
    args: str
    result: str
    began: int     # line index at which the call began
    ended: int     # line index at which it returned


_LINE = re.compile(r"^(\d+)\s+(?:\d+:\d+:\d+\.\d+\s+)?(.*)$")
_CALL = re.compile(r"^(\w+)\((.*?)(?:\) += (.*)| <unfinished \.\.\.>)$", re.S)
_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*?)\) += (.*)$", re.S)


def parse(trace: str) -> list[Call]:
    calls: list[Call] = []
    open_calls: dict[tuple[str, str], Call] = {}
    for i, line in enumerate(trace.splitlines()):
        m = _LINE.match(line)
        if not m:
            continue
        pid, rest = m.groups()
        if rest.startswith("<..."):
            r = _RESUMED.match(rest)
            if r and (pid, r.group(1)) in open_calls:
                call = open_calls.pop((pid, r.group(1)))
                call.args += r.group(2)
                call.result, call.ended = r.group(3), i
            continue
        c = _CALL.match(rest)
        if not c:
            continue
        call = Call(pid, c.group(1), c.group(2), c.group(3) or "", i, i)
        calls.append(call)
        if c.group(3) is None:
            open_calls[(pid, call.name)] = call
    return calls


def test_acked_pdf_was_fsynced_renamed_and_its_directory_fsynced_first(
        settings: Settings, sync_redis: redis.Redis, tmp_path: Path) -> None:
    n = 40
    tickets = tmp_path / "tickets"
    tickets.mkdir()
    put_orders_sync(sync_redis, settings, [demo_order(i) for i in range(1, n + 1)])
    ids = add_jobs(settings, "render_tickets", range(1, n + 1))
    out = tmp_path / "strace.txt"
    cmd = ["strace", "-f", "-y", "-s", "65536", "-o", str(out),
           "-e", "trace=fsync,fdatasync,rename,renameat,renameat2,link,linkat,write,writev,"
                 "sendto,sendmsg",
           sys.executable, "-m", "stagedoor.cli", "work", "--burst",
           "--redis-url", worker_url(settings.redis_url), "--consumer", "durable",
           "--tickets-dir", str(tickets), "--log-format", "text", "--log-level", "warning"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    done = subprocess.run(cmd, env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert sorted(p.name for p in tickets.glob("order-*.pdf")) == \
        sorted(f"order-{i}.pdf" for i in range(1, n + 1))

    calls = parse(out.read_text(errors="replace"))
    dir_tag = f"<{tickets.resolve()}>"
    dir_fsyncs = [c for c in calls if c.name == "fsync" and c.args.endswith(dir_tag)
                  and c.result == "0"]
    acks = [c for c in calls if c.name in ("write", "writev", "sendto", "sendmsg")
            and "XACK" in c.args]
    assert dir_fsyncs and acks
    links = [c for c in calls if c.name.startswith("link") and c.result == "0"]
    for order_id, entry_id in zip(range(1, n + 1), ids, strict=True):
        name = f"order-{order_id}.pdf"
        named = [c for c in links if f'"{name}"' in c.args] + \
            [c for c in calls if c.name.startswith("rename") and c.result == "0"
             and (f'/{name}"' in c.args or f'"{name}"' in c.args)]
        assert len(named) == 1, (name, named)
        rename = named[0]
        if rename.name.startswith("link"):  # the unnamed file's fd, fsynced by that thread
            fd = re.search(r'"/proc/self/fd/(\d+)"', rename.args)
            assert fd, rename.args
            before = [c.ended for c in links if c.pid == rename.pid and c.ended < rename.began]
            file_syncs = [c for c in calls if c.name == "fsync" and c.result == "0"
                          and c.pid == rename.pid and c.args.startswith(f"{fd.group(1)}<")
                          and c.began > max(before, default=-1)]
        else:
            tmp = re.compile(rf"/\.{re.escape(name)}\.\d+\.\d+\.tmp>?$")
            file_syncs = [c for c in calls if c.name == "fsync" and c.result == "0"
                          and tmp.search(c.args)]
        assert any(f.ended < rename.began for f in file_syncs), \
            f"{name}: no fsync of its file completed before it got its name"
        # strace prints \r\n escaped: the id as a whole RESP bulk string
        needle = f"\\r\\n{entry_id}\\r\\n"
        ack = [a for a in acks if needle in a.args]
        assert len(ack) == 1, f"{name} ({entry_id}) acked {len(ack)} times"
        assert any(rename.ended < d.began and d.ended < ack[0].began for d in dir_fsyncs), \
            f"{name}: no directory fsync between its link or rename and its XACK"
    # Where this file system takes O_TMPFILE, every PDF was an unnamed file linked in
    # (a silent fall back to tmp + rename would cost the kernel work files.py avoids).
    try:
        os.close(os.open(tickets, os.O_WRONLY | os.O_TMPFILE, 0o644))
        assert len([c for c in links if '"order-' in c.args]) == n, "not linked in"
    except IsADirectoryError:
        pass  # no O_TMPFILE here: the renames above were checked instead
    # The point of the group commit: fewer directory fsyncs than files, never more.
    assert len(dir_fsyncs) <= n
