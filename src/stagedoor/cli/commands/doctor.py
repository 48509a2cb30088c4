"""`stagedoor doctor`: check what this host needs to run stagedoor and say what to do
about each thing missing (stagedoor.console.doctor; docs/doctor.md lists the checks).

One line per check, after a first line a monitoring plugin reads; exit code in the
monitoring-plugin convention: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.  --json prints
the same as one JSON object.  A wrong argument is exit 64 (EX_USAGE_DOCTOR: 2 is
CRITICAL here); a bad setting is a CRITICAL finding, not a traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from ... import config
from ...console.doctor import Finding, overall, report_json, report_text
from ...exitcodes import CHECK_CRITICAL, EX_USAGE_DOCTOR
from ...redaction import redact


def register(sub: Any) -> None:
    p = sub.add_parser(
        "doctor", help="Check this host: renderer, fonts, tickets directory, Redis, ...",
        description="Check what a host needs to run stagedoor: the native renderer and "
        "the libraries it loaded, the Thai dictionary, the fonts and the scripts they "
        "cover, the tickets directory (writable, atomic writes, free space), Redis "
        "(reachable, version >= 7.0.5, the ACL of the workers' user, maxmemory-policy, "
        "persistence, replication), the clock against Redis's, the installed systemd "
        "units' paths and the metrics port. Each failure says what to do. Exit status "
        "0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (the monitoring-plugin convention); 64 for a "
        "wrong argument.")
    p.add_argument("--json", action="store_true", help="One JSON object instead of lines.")
    p.add_argument("--admin-url", metavar="URL",
                   help="Redis URL of a user allowed INFO, CONFIG GET and ACL DRYRUN, for "
                   "the checks the workers' own user may not run (docs/security.md). "
                   "[default: --redis-url]")
    p.add_argument("--producer-user", metavar="NAME",
                   help="Also check that this ACL user may run what `enqueue` sends.")
    p.add_argument("--unit-dir", default="/etc/systemd/system", metavar="DIR",
                   help="Where the systemd units are installed. [default: /etc/systemd/system]")
    p.add_argument("--no-redis", action="store_true", help="Check the host only.")
    config.add_arguments(p)
    p.usage_code = EX_USAGE_DOCTOR  # a value the command's own options refuse
    p.set_defaults(func=run, parser=p)


def findings(args: argparse.Namespace) -> list[Finding]:
    # here: `doctor --help` imports no Redis client (tests/cli/test_cli_imports.py)
    from ...console.doctor import host, server

    try:
        settings = config.from_args(args)
    except config.ConfigError as e:
        return [Finding("settings", CHECK_CRITICAL, redact(str(e)),
                        "fix the setting (docs/settings.md)")]
    out = host.checks(settings, args.unit_dir)
    if not args.no_redis:
        if not settings.redis_url:
            out.append(Finding("redis", CHECK_CRITICAL, "no --redis-url",
                               "set --redis-url or STAGEDOOR_REDIS_URL"))
        else:
            out += server.checks(settings, args.admin_url, args.producer_user)
    return out


def flag_error(args: argparse.Namespace) -> str | None:
    """A flag whose value is not of its type (`--metrics-port abc`): a usage error, as
    argparse's own are; a setting out of bounds, or a bad one from the environment or
    a config file, stays a CRITICAL finding (the host's configuration is broken)."""
    try:
        config.from_args(args)
    except config.ConfigError as e:
        return str(e) if str(e).startswith("flag: ") else None
    return None


def run(args: argparse.Namespace) -> int:
    bad = flag_error(args)
    if bad is not None:
        print(redact(f"stagedoor doctor: error: {bad} (see stagedoor doctor --help)"),
              file=sys.stderr)
        return EX_USAGE_DOCTOR
    found = findings(args)
    if args.json:
        text = orjson.dumps(report_json(found), option=orjson.OPT_INDENT_2).decode() + "\n"
    else:
        text = report_text(found)
    sys.stdout.write(redact(text))  # a server's error may quote the URL: no password shown
    return overall(found)
