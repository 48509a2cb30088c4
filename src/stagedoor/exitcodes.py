"""Exit codes of every stagedoor command and process, in one place (sysexits.h).

The systemd unit names EX_CONFIG in RestartPreventExitStatus, and the supervisor
tells a worker's boot failure from a crash by these codes, so they must agree
everywhere: import them from here.
"""

from __future__ import annotations

import os

EX_OK = 0
EX_USAGE = 2  # argparse's code for a wrong argument, kept for every command
# but `stagedoor doctor`, whose 2 is CRITICAL (the monitoring-plugin convention below):
# its wrong argument is sysexits' EX_USAGE, so a typo in a check's command line does
# not page anyone as a broken host
EX_USAGE_DOCTOR = os.EX_USAGE  # 64
EX_DATAERR = os.EX_DATAERR  # 65: input data (a job line, an order file) is wrong
EX_NOINPUT = os.EX_NOINPUT  # 66: an input file cannot be read
EX_UNAVAILABLE = os.EX_UNAVAILABLE  # 69: Redis cannot be reached
EX_SOFTWARE = os.EX_SOFTWARE  # 70: a bug, a flapping pool, an unfinished demo
EX_CANTCREAT = os.EX_CANTCREAT  # 73: an output file cannot be written
EX_TEMPFAIL = os.EX_TEMPFAIL  # 75: try again later: Redis out of memory, backlog near MAXLEN
EX_CONFIG = os.EX_CONFIG  # 78: a bad setting; systemd does not restart on it
EX_BROKEN_PIPE = 128 + 13  # 141: stdout's reader went away (`| head`), as SIGPIPE would

# `stagedoor status --check` speaks the monitoring-plugin convention instead (Nagios,
# Icinga, Sensu: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN), which is what those tools read;
# there 3 also covers "Redis unreachable", which is 69 everywhere else.
CHECK_OK = 0
CHECK_WARNING = 1
CHECK_CRITICAL = 2
CHECK_UNKNOWN = 3
