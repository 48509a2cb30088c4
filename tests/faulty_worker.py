"""A worker whose renders abort or hang on marked orders (tests/faulty_render.py):

    stagedoor work --handlers tests.faulty_worker:registry ...

Imported by the worker through its handlers setting; it registers no handler.
"""

from __future__ import annotations

from tests.faulty_render import install

from stagedoor.handlers import Registry

registry = Registry()
install()
