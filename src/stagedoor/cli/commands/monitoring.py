"""`stagedoor monitoring print alerts|dashboard`: the shipped Prometheus rules and dashboard.

See docs/monitoring.md: the alert rules are a Prometheus rule file, the dashboard a
Grafana dashboard to import.  `path` prints the directory they are in.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..shipped import MONITORING, data, text


def register(sub: Any) -> None:
    p = sub.add_parser("monitoring", help="Print the shipped Prometheus alerts and Grafana "
                       "dashboard.", description="The Prometheus alert rules and the Grafana "
                       "dashboard that ship with stagedoor (docs/monitoring.md).")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    pr = actions.add_parser("print", help="Print the alert rules or the dashboard.")
    pr.add_argument("what", choices=sorted(MONITORING), help="alerts or dashboard")
    pr.set_defaults(func=run_print)
    path = actions.add_parser("path", help="Print the directory the files are in.")
    path.set_defaults(func=run_path)


def run_print(args: argparse.Namespace) -> int:
    sys.stdout.write(text("monitoring", MONITORING[args.what]))
    return 0


def run_path(args: argparse.Namespace) -> int:
    print(data("monitoring"))
    return 0
