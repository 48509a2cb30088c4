"""Where settings come from: defaults < TOML file < STAGEDOOR_* environment < flags,
each value read from its text to its field's type; the flags themselves; and the
docs' table of them all."""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from ..errors import ConfigError, StagedoorError
from .settings import Settings

ENV_PREFIX = "STAGEDOOR_"

# -- reading values from text ----------------------------------------------------------


def _field_types() -> dict[str, str]:
    return {f.name: str(f.type) for f in fields(Settings)}


_INT_TEXT = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*", re.ASCII)
_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:_[0-9]+)*(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
                         r"|[+-]?(?:nan|inf|infinity)", re.ASCII | re.IGNORECASE)


class _NotFinite(StagedoorError):
    pass


def _coerce(name: str, raw: Any, source: str) -> Any:
    kind = _field_types()[name]
    where = f"{source}: {name}={raw!r}"
    try:
        if kind == "int":
            if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                raise ValueError
            if isinstance(raw, int):
                return raw
            if isinstance(raw, float):
                return int(raw)
            if not isinstance(raw, str) or not _INT_TEXT.fullmatch(raw):
                raise ValueError  # int() would take " 5\n", "\uff15" and friends
            return int(raw.replace("_", ""))
        if kind == "float":
            if isinstance(raw, bool):
                raise ValueError
            if isinstance(raw, str) and not _FLOAT_TEXT.fullmatch(raw):
                raise ValueError
            value = float(raw)
            if not math.isfinite(value):
                raise _NotFinite
            return value
        if kind == "list[str]":
            if isinstance(raw, str):
                return [p.strip() for p in raw.split(",") if p.strip()]
            if isinstance(raw, list) and all(isinstance(p, str) for p in raw):
                return list(raw)
            raise ValueError
        if not isinstance(raw, str):
            raise ValueError
        return raw
    except (TypeError, ValueError):
        expected = {"int": "an integer", "float": "a number", "list[str]": "a list of strings"}
        raise ConfigError(f"{where}: expected {expected.get(kind, 'a string')}") from None
    except _NotFinite:
        raise ConfigError(f"{where}: must be a finite number (not NaN or infinite)") from None


def from_toml(path: str | Path) -> dict[str, Any]:
    import tomllib  # here: only a --config file needs it (a worker's start-up, issue 27)

    p = Path(path)
    try:
        data = tomllib.loads(p.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {p}: not found") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {p}: is a directory, not a TOML file") from None
    except OSError as e:
        raise ConfigError(f"config file {p}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"config file {p}: not UTF-8 (byte {e.object[e.start]:#04x} at "
                          f"offset {e.start}); TOML files are UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {p}: {e}") from None
    # Allow either top-level keys or a [stagedoor] table.
    table = data.get("stagedoor", data)
    known = _field_types()
    out: dict[str, Any] = {}
    for key, raw in table.items():
        name = key.replace("-", "_")
        if name not in known:
            raise ConfigError(f"config file {p}: unknown key {key!r}")
        out[name] = _coerce(name, raw, f"config file {p}")
    return out


def from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    known = _field_types()
    out: dict[str, Any] = {}
    for env_name, raw in environ.items():
        if not env_name.startswith(ENV_PREFIX) or env_name == ENV_PREFIX + "CONFIG":
            continue
        name = env_name[len(ENV_PREFIX):].lower()
        if name not in known:
            raise ConfigError(f"environment: unknown variable {env_name}")
        out[name] = _coerce(name, raw, "environment")
    return out


def load(overrides: Mapping[str, Any] | None = None, *, config_file: str | None = None,
         environ: Mapping[str, str] | None = None) -> Settings:
    """Defaults < TOML file < environment < explicit overrides (flags)."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    path = config_file or env.get(ENV_PREFIX + "CONFIG")
    if path:
        values.update(from_toml(path))
    values.update(from_env(env))
    for name, raw in (overrides or {}).items():
        if raw is not None:
            values[name] = _coerce(name, raw, "flag")
    try:
        return Settings(**values)
    except TypeError as e:  # pragma: no cover - unknown names are rejected above
        raise ConfigError(str(e)) from None


# -- flags ------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser, only: Sequence[str] | None = None) -> None:
    """Add one --flag per settings field (or the named ones), defaults shown in --help."""
    defaults = Settings()
    parser.add_argument("--config", metavar="FILE",
                        help="TOML file of settings (also STAGEDOOR_CONFIG).")
    for f in fields(Settings):
        if only is not None and f.name not in only:
            continue
        flag = "--" + f.name.replace("_", "-")
        default = getattr(defaults, f.name)
        help_text = f"{f.metadata['help']} [default: {default!r}; env {ENV_PREFIX}{f.name.upper()}]"
        if str(f.type) == "list[str]":
            parser.add_argument(flag, dest=f.name, action="append", default=None,
                                metavar="SPEC", help=help_text)
        else:
            parser.add_argument(flag, dest=f.name, default=None, metavar=f.name.upper(),
                                help=help_text)


def from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Settings:
    names = {f.name for f in fields(Settings)}
    overrides = {k: v for k, v in vars(args).items() if k in names and v is not None}
    return load(overrides, config_file=getattr(args, "config", None), environ=environ)


def markdown_table() -> str:
    """docs/settings.md's table, generated so the docs cannot drift from the code."""
    rows = ["| setting | flag | environment | default | meaning |", "|---|---|---|---|---|"]
    defaults = Settings()
    for f in fields(Settings):
        flag = "--" + f.name.replace("_", "-")
        default = getattr(defaults, f.name)
        shown = "(host name)" if f.name == "consumer" else repr(default)
        rows.append(f"| {f.name} | `{flag}` | `{ENV_PREFIX}{f.name.upper()}` | `{shown}` | "
                    f"{f.metadata['help']} |")
    return "\n".join(rows) + "\n"
