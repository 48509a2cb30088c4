"""`python -m stagedoor.config`: print docs/settings.md's table of settings."""

from .load import markdown_table

print(markdown_table(), end="")
