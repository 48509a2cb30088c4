"""Demo and test support, not part of the worker: an embedded redis-server, demo orders.

- embedded_redis.py  starts a throwaway redis-server (the demo command, the tests)
- orders.py          realistic random orders (the demo, the tests, the benchmarks)
- order.json         a sample order for `stagedoor render`
"""
