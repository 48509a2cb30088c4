"""The files that ship inside the package (src/stagedoor/data/): units, examples, alerts.

Read with importlib.resources, so they are found in a checkout, an editable install, a
wheel and a zip alike.
"""

from __future__ import annotations

import shutil
import sys
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

SYSTEMD = ("stagedoor.service", "stagedoor@.service", "stagedoor.env.example",
           "stagedoor.toml.example")
MONITORING = {"alerts": "alerts.yml", "dashboard": "grafana-dashboard.json"}
SHIPPED_EXEC = "ExecStart=/usr/local/bin/stagedoor-supervise"
SHIPPED_DOCS = "file:///opt/stagedoor/venv/share/doc/stagedoor/supervisor.md"
SHIPPED_CONFIG_DIR = "/etc/stagedoor"


def data(*parts: str) -> Traversable:
    return files("stagedoor").joinpath("data", *parts)


def text(*parts: str) -> str:
    return data(*parts).read_text(encoding="utf-8")


def supervise_executable() -> str | None:
    """The stagedoor-supervise of this installation: beside the interpreter, else PATH."""
    beside = Path(sys.executable).parent / "stagedoor-supervise"
    if beside.is_file():
        return str(beside)
    return shutil.which("stagedoor-supervise")


def docs_dir() -> Path | None:
    """Where this installation's docs are (setup.py's data_files: <prefix>/share/doc)."""
    path = Path(sys.prefix) / "share" / "doc" / "stagedoor"
    return path if (path / "supervisor.md").is_file() else None


def render_unit(unit: str, executable: str | None, docs: Path | None,
                config_dir: str = SHIPPED_CONFIG_DIR) -> str:
    """A shipped unit pointed at this installation: ExecStart= and Documentation=, and
    at config_dir: EnvironmentFile= and LoadCredential= (and the comments naming them)."""
    out = text("systemd", unit)
    if config_dir.rstrip("/") != SHIPPED_CONFIG_DIR:
        out = out.replace(SHIPPED_CONFIG_DIR + "/", config_dir.rstrip("/") + "/")
    if executable:
        out = out.replace(SHIPPED_EXEC, f"ExecStart={executable}")
    if docs is not None:
        out = out.replace(SHIPPED_DOCS, (docs / "supervisor.md").as_uri())
    return out
