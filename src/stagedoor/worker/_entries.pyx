# cython: language_level=3, boundscheck=False, wraparound=False
"""The worker's hot path in C: an entry's fields -> Job, a reply's first deliveries run,
the XACK packed, and the read-ahead's reply handling.  The worker requires it (as
asyncpg requires its protocol): worker/entries.py imports it, and a worker without it
stops at boot with a one-line error and exit code 78 (worker/child.py).

`parse_job` (stream/job.py) is the boundary and the authority: it takes any field
list and returns a Job or says why not.  `fast_job` accepts only the entry every
producer of ours writes (the five fields in the seed's order, bytes, within the size
limit, every value valid) and builds the same Job; for anything else it returns None
and the caller asks parse_job, so every refusal and its reason still come from one
place.  What it accepts is a subset of what parse_job accepts, to the byte
(tests/worker/test_entries.py compares them).

The source is split by concern, the way _render.pyx is (asyncpg's protocol/ shape):
the C API declarations in _entries.pxd, and

    _native/parse.pxi     fast_job: the common entry -> Job
    _native/dispatch.pxi  FastDispatch: a reply's first deliveries run in C, their
                          outcomes returned for settle.py to write down
    _native/tally.pxi     tally: settle.py's arithmetic (histogram rows, counters)
    _native/xack.pxi      pack_xack: XACK as RESP
    _native/streak.pxi    the read-ahead's Streak and ReplyWait (readahead.py)

This file keeps the imports and the includes (in that order: each unit's module-level
initialisation uses what the ones before it defined).
"""

from cpython.bytes cimport (
    PyBytes_AS_STRING,
    PyBytes_CheckExact,
    PyBytes_FromStringAndSize,
    PyBytes_GET_SIZE,
)
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.ref cimport PyObject, Py_XDECREF
from libc.string cimport memcpy
from posix.time cimport CLOCK_MONOTONIC, CLOCK_REALTIME, clock_gettime, timespec

import collections
import contextvars
import types
from asyncio.tasks import _enter_task, _leave_task

from stagedoor.telemetry.logs import JOB_FIELDS
from stagedoor.telemetry.metrics import DURATION_BUCKETS, WAIT_BUCKETS
from stagedoor.stream.job import Job
from stagedoor.worker.eager import EagerRun

include "_native/parse.pxi"
include "_native/dispatch.pxi"
include "_native/tally.pxi"
include "_native/xack.pxi"
include "_native/streak.pxi"
