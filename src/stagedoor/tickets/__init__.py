"""The ticket application: the built-in handlers and what they need beside the handler
API (stagedoor.handlers), which it uses and which does not import it.

- handlers.py  the built-in handlers, render_tickets and refund, as a Registry
               (`stagedoor.tickets.handlers:registry`, loaded by handlers/loading.py)
- orders.py    the order store they read (a Redis hash per order)
- files.py     atomic writes, paths confined to the tickets directory, stale-tmp sweep
- durable.py   the directory fsync shared by the renames that land together
- _durable.pyx the same durable write and group commit in C, the GIL released once a
               file, and the sink the render pool writes through
- render_pool.py   render_tickets' render and write on the native pool's C threads
- render_host.py   the worker's side of the render process (render_isolation):
                   started, fed, replaced when it dies or hangs, culprits run alone
- render_rules.py  render_host's rules as plain functions (no OS calls): start backoff,
                   culprits run alone, hangs, stalls, the watch's own lateness
- runstate.py      whether a process runs at all (stopped, frozen by a cgroup, no CPU
                   time): read before render_host blames a render for a hang
- render_serve.py  the render process itself: render_pool behind a socket
"""
