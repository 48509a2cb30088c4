"""stagedoor: a supervised fleet of Redis-stream workers that render ticket PDFs."""

__version__ = "0.1.0"
