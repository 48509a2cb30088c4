"""Everything stagedoor raises derives from one base, `stagedoor.errors.StagedoorError`,
so a caller can catch "any stagedoor error" in one clause, while each class keeps the
builtin base it had (a ConfigError is still a ValueError, a JobTimedOut a TimeoutError).

Walks every module of the package (the extensions included), imports it, and checks every
exception class defined in stagedoor: a new class that forgets the base fails here.
"""

from __future__ import annotations

import importlib
import pkgutil

import redis

import stagedoor
from stagedoor import errors


def stagedoor_modules() -> list[str]:
    """Every module of the package but the `__main__`s (importing one runs the program)."""
    return sorted(m.name for m in pkgutil.walk_packages(stagedoor.__path__, "stagedoor.")
                  if not m.name.endswith(".__main__"))


def exception_classes() -> dict[str, type[BaseException]]:
    """Qualified name -> class, for every exception class a stagedoor module defines."""
    found: dict[str, type[BaseException]] = {}
    for name in stagedoor_modules():
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, BaseException)
                    and value.__module__ == name):
                found[f"{name}.{value.__qualname__}"] = value
    return found


def test_every_module_is_walked() -> None:
    names = stagedoor_modules()
    assert "stagedoor.worker._entries" in names and "stagedoor.web.views" in names
    assert "stagedoor.console.doctor.host" in names


def test_every_stagedoor_exception_derives_from_the_base() -> None:
    classes = exception_classes()
    # the walk sees classes in every layer (a sample the count below cannot hide)
    for known in ("stagedoor.errors.ConfigError", "stagedoor.stream.enqueue_errors.BacklogFull",
                  "stagedoor.worker.policy.JobTimedOut", "stagedoor.render.order.RenderFailed",
                  "stagedoor.demo.embedded_redis.PortTaken"):
        assert known in classes
    stray = sorted(n for n, c in classes.items()
                   if c is not errors.StagedoorError and not issubclass(c, errors.StagedoorError))
    assert not stray, f"exception classes not under stagedoor.errors.StagedoorError: {stray}"


def test_the_classes_keep_their_builtin_bases() -> None:
    from stagedoor.errors import ConfigError, MalformedJob
    from stagedoor.render.order import OrderDataError
    from stagedoor.stream.queue import NotReplicated
    from stagedoor.worker.policy import JobTimedOut

    assert issubclass(ConfigError, ValueError) and issubclass(MalformedJob, ValueError)
    assert issubclass(OrderDataError, ValueError)
    assert issubclass(JobTimedOut, TimeoutError)
    assert issubclass(NotReplicated, redis.ConnectionError)
