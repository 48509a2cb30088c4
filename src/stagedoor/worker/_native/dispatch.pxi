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

cdef object _JOB = JOB_FIELDS


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
    without ever suspending (a no-op, a cache hit).  Its outcome goes into `settled`,
    the list `run` is given: five items a job (entry id, kind, settle.DONE, wait,
    duration), which Dispatcher.dispatch hands to settle.Settle.settle once the reply
    is done.  This writes no stats and queues no ack itself: the same outcome, in the
    same order, as Dispatcher.handle + run_with_policy, without the four coroutine
    frames, the Outcome and the Python method calls around it.

    Whatever else happens leaves C with what was done so far:
    - an entry fast_job does not accept (or whose handler is not a coroutine
      function) goes whole to `generic(entry_id, fields)`, the Python path;
    - a handler that suspended or raised goes to `begun(...)`, which builds the
      Dispatcher.handle coroutine around the attempt already begun (its suspended
      coroutine, or its exception), so its time limit, retries, dead-lettering and
      logs are run_with_policy's; its wait goes into `settled` (settle.STARTED).
    Both return 1 if the entry is finished, 0 if it runs on as a Task.
    """

    cdef dict kind_names, handlers, fns
    cdef object ctx, consumer, generic, begun, done_event, started_event
    cdef Py_ssize_t max_field_bytes

    def __init__(self, *, dict kind_names, dict handlers, Py_ssize_t max_field_bytes,
                 ctx, consumer, generic, begun, done, started):
        """handlers: kind -> Handler, only those whose fn is a coroutine function;
        done, started: settle.DONE and settle.STARTED (this module cannot import
        settle.py, which imports it)."""
        self.kind_names = kind_names
        self.handlers = handlers
        self.fns = {kind: h.fn for kind, h in handlers.items()}
        self.max_field_bytes = max_field_bytes
        self.ctx = ctx
        self.consumer = consumer
        self.generic = generic
        self.begun = begun
        self.done_event = done
        self.started_event = started

    def run(self, object entries, object loop, list settled):
        """Start every entry; the caller has left its own task (see eager.start) and
        settles `settled` afterwards, whatever escapes (a handler's SystemExit).
        Returns how many are finished (the others run on as Tasks)."""
        cdef Py_ssize_t finished = 0
        cdef long long ms
        cdef double wait, started
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
                job = _fast_job(fields, self.kind_names, self.max_field_bytes)
            handler = None
            if job is not None:
                kind = job.kind
                handler = self.handlers.get(kind)
            if handler is None:
                finished += <Py_ssize_t>self.generic(entry_id, fields)
                continue
            # Time since Redis added the entry (its id) to the handler's start.
            wait = _clock(CLOCK_REALTIME) - <double>ms / 1000.0
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
            settled.append(entry_id)
            settled.append(kind)
            if error is not None:  # raised before it waited: run_with_policy decides
                settled.append(self.started_event)
                settled.append(wait)
                settled.append(None)
                finished += <Py_ssize_t>self.begun(entry_id, fields, job, handler, None, None,
                                                   error, started, run, context)
                continue
            first = <object>out  # a new reference to the value...
            Py_XDECREF(out)      # ...so the one PyIter_Send gave us is let go
            out = NULL
            if sent == 0:  # returned: done without waiting
                settled.append(self.done_event)
                settled.append(wait)
                settled.append(_clock(CLOCK_MONOTONIC) - started)
                finished += 1
            else:  # suspended on `first`: run_with_policy goes on from there, as a Task
                settled.append(self.started_event)
                settled.append(wait)
                settled.append(None)
                finished += <Py_ssize_t>self.begun(entry_id, fields, job, handler, coro, first,
                                                   None, started, run, context)
        return finished
