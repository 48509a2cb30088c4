"""`stagedoor web`: the operator's console, an authenticated web page in its own process.

Optional: it needs the `web` extra (aiohttp, Jinja2).  Nothing here is imported unless
`stagedoor web` runs (cli/commands/web.py imports it inside its run function), so the
CLI and the workers pay nothing for it.

    credentials  the password file of each role (viewer, operator)
    security     sessions, CSRF tokens, the security headers (CSP) of every response
    sampler      the overview's numbers, sampled from Redis into a bounded history
    views        the pages and actions; every query and action is a console/ function
    app          the aiohttp application: routes, middlewares, TLS, start and stop
    throttle     the log-in throttle: token buckets per source address and in all
    admission    how many requests reach Redis at once (503 "busy, retry" past it)
    quietlog     repeated errors logged once a minute, with a count

The pages are server-rendered (Jinja2, autoescape on) and every action is a plain
HTML form; static/console.js only refreshes the overview's numbers and chart.
"""
