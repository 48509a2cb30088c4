# cython: language_level=3, boundscheck=False, wraparound=False
"""The durable write of a ticket PDF in C, with the GIL released once per file.

    write_linked(dirpath, name, data, sync)   unnamed file (O_TMPFILE) + write + fsync
                                              + link it in + directory fsync (shared
                                              through `sync`, a DirSync)
    DirSync(dirpath)                          the group commit of one directory

Why in C: files.py does the same sequence with os.* calls, and each of those calls
drops the GIL and takes it back: about ten hand-overs per file, on a thread that
competes with the event loop thread and seven other render threads for it.  Each
hand-over the kernel has to arbitrate costs a futex round trip and a context switch,
and on this VM those cost more than the file's own system calls (the counts, before
and with this module: docs/benchmarks.md, "Moved from comments").  Here the whole sequence, and the wait for the shared
directory fsync, is one `with nogil:` block.

The semantics are files.write_atomic's and durable.GroupSync's, to the system call:
the bytes are fsynced before the name exists; the call returns only once a directory
fsync that began after the link completed has completed; a failure half way leaves
nothing behind (the unnamed file dies with its fd; a tmp name of ours is unlinked);
a failed directory fsync raises in the thread that ran it and covers nobody.
tests/tickets/test_durable_order.py checks the order from strace; tests/tickets/test_durable.py runs
EEXIST, a missing directory and no O_TMPFILE against both writers, and
tests/tickets/test_hardening_files.py a full and a read-only file system.

Written by hand: the C library has the calls; what is ours is doing them without the
GIL and the sharing of the directory fsync.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.pycapsule cimport PyCapsule_New
from libc.errno cimport EEXIST, EINTR, errno
from libc.stdio cimport snprintf
from libc.string cimport strerror

import os


cdef extern from "<fcntl.h>" nogil:
    int O_RDONLY, O_WRONLY, O_CLOEXEC, O_DIRECTORY, O_TMPFILE
    int AT_FDCWD, AT_SYMLINK_FOLLOW
    int c_open "open" (const char* path, int flags, ...)
    int openat(int dirfd, const char* path, int flags, ...)

cdef extern from "<unistd.h>" nogil:
    ctypedef long ssize_t
    ssize_t c_write "write" (int fd, const void* buf, size_t n)
    int fsync(int fd)
    int close(int fd)
    int linkat(int olddirfd, const char* oldpath, int newdirfd, const char* newpath,
               int flags)
    int unlinkat(int dirfd, const char* path, int flags)
    int getpid()

cdef extern from "<stdio.h>" nogil:
    int renameat(int olddirfd, const char* oldpath, int newdirfd, const char* newpath)

from stagedoor._pthread cimport (
    pthread_cond_broadcast,
    pthread_cond_destroy,
    pthread_cond_init,
    pthread_cond_t,
    pthread_cond_wait,
    pthread_mutex_destroy,
    pthread_mutex_init,
    pthread_mutex_lock,
    pthread_mutex_t,
    pthread_mutex_unlock,
    pthread_self,
)


# What write_linked says when this system cannot do the unnamed file: open(O_TMPFILE)
# refused it, or /proc/self/fd is not there to link through.  files.py then writes the
# named way and stops asking.  The errnos are files._NO_TMPFILE's.
NOT_HERE = 1
cdef int E_NOT_HERE = -1

cdef extern from *:
    """
    #include <errno.h>
    static int sd_no_tmpfile(int e) {
        return e == EOPNOTSUPP || e == EISDIR || e == EINVAL || e == ENOENT
            || e == EXDEV || e == EPERM;
    }
    """
    int sd_no_tmpfile(int e) nogil


cdef int fsync_retry(int fd) noexcept nogil:
    cdef int r = fsync(fd)
    while r != 0 and errno == EINTR:
        r = fsync(fd)
    return 0 if r == 0 else errno


cdef struct SyncC:
    pthread_mutex_t mu
    pthread_cond_t cv
    unsigned long renamed          # tickets handed out: one per completed link/rename
    unsigned long durable          # every ticket <= this is covered by a finished fsync
    int running
    unsigned long fsyncs           # directory fsyncs that ran (tests, profiling)


cdef int sync_after_link(SyncC* c, int dfd) noexcept nogil:
    """0 once a directory fsync that began after the caller's link completed has
    completed, else the errno of the fsync this caller ran (which covers nobody)."""
    cdef unsigned long ticket, covered
    cdef int err = 0
    pthread_mutex_lock(&c.mu)
    c.renamed += 1
    ticket = c.renamed
    while c.durable < ticket:
        if c.running:
            pthread_cond_wait(&c.cv, &c.mu)
            continue
        c.running = 1
        covered = c.renamed          # every link before this fsync starts
        pthread_mutex_unlock(&c.mu)
        err = fsync_retry(dfd)
        pthread_mutex_lock(&c.mu)
        c.running = 0
        if err:
            pthread_cond_broadcast(&c.cv)  # the next waiter runs its own fsync
            break
        c.fsyncs += 1
        if covered > c.durable:
            c.durable = covered
        pthread_cond_broadcast(&c.cv)
    pthread_mutex_unlock(&c.mu)
    return err


cdef class DirSync:
    """The directory fsyncs of one directory, shared by the writers whose links land
    together: durable.GroupSync in C (its docstring has the protocol and the guarantee).

    A writer that linked its file takes a ticket; if no directory fsync is running it
    runs one, covering every ticket taken before it began; else it waits for the
    running one to end and looks again.  Made after fork, per process (GroupSyncs)."""

    cdef SyncC c
    cdef readonly bytes directory
    native = True                        # durable.DirectorySync: write_linked takes it

    def __cinit__(self, directory):
        self.directory = os.fsencode(directory)
        pthread_mutex_init(&self.c.mu, NULL)
        pthread_cond_init(&self.c.cv, NULL)

    def __dealloc__(self):
        pthread_cond_destroy(&self.c.cv)
        pthread_mutex_destroy(&self.c.mu)

    @property
    def fsyncs(self):
        """Directory fsyncs that ran (tests, profiling)."""
        return self.c.fsyncs

    def sync_after_rename(self):
        """For a rename done in Python (files.py's named path): returns once a directory
        fsync that began after it has completed; OSError if the fsync this caller ran
        failed."""
        cdef int dfd, err = 0
        cdef const char* path = PyBytes_AS_STRING(self.directory)
        with nogil:
            dfd = c_open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            if dfd < 0:
                err = errno
            else:
                err = sync_after_link(&self.c, dfd)
                close(dfd)
        if err:
            raise OSError(err, strerror(err).decode(errors="replace"), os.fsdecode(path))


cdef int write_all(int fd, const char* p, Py_ssize_t n) noexcept nogil:
    cdef ssize_t w
    while n > 0:
        w = c_write(fd, p, <size_t>n)
        if w < 0:
            if errno == EINTR:
                continue
            return errno
        p += w
        n -= w
    return 0


cdef int link_in(int fd, int dfd, const char* name, const char* tmp) noexcept nogil:
    """Give the unnamed file `fd` the name `name` in `dfd`; over an existing file (a
    redelivery) through our own tmp name and a rename, as files.py does.  0, an errno,
    or E_NOT_HERE when /proc cannot link it."""
    cdef char proc[64]
    cdef int e
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd)
    if linkat(AT_FDCWD, proc, dfd, name, AT_SYMLINK_FOLLOW) == 0:
        return 0
    e = errno
    if e != EEXIST:
        return E_NOT_HERE if sd_no_tmpfile(e) else e
    if linkat(AT_FDCWD, proc, dfd, tmp, AT_SYMLINK_FOLLOW) != 0:
        e = errno
        return E_NOT_HERE if sd_no_tmpfile(e) else e
    if renameat(dfd, tmp, dfd, name) != 0:
        e = errno
        unlinkat(dfd, tmp, 0)           # never leave our tmp name behind
        return e
    return 0


cdef int write_c(const char* dpath, const char* nm, const char* tmp, const char* p,
                 Py_ssize_t n, SyncC* sync, int* step) noexcept nogil:
    """The whole write; 0, an errno (with *step: 0 the directory, 2 the file, 3 the
    directory fsync) or E_NOT_HERE."""
    cdef int dfd, fd, err = 0
    step[0] = 0
    dfd = c_open(dpath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    if dfd < 0:
        return errno
    step[0] = 1
    fd = openat(dfd, ".", O_WRONLY | O_TMPFILE | O_CLOEXEC, 0o644)
    if fd < 0:
        err = errno
        if sd_no_tmpfile(err):
            err = E_NOT_HERE
    else:
        step[0] = 2
        err = write_all(fd, p, n)
        if err == 0:
            err = fsync_retry(fd)
        if err == 0:
            err = link_in(fd, dfd, nm, tmp)
        close(fd)                    # unlinked and never linked: gone with its fd
        if err == 0:
            step[0] = 3
            err = sync_after_link(sync, dfd) if sync != NULL else fsync_retry(dfd)
    close(dfd)
    return err


cdef object result(int err, int step, bytes dirpath, bytes name):
    if err == E_NOT_HERE:
        return NOT_HERE
    if err:
        where = dirpath if step != 2 else dirpath + b"/" + name
        raise OSError(err, strerror(err).decode(errors="replace"), os.fsdecode(where))
    return None


cdef bytes tmp_name(bytes name):
    # files.tmp_name's pattern, so that sweep_stale recognises a left-over one
    return b".%s.%d.%d.tmp" % (name, os.getpid(), <unsigned long>pthread_self())


def write_linked(bytes dirpath, bytes name, bytes data, DirSync sync=None):
    """Write `data` durably as dirpath/name (see the module docstring).

    Returns None when done, NOT_HERE (nothing written) when this system cannot do the
    unnamed file; raises OSError (with the path) for any other failure, having left
    nothing behind.  A FileNotFoundError naming `dirpath` means the directory is not
    there."""
    cdef bytes tmp = tmp_name(name)
    cdef int err, step = 0
    cdef SyncC* c = &sync.c if sync is not None else NULL
    cdef const char* dpath = PyBytes_AS_STRING(dirpath)
    cdef const char* nm = PyBytes_AS_STRING(name)
    cdef const char* tp = PyBytes_AS_STRING(tmp)
    cdef const char* p = PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
    with nogil:
        err = write_c(dpath, nm, tp, p, n, c, &step)
    return result(err, step, dirpath, name)


# -- a sink: the same write, called by the renderer from its own nogil code ----------------

# The head every sink starts with (stagedoor._render's pool.pxi declares the same): a
# function the renderer calls, without the GIL, with the finished PDF.  It returns 0
# or nonzero; what went wrong is the sink's to say (FileSink.result).
ctypedef int (*sink_write_fn)(void* self, const char* p, Py_ssize_t n) noexcept nogil

cdef struct FileSinkC:
    sink_write_fn write
    const char* dpath
    const char* name
    const char* tmp
    SyncC* sync
    int err
    int step

SINK_CAPSULE = b"stagedoor.sink"


cdef int file_sink_write(void* self, const char* p, Py_ssize_t n) noexcept nogil:
    cdef FileSinkC* c = <FileSinkC*>self
    c.err = write_c(c.dpath, c.name, c.tmp, p, n, c.sync, &c.step)
    return c.err


cdef class FileSink:
    """One PDF to be written durably by whoever renders it: `capsule` (name
    SINK_CAPSULE) points at a struct whose first member is the write function, which
    stagedoor._render's render pool calls from its C threads with the finished bytes;
    `result()` then says how it went, as write_linked would have.  Holds its paths and
    its DirSync alive while the render runs."""

    cdef FileSinkC c
    cdef bytes dirpath, name, tmp
    cdef DirSync sync
    cdef readonly object capsule

    def __cinit__(self, bytes dirpath, bytes name, DirSync sync=None):
        self.dirpath, self.name, self.tmp, self.sync = dirpath, name, tmp_name(name), sync
        self.c.write = file_sink_write
        self.c.dpath = PyBytes_AS_STRING(self.dirpath)
        self.c.name = PyBytes_AS_STRING(self.name)
        self.c.tmp = PyBytes_AS_STRING(self.tmp)
        self.c.sync = &sync.c if sync is not None else NULL
        self.c.err = -2                       # not written yet
        self.capsule = PyCapsule_New(&self.c, SINK_CAPSULE, NULL)

    def result(self):
        """None when written, NOT_HERE, or raises OSError as write_linked does."""
        if self.c.err == -2:
            raise RuntimeError("the sink was never written")
        return result(self.c.err, self.c.step, self.dirpath, self.name)
