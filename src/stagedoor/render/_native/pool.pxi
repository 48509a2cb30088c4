# Included by stagedoor/_render.pyx.  A render pool of C threads that never take the GIL:
# the event loop reads an order into C (prepare), a pool thread renders it and hands the
# PDF to a sink (tickets/_durable.pyx's FileSink: the durable write), and an eventfd
# tells the loop which orders are done.
#
# Why: with a Python thread pool a render_tickets job crossed the event loop, a render
# thread and the GIL about six times; each crossing on this VM is a futex wake and a
# context switch, often a wait for the GIL behind another thread, and together they
# were most of a job's time with the seed's 8 in flight (docs/benchmarks.md, "The
# durable write in C").  Here the loop thread does the GIL part itself (reading the
# order's fields, which a render thread did anyway), and a pool thread is woken once
# and reports once.
#
# Written by hand: a mutex, a condition, two lists and an eventfd.  No library offers
# a pool whose workers run C without a Python thread state.

cdef extern from "<sys/eventfd.h>" nogil:
    int eventfd(unsigned int initval, int flags)
    int EFD_NONBLOCK, EFD_CLOEXEC

cdef extern from "<unistd.h>" nogil:
    Py_ssize_t sd_read "read" (int fd, void* buf, size_t n)
    Py_ssize_t sd_write "write" (int fd, const void* buf, size_t n)
    int sd_close "close" (int fd)

from stagedoor._pthread cimport (
    pthread_cond_broadcast,
    pthread_cond_destroy,
    pthread_cond_init,
    pthread_cond_signal,
    pthread_cond_t,
    pthread_cond_wait,
    pthread_create,
    pthread_join,
    pthread_mutex_destroy,
    pthread_mutex_init,
    pthread_mutex_lock,
    pthread_mutex_t,
    pthread_mutex_unlock,
    pthread_t,
)
from cpython.pycapsule cimport PyCapsule_GetPointer
from libc.errno cimport errno

# The head of a sink (tickets/_durable.pyx, FileSinkC): the function the pool calls
# with the finished PDF, without the GIL.
ctypedef int (*sink_write_fn)(void* self, const char* p, Py_ssize_t n) noexcept nogil
cdef struct SinkHead:
    sink_write_fn write


cdef struct PoolTask:
    Prepared pr
    SinkHead* sink
    int rc                  # execute()'s result
    int sink_rc             # the sink's (0 = written)
    PyObject* token         # the caller's object, owned: given back by collect()
    PyObject* sink_owner    # the sink object, owned: its memory is what `sink` points at
    PoolTask* next


cdef void* pool_main(void* arg) noexcept nogil:
    cdef RenderPoolC* c = <RenderPoolC*>arg
    cdef PoolTask* t
    cdef Scratch* s
    cdef unsigned long long one = 1
    while True:
        pthread_mutex_lock(&c.mu)
        while c.queue == NULL and not c.stopping:
            pthread_cond_wait(&c.cv, &c.mu)
        if c.queue == NULL:         # stopping, and nothing left to do
            pthread_mutex_unlock(&c.mu)
            return NULL
        t = c.queue
        c.queue = t.next
        if c.queue == NULL:
            c.queue_tail = NULL
        pthread_mutex_unlock(&c.mu)

        s = NULL
        t.rc = execute(&t.pr, &s)
        if t.rc == 0:
            t.sink_rc = t.sink.write(<void*>t.sink, s.out.data, s.out.len)
        if s != NULL:
            scratch_put(s)

        pthread_mutex_lock(&c.mu)
        t.next = c.done
        c.done = t
        pthread_mutex_unlock(&c.mu)
        sd_write(c.efd, &one, 8)    # wakes the loop's reader; counts add up


cdef struct RenderPoolC:
    pthread_mutex_t mu
    pthread_cond_t cv
    PoolTask* queue
    PoolTask* queue_tail
    PoolTask* done
    int stopping
    int efd


cdef class RenderPool:
    """`threads` C threads rendering orders into sinks; made in the process that uses
    it (after fork), closed by close().  submit() and collect() run on one thread (the
    event loop's), with the GIL."""

    cdef RenderPoolC c
    cdef pthread_t* th
    cdef int nth
    cdef readonly int pending

    def __cinit__(self, int threads):
        cdef int i
        if threads < 1:
            raise ValueError("a render pool needs at least one thread")
        pthread_mutex_init(&self.c.mu, NULL)
        pthread_cond_init(&self.c.cv, NULL)
        self.c.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)
        if self.c.efd < 0:
            raise OSError(errno, "eventfd failed")
        self.th = <pthread_t*>calloc(threads, sizeof(pthread_t))
        if self.th == NULL:
            raise MemoryError()
        for i in range(threads):
            if pthread_create(&self.th[i], NULL, pool_main, &self.c) != 0:
                self.close()
                raise OSError("cannot start a render thread")
            self.nth += 1

    @property
    def fd(self):
        """Readable when orders are done: the event loop's reader calls collect()."""
        return self.c.efd

    def submit(self, order, sink, token):
        """Render `order` on a pool thread into `sink` (an object whose `capsule`, named
        "stagedoor.sink", points at a SinkHead: tickets/_durable.FileSink), held until
        collect(); `token` comes back from collect().  Errors of reading the order
        (ValueError, TypeError...) raise here."""
        cdef PoolTask* t
        cdef SinkHead* head = <SinkHead*>PyCapsule_GetPointer(sink.capsule, b"stagedoor.sink")
        if self.c.stopping:
            raise RuntimeError("the render pool is closed")
        if not PLAN_READY:
            han_array(order, False)     # configures the fonts once: execute() needs them
        t = <PoolTask*>calloc(1, sizeof(PoolTask))
        if t == NULL:
            raise MemoryError()
        try:
            prepare(order, &t.pr)
        except BaseException:
            prepared_free(&t.pr)
            free(t)
            raise
        t.sink = head
        Py_INCREF(token)
        t.token = <PyObject*>token
        Py_INCREF(sink)
        t.sink_owner = <PyObject*>sink
        with nogil:
            pthread_mutex_lock(&self.c.mu)
            if self.c.queue_tail == NULL:
                self.c.queue = t
            else:
                self.c.queue_tail.next = t
            self.c.queue_tail = t
            pthread_cond_signal(&self.c.cv)
            pthread_mutex_unlock(&self.c.mu)
        self.pending += 1

    def collect(self):
        """[(token, None or the render's exception)] for every order done since the
        last call; whether the sink wrote it is the sink's to say."""
        cdef unsigned long long count
        cdef PoolTask* t
        cdef PoolTask* nxt
        cdef list out = []
        sd_read(self.c.efd, &count, 8)   # EAGAIN when nothing was signalled: fine
        with nogil:
            pthread_mutex_lock(&self.c.mu)
            t = self.c.done
            self.c.done = NULL
            pthread_mutex_unlock(&self.c.mu)
        while t != NULL:
            nxt = t.next
            err = None
            try:
                raise_for(&t.pr, t.rc)
            except Exception as e:
                err = e
            out.append((<object>t.token, err))
            Py_XDECREF(t.token)
            Py_XDECREF(t.sink_owner)
            prepared_free(&t.pr)
            free(t)
            self.pending -= 1
            t = nxt
        return out

    cdef void stop(self) noexcept nogil:
        """Tell the threads to stop once the queue is empty, and wait for them."""
        cdef int i
        pthread_mutex_lock(&self.c.mu)
        self.c.stopping = 1
        pthread_cond_broadcast(&self.c.cv)
        pthread_mutex_unlock(&self.c.mu)
        for i in range(self.nth):
            pthread_join(self.th[i], NULL)
        self.nth = 0

    def close(self):
        """Finish what was submitted, stop the threads; returns collect() of what had
        not been collected.  Idempotent."""
        with nogil:
            self.stop()
        return self.collect()

    def __dealloc__(self):
        # close() not called: the threads still finish what was queued (their memory is
        # this object's), then the references they held are leaked, not freed under them
        with nogil:
            self.stop()
        free(self.th)
        if self.c.efd >= 0:
            sd_close(self.c.efd)
        pthread_cond_destroy(&self.c.cv)
        pthread_mutex_destroy(&self.c.mu)
