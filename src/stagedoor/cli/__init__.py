"""The command line: `stagedoor` (main.py and commands/) and `stagedoor-supervise`
(supervise.py).  `python -m stagedoor.cli` is `stagedoor`."""
