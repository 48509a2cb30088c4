"""Subcommands of `stagedoor`: one module each, exposing register(subparsers).

- enqueue.py     `stagedoor enqueue`: add jobs as the outbox relay does
- work.py        `stagedoor work`: one worker in the foreground, no supervisor
- demo.py        `stagedoor demo`: the whole product on one machine, end to end
- status.py      `stagedoor status`: the queue at a glance (--watch, --check); the
                 connection flags and client the other commands reuse
- dead.py        `stagedoor dead list|show|replay|delete|purge`: the dead letters
- pending.py     `stagedoor pending list|show`: delivered, unacked entries
- status_kinds.py `stagedoor status --kinds`: the console's Metrics tab as text or JSON
- job.py         `stagedoor job`: one job's story
- pause.py       `stagedoor pause` / `resume`: the fleet-wide pause flag
- render.py      `stagedoor render`: an order's tickets to a PDF file
- systemd.py     `stagedoor systemd print|install`: the units and example settings
- monitoring.py  `stagedoor monitoring print`: the Prometheus rules and dashboard
- doctor.py      `stagedoor doctor`: what this host lacks, and what to do
- web.py         `stagedoor web`: the operator's console
"""
