"""`stagedoor web`: the operator's console, an authenticated web page in its own process.

Optional: it needs the `web` extra (aiohttp, Jinja2).  Nothing here is imported unless
`stagedoor web` runs (cli/commands/web.py imports it inside its run function), so the
CLI and the workers pay nothing for it.

- app.py          the aiohttp application: routes, middlewares, TLS, start and stop
- console.py      the console's state, one per process (`console_of(request)`)
- views.py        the pages and actions; every query and action is a console/ function
- kindchart.py    the Metrics tab's per-kind plots, drawn on the server as inline SVG
- sampler.py      the overview's numbers, sampled from Redis into a bounded history
- security.py     sessions, CSRF tokens, the security headers (CSP) of every response
- credentials.py  the password file of each role (viewer, operator)
- throttle.py     the log-in throttle: token buckets per source address and in all
- admission.py    how many requests reach Redis at once (503 "busy, retry" past it)
- quietlog.py     repeated errors logged once a minute, with a count

The pages are server-rendered (Jinja2, autoescape on) and every action is a plain
HTML form; static/console.js only refreshes the overview's numbers and chart.
"""
