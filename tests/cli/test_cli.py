"""The `stagedoor` command's own surface: --version, python -m, the shipped files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from stagedoor import __version__
from stagedoor.cli.shipped import supervise_executable
from stagedoor.console.sandbox import hidden_paths
from tests.supervisor.test_systemd import unit_directives, verify
from tests.support.cli import SUPERVISE, cli, module
from tests.support.paths import PACKAGE

SHIPPED = PACKAGE / "data"


def test_version_on_both_commands_and_python_m() -> None:
    r = cli("--version", entry=module("stagedoor"))  # python -m stagedoor
    assert (r.stdout, r.returncode) == (f"stagedoor {__version__}\n", 0)
    r = cli("--version", entry=SUPERVISE)
    assert (r.returncode, r.stdout) == (0, f"stagedoor-supervise {__version__}\n")
    assert cli("--version").stdout == f"stagedoor {__version__}\n"
    r = cli("status", "--nonsense")
    assert r.returncode == 2 and r.stderr.startswith("stagedoor: error: unrecognized")


def test_systemd_print_points_the_unit_at_this_installation(tmp_path: Path) -> None:
    r = cli("systemd", "print")
    assert r.returncode == 0, r.stderr
    d = unit_directives(r.stdout)
    exe = Path(sys.executable).parent / "stagedoor-supervise"
    assert d["ExecStart"] == [str(exe)] and exe.is_file()
    shipped = (SHIPPED / "systemd" / "stagedoor.service").read_text()
    docs = Path(sys.prefix) / "share" / "doc" / "stagedoor" / "supervisor.md"
    if docs.is_file():  # an installed wheel (scripts/check-package.sh runs this test so)
        assert d["Documentation"] == [docs.as_uri()]
    else:  # an editable install has no data files: the shipped path stays
        assert d["Documentation"] == unit_directives(shipped)["Documentation"]
    assert verify(tmp_path, r.stdout) == ""
    assert cli("systemd", "print", "--as-shipped").stdout == shipped
    for name in ("stagedoor@.service", "stagedoor.env.example", "stagedoor.toml.example"):
        r = cli("systemd", "print", name)
        assert r.returncode == 0 and r.stdout.startswith("#"), (name, r.stderr)
    r = cli("systemd", "print", "nosuch.service")
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_systemd_install_writes_and_keeps(tmp_path: Path) -> None:
    units, conf = tmp_path / "units", tmp_path / "etc"
    args: tuple[str, ...] = ("systemd", "install", "--unit-dir", str(units), "--config-dir",
                             str(conf))
    printed = cli("systemd", "print").stdout
    if hidden_paths(printed, supervise_executable()):  # this test venv under /root, /home..
        args += ("--allow-hidden-paths",)  # (tests/cli/test_systemd_install.py tests the refusal)
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    # --config-dir moves EnvironmentFile= and LoadCredential= with the files
    assert (units / "stagedoor.service").read_text() == printed.replace("/etc/stagedoor/",
                                                                        f"{conf}/")
    assert (conf / "stagedoor.env").read_text() == (
        SHIPPED / "systemd" / "stagedoor.env.example").read_text()
    assert oct((conf / "stagedoor.env").stat().st_mode & 0o777) == "0o640"
    assert "systemctl enable --now stagedoor" in r.stdout
    (conf / "stagedoor.env").write_text("STAGEDOOR_WORKERS=2\n")  # the operator's edit
    r = cli(*args)
    assert r.returncode == 0 and f"kept       {conf / 'stagedoor.env'}" in r.stdout
    assert (conf / "stagedoor.env").read_text() == "STAGEDOOR_WORKERS=2\n"
    r = cli(*args, "--template")
    assert r.returncode == 0, r.stderr
    assert (units / "stagedoor@.service").is_file() and (conf / "jobs.env").is_file()
    assert "systemctl enable --now stagedoor@jobs" in r.stdout
    blocked = tmp_path / "file"
    blocked.write_text("")
    r = cli("systemd", "install", "--unit-dir", str(blocked / "sub"), "--config-dir",
            str(conf), *args[6:])
    assert r.returncode == 73
    errors = [line for line in r.stderr.strip().splitlines()
              if ": warning: " not in line]  # the hidden-paths warning, on this venv
    assert len(errors) == 1 and "cannot write" in errors[0], r.stderr


def test_monitoring_print_and_path() -> None:
    alerts = cli("monitoring", "print", "alerts")
    assert alerts.returncode == 0
    assert alerts.stdout == (SHIPPED / "monitoring" / "alerts.yml").read_text()
    assert yaml.safe_load(alerts.stdout)["groups"][0]["name"] == "stagedoor"
    dashboard = cli("monitoring", "print", "dashboard")
    assert json.loads(dashboard.stdout)["uid"] == "stagedoor"
    path = Path(cli("monitoring", "path").stdout.strip())
    assert (path / "alerts.yml").is_file()
