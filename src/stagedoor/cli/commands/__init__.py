"""Subcommands of `stagedoor`: one module each, exposing register(subparsers)."""
