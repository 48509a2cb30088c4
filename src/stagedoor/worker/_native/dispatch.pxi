# worker/_entries.pyx: a reply's first deliveries started in C (FastDispatch).

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
