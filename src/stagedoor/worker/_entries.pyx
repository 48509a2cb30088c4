# cython: language_level=3, boundscheck=False, wraparound=False
"""The worker's per-entry fast path: the common entry's fields -> Job, in C.

`parse_job` (stream/job.py) is the boundary and the authority: it takes any field
list and returns a Job or says why not.  It costs 4-9 us per entry on the CI box,
an eighth of a no-op job (docs/profile-worker.md): five regexes, three decodes, two
int(), and a frozen dataclass __init__ that goes through object.__setattr__ per field.
`fast_job` accepts only the entry every producer of ours writes (the five fields in
the seed's order, bytes, within the size limit, every value valid) and builds the
same Job; for anything else it returns None and the caller asks parse_job, so every
refusal and its reason still come from one place.  What it accepts is a subset of
what parse_job accepts, to the byte (tests/test_entries.py compares them).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.ref cimport PyObject

import collections
import contextvars
import types

from stagedoor.stream.job import Job

cdef extern from "Python.h":
    # A slot of a __slots__ class: its member descriptor holds where it lives in the
    # object (CPython's public structmember API).  Setting and reading a Job's fields
    # through it skips the frozen dataclass's __setattr__ and the descriptor's Python
    # call: a method-wrapper call per field was ~600 instructions, 3,000 of a no-op
    # job's ~19,000 in FastDispatch (callgrind, docs/benchmarks.md "The read path").
    ctypedef struct PyMemberDef:
        pass
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member
    int PyMember_SetOne(char* addr, PyMemberDef* m, object v) except -1
    object PyMember_GetOne(const char* addr, PyMemberDef* m)
    object PyUnicode_DecodeASCII(const char* s, Py_ssize_t size, const char* errors)


cdef PyMemberDef* _member(object cls, str name) except NULL:
    descr = cls.__dict__[name]
    if type(descr) is not types.MemberDescriptorType:
        raise TypeError(f"{cls.__name__}.{name} is not a __slots__ member")
    return (<PyMemberDescrObject*>descr).d_member


cdef object _new = object.__new__
cdef object _Job = Job
cdef PyMemberDef* M_KIND = _member(Job, "kind")
cdef PyMemberDef* M_ORDER = _member(Job, "order_id")
cdef PyMemberDef* M_OUTBOX = _member(Job, "outbox_id")
cdef PyMemberDef* M_REQUEST = _member(Job, "request_id")
cdef PyMemberDef* M_TRACE = _member(Job, "trace")


cdef inline object _ascii(object b):
    """bytes.decode("ascii") without the method call (the same result or the same error)."""
    return PyUnicode_DecodeASCII(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b), NULL)

cdef bytes N_KIND = b"kind"
cdef bytes N_ORDER = b"order_id"
cdef bytes N_OUTBOX = b"outbox_id"
cdef bytes N_REQUEST = b"request_id"
cdef bytes N_TRACE = b"trace"

cdef unsigned long long MAX_ID = 9223372036854775807ULL  # 2**63 - 1


cdef inline bint _name_is(object item, bytes name):
    return PyBytes_CheckExact(item) and item == name


cdef inline long long _id(object value):
    """1..2^63-1 written as 1-19 ASCII digits, else -1."""
    if not PyBytes_CheckExact(value):
        return -1
    cdef Py_ssize_t n = PyBytes_GET_SIZE(value), i
    if n < 1 or n > 19:
        return -1
    cdef const char* p = PyBytes_AS_STRING(value)
    cdef unsigned long long v = 0
    for i in range(n):
        if p[i] < 48 or p[i] > 57:
            return -1
        v = v * 10 + <unsigned long long>(p[i] - 48)  # 19 digits < 2^64: no overflow
    if v < 1 or v > MAX_ID:
        return -1
    return <long long>v


cdef inline bint _token(object value):
    """[A-Za-z0-9._:/+=-]{1,128}"""
    if not PyBytes_CheckExact(value):
        return False
    cdef Py_ssize_t n = PyBytes_GET_SIZE(value), i
    if n < 1 or n > 128:
        return False
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(value)
    cdef unsigned char c
    for i in range(n):
        c = p[i]
        if not ((c >= 97 and c <= 122) or (c >= 65 and c <= 90) or (c >= 48 and c <= 57)
                or c == 46 or c == 95 or c == 58 or c == 47 or c == 43 or c == 61
                or c == 45):
            return False
    return True


def fast_job(object raw, dict kind_names, Py_ssize_t max_field_bytes):
    """The Job for the common, valid entry; None: let parse_job decide (and explain).

    kind_names maps each known kind as bytes to its str (the registry's kinds): a kind
    found there is known and matches the kind pattern (the registry checked it)."""
    return _fast_job(raw, kind_names, max_field_bytes)


cdef object _fast_job(object raw, dict kind_names, Py_ssize_t max_field_bytes):
    if type(raw) is not list or PyList_GET_SIZE(raw) != 10:
        return None
    if not (_name_is(<object>PyList_GET_ITEM(raw, 0), N_KIND)
            and _name_is(<object>PyList_GET_ITEM(raw, 2), N_ORDER)
            and _name_is(<object>PyList_GET_ITEM(raw, 4), N_OUTBOX)
            and _name_is(<object>PyList_GET_ITEM(raw, 6), N_REQUEST)
            and _name_is(<object>PyList_GET_ITEM(raw, 8), N_TRACE)):
        return None
    cdef object kind_raw = <object>PyList_GET_ITEM(raw, 1)
    cdef object request = <object>PyList_GET_ITEM(raw, 7)
    cdef object trace = <object>PyList_GET_ITEM(raw, 9)
    if not PyBytes_CheckExact(kind_raw) or PyBytes_GET_SIZE(kind_raw) > max_field_bytes:
        return None
    kind = kind_names.get(kind_raw)
    if kind is None:
        return None
    cdef long long order_id = _id(<object>PyList_GET_ITEM(raw, 3))
    cdef long long outbox_id = _id(<object>PyList_GET_ITEM(raw, 5))
    if order_id < 0 or outbox_id < 0:
        return None
    if not (_token(request) and _token(trace)):
        return None
    if PyBytes_GET_SIZE(request) > max_field_bytes or PyBytes_GET_SIZE(trace) > max_field_bytes:
        return None
    # ids of 19 digits are under the limit only when max_field_bytes < 19; then the
    # refusal (with its message) is parse_job's
    if PyBytes_GET_SIZE(<object>PyList_GET_ITEM(raw, 3)) > max_field_bytes or \
            PyBytes_GET_SIZE(<object>PyList_GET_ITEM(raw, 5)) > max_field_bytes:
        return None
    job = _new(_Job)
    cdef char* at = <char*>(<PyObject*>job)
    PyMember_SetOne(at, M_KIND, kind)
    PyMember_SetOne(at, M_ORDER, order_id)
    PyMember_SetOne(at, M_OUTBOX, outbox_id)
    PyMember_SetOne(at, M_REQUEST, _ascii(request))
    PyMember_SetOne(at, M_TRACE, _ascii(trace))
    return job


# -- the per-entry dispatch of a first delivery --------------------------------------------

from cpython.ref cimport Py_XDECREF

from posix.time cimport CLOCK_MONOTONIC, CLOCK_REALTIME, clock_gettime, timespec

from asyncio.tasks import _enter_task, _leave_task

from stagedoor.telemetry.logs import JOB_FIELDS
from stagedoor.telemetry.metrics import DURATION_BUCKETS, WAIT_BUCKETS
from stagedoor.worker.eager import EagerRun

cdef extern from "Python.h":
    # PYGEN_RETURN 0 (*out: the return value), PYGEN_NEXT 1 (*out: the value yielded),
    # PYGEN_ERROR -1 (an exception is set): coro.send(None) without a StopIteration.
    int PyIter_Send(object iter, object arg, PyObject** out) except -1
    # Run in a context without context.run(): the job's copy, entered and left in C.
    object PyContext_CopyCurrent()
    int PyContext_Enter(object ctx) except -1
    int PyContext_Exit(object ctx) except -1
    object PyContextVar_Set(object var, object value)
    # A copy of a dict with the same keys is a memcpy of its table (no resize, no
    # rehash): a job's log fields cost a copy and 8 replaced values, not a new dict
    # grown key by key (2,300 instructions a job, callgrind).
    dict PyDict_Copy(object d)
    int PyDict_SetItem(object d, object key, object value) except -1


cdef inline double _clock(int which) noexcept nogil:
    """time.time() (CLOCK_REALTIME) and time.perf_counter() (CLOCK_MONOTONIC on Linux,
    as CPython reads it), without a Python call each."""
    cdef timespec ts
    clock_gettime(which, &ts)
    return <double>ts.tv_sec + <double>ts.tv_nsec * 1e-9


# The log fields of a first delivery, in logs.JOB_KEYS' order; copied per job.
cdef dict _FIELDS = dict.fromkeys(("request_id", "trace", "kind", "order_id", "outbox_id",
                                   "entry_id", "deliveries", "consumer"))
cdef str K_REQUEST = "request_id", K_TRACE = "trace", K_KIND = "kind", K_ORDER = "order_id"
cdef str K_OUTBOX = "outbox_id", K_ENTRY = "entry_id", K_DELIVERIES = "deliveries"
cdef str K_CONSUMER = "consumer"

cdef object _fast_job_py = fast_job
cdef object _JOB = JOB_FIELDS
cdef double _WAIT_B[32]
cdef double _DUR_B[32]
cdef int _NW = len(WAIT_BUCKETS)
cdef int _ND = len(DURATION_BUCKETS)
assert _NW <= 32 and _ND <= 32
for _i, _b in enumerate(WAIT_BUCKETS):
    _WAIT_B[_i] = _b
for _i, _b in enumerate(DURATION_BUCKETS):
    _DUR_B[_i] = _b


cdef inline void _observe(list row, double* buckets, int n, double x):
    """bisect_left(buckets, x) += 1, sum += x: WorkerStats.observe's row update."""
    cdef int lo = 0, hi = n, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if buckets[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    row[lo] = <double>row[lo] + 1.0
    cdef Py_ssize_t last = len(row) - 1
    row[last] = <double>row[last] + x


cdef inline long long _entry_ms(object entry_id):
    """The milliseconds of a stream id b"1758200000000-3", or -1 if it is not one."""
    if not PyBytes_CheckExact(entry_id):
        return -1
    cdef Py_ssize_t n = PyBytes_GET_SIZE(entry_id), i
    cdef const char* p = PyBytes_AS_STRING(entry_id)
    cdef long long v = 0
    for i in range(n):
        if p[i] == 45:  # '-'
            return v if i > 0 else -1
        if p[i] < 48 or p[i] > 57 or i >= 18:
            return -1
        v = v * 10 + (p[i] - 48)
    return -1


cdef class FastDispatch:
    """A reply's first deliveries, started in C; everything unusual goes back to Python.

    For each entry the common case is: a valid entry (fast_job) of a kind whose handler
    is a coroutine function, run eagerly in a copy of the context that carries the
    job's log fields, with an EagerRun as the current task (eager.py), to its end
    without ever suspending (a no-op, a cache hit).  Then the wait and the duration go
    into the stats rows, `handled` is counted and the id is queued for the ack: the same
    outcome, in the same order, as Dispatcher.handle + run_with_policy, without the
    four coroutine frames, the Outcome and the Python method calls around it.

    Whatever else happens leaves C with what was done so far:
    - an entry fast_job does not accept (or whose handler is not a coroutine
      function) goes whole to `generic(entry_id, fields)`, the Python path;
    - a handler that suspended or raised goes to `begun(...)`, which builds the
      Dispatcher.handle coroutine around the attempt already begun (its suspended
      coroutine, or its exception), so its time limit, retries, dead-lettering and
      logs are run_with_policy's.
    Both return 1 if the entry is finished, 0 if it runs on as a Task.
    """

    cdef dict kind_names, handlers, fns, waits, durations
    cdef object stats_handled  # a Counter
    cdef object handled_kind  # the kind of the handled jobs not yet in stats_handled
    cdef Py_ssize_t handled_n
    cdef object parse, ctx, stats, consumer, generic, begun, acker
    cdef Py_ssize_t max_field_bytes

    def __init__(self, *, parse, dict kind_names, dict handlers, Py_ssize_t max_field_bytes,
                 ctx, stats, consumer, generic, begun, acker):
        """handlers: kind -> Handler, only those whose fn is a coroutine function."""
        self.parse = parse
        self.kind_names = kind_names
        self.handlers = handlers
        self.fns = {kind: h.fn for kind, h in handlers.items()}
        self.max_field_bytes = max_field_bytes
        self.ctx = ctx
        self.stats = stats
        self.waits = stats.waits
        self.durations = stats.durations
        self.stats_handled = stats.counters["handled"]
        self.consumer = consumer
        self.generic = generic
        self.begun = begun
        self.acker = acker

    def run(self, object entries, object loop):
        """Start every entry; the caller has left its own task (see eager.start).
        Returns how many are finished (the others run on as Tasks)."""
        cdef Py_ssize_t finished = 0
        cdef list acked = []
        try:
            finished = self._run(entries, loop, acked)
        finally:
            # Whatever escapes (a handler's SystemExit), the jobs that finished are acked
            # and counted.
            self._count_handled()
            if acked:
                self.acker.add_many(acked)
        return finished

    cdef int _count_handled(self) except -1:
        if self.handled_n:
            kind = self.handled_kind
            self.stats_handled[kind] = self.stats_handled.get(kind, 0) + self.handled_n
            self.handled_n = 0
        return 0

    cdef Py_ssize_t _run(self, object entries, object loop, list acked) except -1:
        cdef Py_ssize_t finished = 0
        cdef long long ms
        cdef double wait, started
        cdef list row
        cdef object entry_id, fields, job, handler, kind, context, run, coro, fn, error
        cdef dict fields_of_job
        cdef char* at
        cdef PyObject* out = NULL
        cdef int sent
        for entry in entries:
            entry_id, fields = entry
            job = None
            ms = _entry_ms(entry_id)
            if fields is not None and ms >= 0:
                if self.parse is _fast_job_py:
                    job = _fast_job(fields, self.kind_names, self.max_field_bytes)
                else:  # patched (bench/slowdown.py)
                    job = self.parse(fields, self.kind_names, self.max_field_bytes)
            handler = None
            if job is not None:
                kind = job.kind
                handler = self.handlers.get(kind)
            if handler is None:
                finished += <Py_ssize_t>self.generic(entry_id, fields)
                continue
            # Time since Redis added the entry (its id) to the handler's start.
            wait = _clock(CLOCK_REALTIME) - <double>ms / 1000.0
            if wait < 0.0:
                wait = 0.0
            row = self.waits.get(kind)
            if row is None:
                self.stats.observe_wait(kind, wait)  # makes the row
            else:
                _observe(row, _WAIT_B, _NW, wait)
            # The job runs in its own copy of the context (as a Task would), which carries
            # its log fields (logs.job_context), with an EagerRun as its current task.
            context = PyContext_CopyCurrent()
            run = EagerRun()
            fn = self.fns[kind]
            error = None
            started = _clock(CLOCK_MONOTONIC)  # again just before the handler, if it gets there
            PyContext_Enter(context)
            _enter_task(loop, run)
            try:
                at = <char*>(<PyObject*>job)
                fields_of_job = PyDict_Copy(_FIELDS)
                PyDict_SetItem(fields_of_job, K_REQUEST, PyMember_GetOne(at, M_REQUEST))
                PyDict_SetItem(fields_of_job, K_TRACE, PyMember_GetOne(at, M_TRACE))
                PyDict_SetItem(fields_of_job, K_KIND, kind)
                PyDict_SetItem(fields_of_job, K_ORDER, PyMember_GetOne(at, M_ORDER))
                PyDict_SetItem(fields_of_job, K_OUTBOX, PyMember_GetOne(at, M_OUTBOX))
                PyDict_SetItem(fields_of_job, K_ENTRY, _ascii(entry_id))
                PyDict_SetItem(fields_of_job, K_DELIVERIES, 1)
                PyDict_SetItem(fields_of_job, K_CONSUMER, self.consumer)
                PyContextVar_Set(_JOB, fields_of_job)
                started = _clock(CLOCK_MONOTONIC)
                coro = None
                coro = fn(job, self.ctx)
                sent = PyIter_Send(coro, None, &out)
            except BaseException as e:
                error, sent = e, -1
            finally:
                _leave_task(loop, run)
                PyContext_Exit(context)
            if error is not None:  # raised before it waited: run_with_policy decides
                finished += <Py_ssize_t>self.begun(entry_id, fields, job, handler, None, None,
                                                   error, started, run, context)
                continue
            first = <object>out  # a new reference to the value...
            Py_XDECREF(out)      # ...so the one PyIter_Send gave us is let go
            out = NULL
            if sent == 0:  # returned: done without waiting
                row = self.durations.get(kind)
                if row is None:
                    self.stats.observe(kind, _clock(CLOCK_MONOTONIC) - started)
                else:
                    _observe(row, _DUR_B, _ND, _clock(CLOCK_MONOTONIC) - started)
                # counted into the Counter when the kind changes or the reply is done
                # (run's finally): a Counter item set was 1,000 instructions a job
                if kind is not self.handled_kind:
                    self._count_handled()
                    self.handled_kind = kind
                self.handled_n += 1
                acked.append(entry_id)
                finished += 1
            else:  # suspended on `first`: run_with_policy goes on from there, as a Task
                finished += <Py_ssize_t>self.begun(entry_id, fields, job, handler, coro, first,
                                                   None, started, run, context)
        return finished



# -- the ack ---------------------------------------------------------------------------------

from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.string cimport memcpy


cdef inline Py_ssize_t _put_len(char* p, char mark, Py_ssize_t n) noexcept:
    """Write "<mark><n>\\r\\n" at p (n >= 0) and return its length: snprintf's "%zd",
    which was 7,000 instructions an XACK of 4 ids (callgrind)."""
    cdef char digits[24]
    cdef Py_ssize_t k = 0, i
    while True:
        digits[k] = <char>(48 + n % 10)
        k += 1
        n //= 10
        if n == 0:
            break
    p[0] = mark
    for i in range(k):
        p[1 + i] = digits[k - 1 - i]
    p[1 + k] = 13
    p[2 + k] = 10
    return k + 3


cdef inline Py_ssize_t _put_bulk(char* p, object x) noexcept:
    cdef Py_ssize_t k = PyBytes_GET_SIZE(x)
    cdef Py_ssize_t at = _put_len(p, 36, k)  # '$'
    memcpy(p + at, PyBytes_AS_STRING(x), k)
    p[at + k] = 13
    p[at + k + 1] = 10
    return at + k + 2


def pack_xack(bytes stream, bytes group, list ids):
    """RESP for XACK stream group id...: what hiredis.pack_command packs, for bytes ids,
    at a fraction of its cost (tests/test_entries.py compares them)."""
    cdef Py_ssize_t n = len(ids), size = 0
    cdef object x
    for x in ids:
        if not PyBytes_CheckExact(x):
            raise TypeError("ids must be bytes")
        size += PyBytes_GET_SIZE(x) + 26  # "$" + up to 20 digits + 2 CRLF + the id
    size += 3 * 26 + PyBytes_GET_SIZE(stream) + PyBytes_GET_SIZE(group) + 32
    out = PyBytes_FromStringAndSize(NULL, size)
    cdef char* p = PyBytes_AS_STRING(out)
    cdef Py_ssize_t at = _put_len(p, 42, n + 3)  # '*'
    memcpy(p + at, b"$4\r\nXACK\r\n", 10)
    at += 10
    at += _put_bulk(p + at, stream)
    at += _put_bulk(p + at, group)
    for x in ids:
        at += _put_bulk(p + at, x)
    return out[:at]


# -- the read-ahead's streak (worker/readahead.py) ----------------------------------------
# What a reply of a read ahead sets off, inside the connection's data_received: its
# entries dispatched, the next read written with the acks, and the wait for the next
# reply.  readahead.PyStreak is the same in Python (the spec, and what a checkout
# without this extension runs; tests/test_fast_dispatch.py runs both).  In Python this
# was ~25 calls a read, a third of a no-op job's CPU at the seed defaults on a VM whose
# write system call costs 15 us (docs/benchmarks.md, "The read path, third pass").

cdef int W_MOST = 16, W_COOL = 64, W_COOL_MOST = 4096, W_WINDOW = 128, W_NEAR_MIN = 2
cdef double W_LIMIT = 0.75


cdef class ReplyWait:
    """readahead.PyReplyWait in C (its docstring says why it turns and when it sleeps):
    due, arrived and each turn were Python calls, ~10 % of a no-op drain's time (py-spy).
    `fixed` >= 0 fixes the turns instead of learning them (bench/slowdown.py).  The
    n_* counters say how the waits ended (bench/slowdown.py reply-stats)."""

    MOST, LIMIT, COOL, COOL_MOST = W_MOST, W_LIMIT, W_COOL, W_COOL_MOST
    WINDOW, NEAR_MIN = W_WINDOW, W_NEAR_MIN

    cdef object _loop, _turn_cb, _context
    cdef public int budget, cooldown, backoff, turns, fixed, window, near
    cdef public double missed
    cdef public long n_present, n_near, n_late, n_slept
    cdef public bint spinning
    cdef bint _queued

    def __init__(self, loop):
        self._loop = loop
        self._turn_cb = self._turn
        # The turns run in a context of their own, made once: call_soon would copy the
        # current one for each turn.
        self._context = contextvars.Context()
        self.budget = W_MOST
        self.missed = 0.0
        self.cooldown = 0
        self.backoff = W_COOL
        self.spinning = False
        self.turns = 0
        self.fixed = -1
        self.window = self.near = 0
        self._queued = False

    cpdef due(self):
        """A reply is due and none is here: turn the loop for it, if that pays."""
        if not self.spinning and self.budget:
            self.spinning = True
            self.turns = 0
            if not self._queued:
                self._queued = True
                self._loop.call_soon(self._turn_cb, context=self._context)

    cpdef arrived(self):
        """A reply came (in data_received)."""
        if self.spinning:  # within its turns
            self.spinning = False
            if self.turns <= 1:  # it was in already: epoll would not have slept
                self.n_present += 1
            else:  # the turns saved a sleep
                self.n_near += 1
                self.near += 1
            if self.fixed < 0:
                self.missed -= self.missed / 8
                self._waited()
        elif self.fixed >= 0 or not self.budget:
            self.n_slept += 1
            if self.fixed < 0:
                self.cooldown -= 1
                if self.cooldown <= 0:  # try turning again
                    self.budget = W_MOST
                    self.missed = W_LIMIT / 2
                    self.window = self.near = 0
        if self.fixed >= 0:
            self.budget = self.fixed

    cdef void _waited(self):
        """A wait that turned has ended: every WINDOW of them, did the turns pay?"""
        self.window += 1
        if self.window < W_WINDOW:
            return
        if self.near < W_NEAR_MIN:  # the replies were in or came late: turning saved nothing
            self._sleep()
        else:
            if self.missed < W_LIMIT / 2:
                self.backoff = W_COOL
            self.window = self.near = 0

    cdef void _sleep(self):
        self.budget = 0
        self.cooldown = self.backoff
        self.backoff = min(W_COOL_MOST, 2 * self.backoff)
        self.window = self.near = 0

    def _turn(self):
        if not self.spinning:
            self._queued = False
            return
        self.turns += 1
        if self.turns < self.budget:
            self._loop.call_soon(self._turn_cb, context=self._context)
            return
        self._queued = self.spinning = False  # ran out of turns: the loop sleeps in epoll
        self.n_late += 1
        if self.fixed >= 0:
            return
        self.missed += (1 - self.missed) / 8
        if self.missed > W_LIMIT:
            self._sleep()
        else:
            self._waited()


cdef class _Hook:
    """What stands where a reply's future would in the connection's queue of waiters:
    quacks like stream.wire.Hook (done, cancel, set_result, set_exception)."""

    cdef bint _done

    def done(self):
        return self._done

    def cancel(self):
        self._done = True
        return True

    def set_exception(self, error):
        self.set_result(error)


cdef class AckReply(_Hook):
    """Where the reply of an XACK sent with the reads ahead goes: the acks are settled."""

    cdef public object acker
    cdef public list ids

    def __init__(self, acker, list ids):
        self.acker = acker
        self.ids = ids
        self._done = False

    def set_result(self, reply):
        self._done = True
        self.acker.settle(self.ids, reply if isinstance(reply, BaseException) else None)


cdef class AheadRead(_Hook):
    """One read ahead on the wire: its reserved slots (n), the acks written with it (the
    first read of a write carries them), and where its reply goes."""

    cdef public Streak streak
    cdef public Py_ssize_t n
    cdef public object acks

    def __init__(self, Streak streak, Py_ssize_t n):
        self.streak = streak
        self.n = n
        self.acks = None
        self._done = False

    def set_result(self, reply):
        self._done = True
        self.streak._arrived(reply)


cdef class Streak:
    """The state of one streak of reads ahead and what each reply does (readahead.py's
    ReadAhead runs it: `fill` to begin, then `done` is resolved when it has ended)."""

    cdef public object wire  # the reads on the wire, in order (a deque of AheadRead)
    cdef public bint ending, dry
    cdef public object error, done, wait  # wait: a ReplyWait, or readahead.PyReplyWait
    cdef object reader, slots, acker, dispatcher, conn
    cdef bytes stream, group
    cdef Py_ssize_t ahead, cap
    cdef dict commands  # XREADGROUP '>' packed, by count

    def __init__(self, reader, Py_ssize_t ahead, Py_ssize_t cap):
        self.reader = reader
        self.slots = reader.slots
        self.acker = reader.acker
        self.dispatcher = reader.dispatcher
        self.conn = reader.conn
        s = reader.settings
        self.stream = s.stream.encode()
        self.group = s.group.encode()
        self.ahead = ahead
        self.cap = cap
        self.commands = {}
        self.wire = collections.deque()
        self.ending = self.dry = False
        self.error = self.done = self.wait = None

    cpdef fill(self):
        """Send reads until `ahead` are on the wire or no slot is free: in one write,
        with the acks queued."""
        cdef Py_ssize_t room = self.ahead - len(self.wire), k, total = 0
        cdef list reads = [], datas, hooks
        cdef AheadRead read
        slots = self.slots
        while room > 0:
            k = slots.try_reserve(self.cap)
            if not k:
                break
            reads.append(AheadRead(self, k))
            total += k
            room -= 1
        if not reads:
            return
        conn = self.conn
        # FastConnection.connected, write_hooked and Protocol.write_hooked spelled out
        # (resp.py, wire.py): three Python calls a read.  ASKING (a cluster slot
        # migrating) takes the general path.
        proto = conn._proto
        transport = None if proto is None else proto.transport
        if transport is None or transport.is_closing():
            slots.unreserve(total)
            return
        acker = self.acker
        # Acker.take spelled out (acks.py): what is queued is now being sent
        ids = acker.queued
        if ids:
            acker.queued = []
            acker.flushing.update(ids)
        datas = []
        for read in reads:
            command = self.commands.get(read.n)
            if command is None:
                command = self.commands[read.n] = self.reader.read_command(read.n, block=False)
            datas.append(command)
        hooks = reads
        if ids:
            acks = AckReply(acker, ids)
            (<AheadRead>reads[0]).acks = acks  # cancelled with the first read
            datas.insert(0, pack_xack(self.stream, self.group, ids))
            hooks = [acks] + reads
        try:
            if proto.asking:
                conn.write_hooked(datas, hooks)
            else:
                proto.waiters.extend(hooks)
                transport.write(b"".join(datas))
                conn._deadlines.add(proto, hooks[len(hooks) - 1], conn._timeout, proto.loop)
        except BaseException as e:
            slots.unreserve(total)
            if ids:
                acker.settle(ids, e)
            raise
        self.wire.extend(reads)
        reader = self.reader
        reader.reading += len(reads)
        reader.blocking = False

    cdef _arrived(self, reply):
        """A read's reply (or its failure), in data_received: dispatch its entries and
        send the next read.  Never raises: an error ends the streak and `run` raises it."""
        cdef AheadRead read = self.wire.popleft()
        reader = self.reader
        reader.reading -= 1
        wait = self.wait
        if wait is not None:
            wait.arrived()
        try:
            if isinstance(reply, BaseException):
                self.slots.unreserve(read.n)
                self._end(reply)
            else:
                # hiredis' [[stream, [[id, fields], ...]]] as it is (no copy a read)
                entries = reply[0][1] if reply else []
                # in data_received: no task is current (in_task False)
                self.dispatcher.dispatch(entries, read.n, None, None, False)
                if self.ending:
                    pass
                elif len(entries) < read.n or reader.must_pause():
                    self.ending = True
                    self.dry = not entries
                else:  # Redis serves the next read while the jobs of this one run
                    self.fill()
                    if not self.wire:  # no slot free: the consume loop waits for one
                        self.ending = True
        except BaseException as e:  # data_received must not raise: run() raises it
            self._end(e)
        self._settled()

    cdef _settled(self):
        """Ended, and every read sent is collected: `run` returns.  Else a reply is due:
        wait for it (ReplyWait)."""
        if self.wire:
            # the next reply is due, unless it came with this one (handled next)
            # FastConnection.more_replies spelled out (resp.py)
            proto = self.conn._proto
            if self.wait is not None and (proto is None or not proto.reader.has_data()):
                self.wait.due()
            return
        done = self.done
        if self.ending and done is not None and not done.done():
            done.set_result(None)

    cdef _end(self, error):
        self.ending = True
        if self.error is None:
            self.error = error
