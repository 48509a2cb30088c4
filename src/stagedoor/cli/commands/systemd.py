"""`stagedoor systemd print|install`: the units and example settings of this package.

`print [FILE]` writes a shipped file to stdout (default stagedoor.service), with
ExecStart= and Documentation= pointed at this installation (`--as-shipped` leaves them
as they are in src/stagedoor/data/systemd/).  `install` writes the unit (or the
stagedoor@.service template with --template) into --unit-dir and the example settings
into --config-dir, never overwriting a file without --force, then says what is left to
do (the password credential, daemon-reload, enable).  --config-dir moves EnvironmentFile=
and LoadCredential= with the files.  Exit 73 when a file cannot be written; exit 78,
writing nothing, when the unit's sandbox would hide this installation from the service
(ProtectHome=, PrivateTmp=: console/sandbox.py), unless --allow-hidden-paths; `print` warns
on stderr for the same.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ...console.sandbox import hidden_paths
from ...exitcodes import EX_CANTCREAT, EX_CONFIG
from ..shipped import (
    SHIPPED_CONFIG_DIR,
    SYSTEMD,
    docs_dir,
    render_unit,
    supervise_executable,
    text,
)


def register(sub: Any) -> None:
    p = sub.add_parser("systemd", help="Print or install the systemd units of this package.",
                       description="The systemd units (stagedoor.service, the per-queue "
                       "template stagedoor@.service) and example settings that ship with "
                       "stagedoor, pointed at this installation. See docs/supervisor.md.")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    pr = actions.add_parser("print", help="Print one shipped file.",
                            description="Print a shipped file: " + ", ".join(SYSTEMD) + ".")
    pr.add_argument("file", nargs="?", default="stagedoor.service", choices=SYSTEMD,
                    metavar="FILE", help="one of: " + ", ".join(SYSTEMD))
    pr.add_argument("--as-shipped", action="store_true",
                    help="leave ExecStart= and Documentation= as shipped")
    pr.set_defaults(func=run_print)
    ins = actions.add_parser("install", help="Install the unit and example settings.",
                             description="Write the unit into --unit-dir and the example "
                             "settings into --config-dir (existing files are kept unless "
                             "--force), then print the remaining steps.")
    ins.add_argument("--template", action="store_true",
                     help="install stagedoor@.service (one instance per queue) instead")
    ins.add_argument("--unit-dir", default="/etc/systemd/system", metavar="DIR",
                     help="[default: /etc/systemd/system]")
    ins.add_argument("--config-dir", default="/etc/stagedoor", metavar="DIR",
                     help="[default: /etc/stagedoor]")
    ins.add_argument("--force", action="store_true", help="overwrite existing files")
    ins.add_argument("--allow-hidden-paths", action="store_true",
                     help="install even when the unit's sandbox (ProtectHome=, PrivateTmp=) "
                     "hides this installation from the service; relax the sandbox in a "
                     "drop-in then")
    ins.set_defaults(func=run_install)


def _content(name: str, as_shipped: bool = False, config_dir: str = SHIPPED_CONFIG_DIR) -> str:
    if name.endswith(".service") and not as_shipped:
        return render_unit(name, supervise_executable(), docs_dir(), config_dir)
    return text("systemd", name)


def _hidden(unit_text: str) -> list[str]:
    return hidden_paths(unit_text, supervise_executable())


def run_print(args: argparse.Namespace) -> int:
    content = _content(args.file, args.as_shipped)
    sys.stdout.write(content)
    if args.file.endswith(".service") and not args.as_shipped:
        hidden = _hidden(content)
        if hidden:
            print(f"stagedoor systemd print: warning: the service could not run this "
                  f"installation: {'; '.join(hidden)}", file=sys.stderr)
    return 0


def run_install(args: argparse.Namespace) -> int:
    unit = "stagedoor@.service" if args.template else "stagedoor.service"
    env = "jobs.env" if args.template else "stagedoor.env"
    unit_text = _content(unit, config_dir=str(Path(args.config_dir).absolute()))
    hidden = _hidden(unit_text)
    if hidden and not args.allow_hidden_paths:
        # Refused: the unit would fail at start (203/EXEC, or Python without its modules).
        print(f"stagedoor systemd install: the service could not run this installation: "
              f"{'; '.join(hidden)}. Install stagedoor outside /home, /root, /run/user, /tmp "
              "and /var/tmp (a venv in /opt/stagedoor/venv from a system Python), or pass "
              "--allow-hidden-paths and relax the sandbox in a drop-in (ProtectHome=read-only, "
              "PrivateTmp=no)", file=sys.stderr)
        return EX_CONFIG
    if hidden:
        print(f"stagedoor systemd install: warning: {'; '.join(hidden)}: relax the sandbox in "
              "a drop-in (systemctl edit) or the service will not start", file=sys.stderr)
    plan = [(Path(args.unit_dir) / unit, unit_text, 0o644),
            (Path(args.config_dir) / env, _content("stagedoor.env.example"), 0o640),
            (Path(args.config_dir) / "stagedoor.toml.example",
             _content("stagedoor.toml.example"), 0o644)]
    for path, content, mode in plan:
        if path.exists() and not args.force:
            print(f"kept       {path} (exists; --force overwrites it)")
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(content, encoding="utf-8")
            tmp.chmod(mode)
            tmp.replace(path)
        except OSError as e:
            print(f"stagedoor systemd install: cannot write {path}: {e.strerror or e}",
                  file=sys.stderr)
            return EX_CANTCREAT
        print(f"wrote      {path}")
    secret = Path(args.config_dir) / ("jobs.redis-password" if args.template
                                      else "redis-password")
    name = "stagedoor@jobs" if args.template else "stagedoor"
    print(f"next: put the Redis password in {secret} (mode 0600; empty for none), edit "
          f"{Path(args.config_dir) / env}, then: systemctl daemon-reload && "
          f"systemctl enable --now {name}")
    return 0
