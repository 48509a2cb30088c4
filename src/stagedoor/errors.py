"""The error classes every layer shares, at the bottom of the layers (imports nothing
of stagedoor's but redaction, and no Redis client):

    StagedoorError                   the base of every exception class stagedoor
                                     defines (tests/package/test_errors_base.py walks the
                                     package to keep it so): `except StagedoorError`
                                     catches anything stagedoor raises of its own; each
                                     class keeps its builtin base beside it (a
                                     ConfigError is still a ValueError)
    TransientError, PermanentError   the handler API: what a handler raises to say
                                     "retry" or "dead-letter now" (worker/policy.py
                                     decides with them; also importable from
                                     stagedoor.handlers and stagedoor)
    ConfigError                      a setting is wrong: one line, exit 78 (EX_CONFIG)
    MalformedJob                     an entry's fields do not make a job: the producer
                                     refuses it, the worker dead-letters it

How the world's errors (Redis replies, errnos) are classified, permanent, an outage or
transient, is stream/errors.py's: it needs redis-py's exception classes.
"""

from __future__ import annotations

from .redaction import redact


class StagedoorError(Exception):
    """Something stagedoor raises of its own (not an error of Python or redis-py passed
    through)."""


class TransientError(StagedoorError):
    """Worth retrying: a timeout, a dependency away for a moment."""


class PermanentError(StagedoorError):
    """Will fail the same way every time: dead-letter at once."""


class ConfigError(StagedoorError, ValueError):
    """A configuration value is wrong; the message is one line for the operator, with any
    secret in it masked (redaction.redact), whichever setting it quotes."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


class MalformedJob(StagedoorError, ValueError):
    """The entry's fields do not make a job; the message is the dead-letter reason."""
