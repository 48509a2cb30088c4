"""The command line: `stagedoor` (main.py and commands/) and `stagedoor-supervise`
(supervise.py).  `python -m stagedoor.cli` is `stagedoor`.

- main.py         `stagedoor`: its parser, the listing of commands, the error mapping
- commands/       one module per subcommand (register(subparsers))
- supervise.py    `stagedoor-supervise`: the supervisor's flags, help and exit codes
- console_run.py  one console operation (stagedoor.console.*) run from the CLI: a client,
                  an event loop, the exit codes, JSON or text, one-line errors
- flags.py        flags a command would ignore, refused instead (exit 2)
- shipped.py      the units, examples and alert files inside the package (data/)

Nothing outside cli/ imports it (tests/package/test_layers.py): what the web shares with it
lives below, in console/ (text.py, sandbox.py, client.py) and telemetry/ (inspect.py's
watch_sample).
"""
