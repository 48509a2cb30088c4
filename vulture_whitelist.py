"""Names vulture (`vulture`, configured in pyproject.toml: src/ and this file) reports as
unused that are used, each with why.  vulture reads the Python source only: it does not
see the Cython extensions (.pyx/.pxi), redis-py or asyncio calling our methods, dataclass
fields read through `asdict`/`to_json`, the tests or bench/.  A name here that stops
being used in the way its comment says should go, from the code and from here.
"""

# ruff: noqa
# (bare names are vulture's whitelist format: the file is read, never run)
_ = object()

# -- Python and library protocols: called by the interpreter, asyncio or redis-py
__getattr__  # stagedoor, handlers, render __init__: PEP 562 lazy public names
_.connection_made  # asyncio.Protocol (stream/wire.py, tickets/render_serve.py)
_.data_received  # asyncio.Protocol (stream/wire.py, tickets/render_serve.py)
_.eof_received  # asyncio.Protocol (tickets/render_serve.py)
_.connection_lost  # asyncio.Protocol (stream/wire.py, render_serve.py, worker/child.py)
_.connection_class  # stream/connection.py: redis-py's pool reads it (rediss:// TLS)
sweep_temporaries  # tickets/handlers.py: registered by @registry.on_start
start_render_process  # tickets/handlers.py: registered by @registry.on_start
wait_for_render_process  # tickets/handlers.py: registered by @registry.on_start
render_tickets  # tickets/handlers.py: registered by @registry.handler, the built-in kind

# -- read by the Cython extensions (vulture does not read .pyx/.pxi)
_.ending  # worker/readahead.py sets it on the Streak: worker/_native/streak.pxi reads it
ack  # worker/settle.py Event.ack: worker/_native/tally.pxi reads it (event[1])
_.observe  # telemetry/metrics.py WorkerStats.observe and observe_wait: _native/tally.pxi makes
_.observe_wait  # a kind's first row through them (and the tests and bench/ call them)
starts_at  # render/order.py Ticket field: the renderers read it by name (render/tables.py)
seat  # render/order.py Ticket field: the renderers read it by name (render/tables.py)
MIN_GAP  # render/tables.py: the layout rule the tables' boxes keep, checked by tests

# -- fields of records printed as JSON (--json, the console's pages) through asdict
first_time  # console/deadletters.py ErrorGroup
last_id  # console/deadletters.py ErrorGroup
last_time  # console/deadletters.py ErrorGroup
_.first_time  # console/deadletters.py ErrorGroup
in_flight  # console/fleet.py WorkerPresence
rss_bytes  # console/fleet.py WorkerPresence
inactive_ms  # console/fleet.py ConsumerRow
scan_calls  # console/jobs.py ScanCost (bench/measure_lookup.py reads it too)
minutes  # telemetry/kindstats.py KindWindow (status --kinds --json)

# -- read by the tests or bench/ only, kept because what they observe is product state
_.restart  # demo/embedded_redis.py EmbeddedRedis.restart: tests restart a server in place
_.open_connections  # telemetry/endpoint.py: tests/telemetry/test_exporter.py counts the open sockets
_.enabled  # supervisor/systemd.py Notifier.enabled: tests/support/topology.py asks it
fsyncs  # tickets/durable.py DirectorySync protocol field and GroupSync counter:
_.fsyncs  # tests/tickets/test_durable_order.py and test_render_pool.py count the fsyncs

# -- in files other helpers own this round (issue 40); to settle when those land
version_for  # render/qr.py: unused (helper iso owns render/**)
LINEBREAK_MUSTBREAK  # render/shaped/libs.py: the libunibreak constant beside its
#                      siblings, tests/render/test_render_crash.py reads it (render/** is iso's)
xadd_args  # stream/queue.py: bench/measure_latency.py only (helper fleet splits queue.py)
original_fields  # stream/queue.py: tests/stream/test_queue.py only (helper fleet's file)
POOL  # web/admission.py: redis-py's pool size, named for the docstring's arithmetic
#       beside LIMIT, unread by code (helper web owns web/**)
