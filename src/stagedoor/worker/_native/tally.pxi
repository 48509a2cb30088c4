# worker/_entries.pyx: the arithmetic of settle.Settle.settle, its only caller: a batch
# of outcomes into the stats' histogram rows and counters, and the ids to ack.

cdef double _WAIT_B[32]
cdef double _DUR_B[32]
cdef int _NW = len(WAIT_BUCKETS)
cdef int _ND = len(DURATION_BUCKETS)
assert _NW <= 32 and _ND <= 32
for _i, _b in enumerate(WAIT_BUCKETS):
    _WAIT_B[_i] = _b
for _i, _b in enumerate(DURATION_BUCKETS):
    _DUR_B[_i] = _b


cdef inline int _observe(list row, double* buckets, int n, double x) except -1:
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
    return 0


cdef int _count(dict counters, object counter, object kind, Py_ssize_t n) except -1:
    """counters[counter][kind] += n, on the Counter as the dict it is (no method calls)."""
    cdef PyObject* had
    if n:
        c = counters[counter]
        had = PyDict_GetItemWithError(c, kind)
        if had == NULL:
            PyDict_SetItem(c, kind, n)
        else:
            PyDict_SetItem(c, kind, <object>had + n)
    return 0


def tally(list records, object stats, list acks):
    """Count a batch of outcomes, five items each (entry id, kind, settle.Event, wait,
    duration; settle.py says what each means): every wait and duration into the
    stats' histogram rows (WorkerStats.observe_wait and observe, in C), every event's
    counter by kind, and the ids whose ack the event queues appended to `acks`.
    tests/support/settle_spec.py is the same in Python (tests/worker/test_settle.py runs
    both on the same batches)."""
    cdef Py_ssize_t i, n = len(records), same = 0
    if n % 5:
        raise ValueError("an outcome is five items")
    cdef dict waits = stats.waits, durations = stats.durations, counters = stats.counters
    cdef object entry_id, kind, event, wait, took, counter, row
    cdef object last_counter = None, last_kind = None
    cdef double x
    for i in range(0, n, 5):
        entry_id = records[i]
        kind = records[i + 1]
        event = records[i + 2]
        wait = records[i + 3]
        took = records[i + 4]
        if wait is not None:
            row = waits.get(kind)
            if row is None:
                stats.observe_wait(kind, wait)  # makes the row
            else:
                x = wait
                _observe(row, _WAIT_B, _NW, x if x > 0.0 else 0.0)
        if took is not None:
            row = durations.get(kind)
            if row is None:
                stats.observe(kind, took)  # makes the row
            else:
                _observe(row, _DUR_B, _ND, took)
        counter = (<tuple>event)[0]
        if counter is not None:
            # counted into the Counter when the counter or the kind changes, and at the
            # end: a Counter item set a job was a large share of a no-op job's dispatch
            if counter is not last_counter or (kind is not last_kind and kind != last_kind):
                _count(counters, last_counter, last_kind, same)
                last_counter, last_kind, same = counter, kind, 0
            same += 1
        if (<tuple>event)[1]:
            acks.append(entry_id)
    _count(counters, last_counter, last_kind, same)
