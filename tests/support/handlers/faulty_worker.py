"""A worker whose renders abort or hang on marked orders (tests/support/handlers/faulty_render.py):

    stagedoor work --handlers tests.support.handlers.faulty_worker:registry ...

Imported by the worker through its handlers setting; it registers no handler.
"""

from __future__ import annotations

from stagedoor.handlers import Registry
from tests.support.handlers.faulty_render import install

registry = Registry()
install()
