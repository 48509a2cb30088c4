"""Helpers the tests share, one of each (issue 40 item 7):

- paths.py        where the code under test is (ROOT, SRC, PACKAGE)
- servers.py      which server the suite runs against (SD_TEST_SERVER)
- topology.py     Sentinel and Redis Cluster topologies on loopback free ports
- sentinels.py    the `sentinels` fixture: three Redis nodes under three Sentinels
                  (tests/conftest.py offers it to every test)
- tlscerts.py     a throwaway CA and a server certificate for 127.0.0.1
- aclmode.py      every worker of the suite as the least-privilege ACL user (SD_TEST_ACL=1)
- cli.py          the command line run as an operator would, in a child process
- worker.py       a worker running in the test's loop, polling waits
- supervisor.py   the real supervisor as a subprocess, looked at from outside
- web.py          `stagedoor web` under test, driven by a real browser
- prometheus.py   Prometheus text parsed, a /metrics scrape
- faults/        the fault harness: processes, invariants, a dropping proxy, and what
                  the fault tests read from the workers' logs (`faulted`)
- readahead_spec.py  PyStreak and PyReplyWait: the executable specification of the
                  read-ahead's C streak and reply wait (worker/_native/streak.pxi)
- settle_spec.py  the settle step's arithmetic in Python: the specification of the C
                  tally (worker/_native/tally.pxi)
- pdftools.py     PDF checks with real tools (qpdf, poppler, pypdf, zxing-cpp)
- pdfglyphs.py    every glyph's box on a ticket page, read back from the PDF
- render_fuzz.py  both renderers fuzzed with hostile text, each render in a child process
                  (render_crash_corpus.json: the inputs that once crashed a renderer)
- handlers/       handler registries the tests load into real workers with
                  `--handlers tests.support.handlers.<name>:registry`

test_harness_*.py here test the harness itself (free ports, teardown).
"""
