"""Helpers the tests share, one of each (issue 40 item 7):

- cli.py         the command line run as an operator would, in a child process:
                 `cli(...)` (stagedoor, stagedoor-supervise, or another Python's)
- sentinels.py   the `sentinels` fixture: three Redis nodes under three Sentinels
                 (tests/conftest.py offers it to every test)
- prometheus.py  Prometheus text parsed (samples, one sample's value), a /metrics scrape
- faults.py      what the fault tests read from the workers' logs (`faulted`)
- readahead_spec.py  PyStreak and PyReplyWait: the executable specification of the
                 read-ahead's C streak and reply wait (worker/_native/streak.pxi)

The older helper modules beside the tests (servers.py, topology.py, workerkit.py,
webkit.py, pdftools.py, ...) are still where they were; they move here as the tests
that use them are regrouped.
"""
