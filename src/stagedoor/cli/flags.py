"""Flags that a command would otherwise ignore, refused instead (exit 2, one line).

A flag that only means something in one mode (`--warn-age` with `status --check`,
`--interval` with `status --watch`) or that another flag overrides (`enqueue --kind`
beside `--file`, which takes every job from the file) was silently ignored: the
operator believed it applied.  Such flags are declared with `default=SUPPRESS`, so
they are in the namespace only when given, and checked here against their mode.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable


def flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def given(args: argparse.Namespace, dests: Iterable[str]) -> list[str]:
    """The flags among dests the command line set: SUPPRESS-defaulted ones are present
    only then; others count when not None and not False."""
    values = vars(args)
    return [flag(d) for d in dests if d in values and values[d] not in (None, False)]


def refuse(parser: argparse.ArgumentParser, flags: list[str], why: str) -> None:
    """parser.error (one line, exit 2) when any of flags was given."""
    if flags:
        parser.error(f"{', '.join(flags)}: {why}")
