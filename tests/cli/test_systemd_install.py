"""`stagedoor systemd install`: an installation the unit's sandbox hides from the
service is refused, and --config-dir moves EnvironmentFile= and LoadCredential= with the
files (issue 24, item 9).  The units are checked with systemd-analyze verify."""

from __future__ import annotations

import shutil
import site
import sys
import tempfile
from pathlib import Path

import pytest

from stagedoor.cli.shipped import supervise_executable
from stagedoor.console.sandbox import hidden_paths, why_hidden
from tests.supervisor.test_systemd import TEMPLATE, UNIT, unit_directives, verify
from tests.support.cli import cli

# a venv the test makes from this interpreter finds the dependencies through these
SITE = site.getsitepackages()


def test_the_sandbox_rules() -> None:
    unit = UNIT.read_text()
    for path, setting in [("/home/ann/venv/bin/stagedoor-supervise", "ProtectHome=yes"),
                          ("/root/.pyenv/versions/3.11.7/bin/python3.11", "ProtectHome=yes"),
                          ("/run/user/1000/x", "ProtectHome=yes"),
                          ("/tmp/venv/bin/stagedoor-supervise", "PrivateTmp=yes"),
                          ("/var/tmp/v/bin/python", "PrivateTmp=yes")]:
        why = why_hidden(unit, path)
        assert why is not None and setting in why, (path, why)
        assert why_hidden(TEMPLATE.read_text(), path) is not None
    for path in ("/opt/stagedoor/venv/bin/stagedoor-supervise", "/usr/bin/python3",
                 "/homes/x", "/tmpfoo/x"):
        assert why_hidden(unit, path) is None, path
    relaxed = unit.replace("ProtectHome=yes", "ProtectHome=read-only").replace(
        "PrivateTmp=yes", "PrivateTmp=no")
    assert why_hidden(relaxed, "/home/ann/x") is None
    assert why_hidden(relaxed, "/tmp/x") is None


def test_install_refuses_an_installation_under_tmp() -> None:
    """A "venv" under /tmp (its python and stagedoor-supervise there): PrivateTmp=yes
    would hide it from the service.  Refused in one line, exit 78, nothing written;
    --allow-hidden-paths installs it with a warning."""
    base = Path(tempfile.mkdtemp(prefix="sd-words-", dir="/tmp"))
    try:
        bindir = base / "venv" / "bin"
        bindir.mkdir(parents=True)
        python = bindir / "python"
        python.symlink_to(sys.executable)
        exe = bindir / "stagedoor-supervise"
        exe.write_text(f"#!{python}\nimport sys\nfrom stagedoor.cli.supervise import main\n"
                       "sys.exit(main())\n")
        exe.chmod(0o755)
        units, conf = base / "units", base / "etc"
        args = ("systemd", "install", "--unit-dir", str(units), "--config-dir", str(conf))
        r = cli(*args, python=str(python), path=SITE)
        assert r.returncode == 78, (r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        assert f"{exe} is under /tmp, which PrivateTmp=yes" in lines[0], lines[0]
        assert "--allow-hidden-paths" in lines[0]
        assert not units.exists() and not conf.exists()
        printed = cli("systemd", "print", python=str(python), path=SITE)
        assert printed.returncode == 0 and "PrivateTmp=yes" in printed.stderr
        r = cli(*args, "--allow-hidden-paths", python=str(python), path=SITE)
        assert r.returncode == 0, r.stderr
        assert "warning" in r.stderr and "PrivateTmp=yes" in r.stderr
        assert unit_directives((units / "stagedoor.service").read_text())["ExecStart"] == [
            str(exe)]
    finally:
        shutil.rmtree(base)


@pytest.mark.parametrize("template", [False, True])
def test_config_dir_moves_environment_file_and_credential(tmp_path: Path,
                                                          template: bool) -> None:
    assert shutil.which("systemd-analyze"), "systemd-analyze is needed for this test"
    units, conf = tmp_path / "units", tmp_path / "conf"
    name = "stagedoor@.service" if template else "stagedoor.service"
    args = ["systemd", "install", "--unit-dir", str(units), "--config-dir", str(conf),
            *(["--template"] if template else [])]
    if hidden_paths(UNIT.read_text(), supervise_executable()):  # this venv, under /root..
        args.append("--allow-hidden-paths")
    r = cli(*args, path=SITE)
    assert r.returncode == 0, r.stderr
    text = (units / name).read_text()
    d = unit_directives(text)
    queue = "%i" if template else "stagedoor"
    secret = "%i.redis-password" if template else "redis-password"
    assert d["EnvironmentFile"] == [f"-{conf}/{queue}.env"], d["EnvironmentFile"]
    assert d["LoadCredential"] == [f"redis-password:{conf}/{secret}"], d["LoadCredential"]
    assert "/etc/stagedoor" not in text
    assert (conf / ("jobs.env" if template else "stagedoor.env")).is_file()
    assert f"{conf}/" in r.stdout  # the next steps name the files where they are
    assert verify(tmp_path, text, name) == ""
