"""Example stagedoor handlers: a receipt per order (see handlers.py)."""
