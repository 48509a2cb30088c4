"""Handlers by kind: the registry, the context a handler runs with, the built-ins."""

from .context import Context
from .registry import Handler, Registry, load_registry

__all__ = ["Context", "Handler", "Registry", "load_registry"]
