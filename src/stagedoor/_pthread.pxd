# The POSIX threads the extensions use without the GIL, declared once: the render
# pool's threads and their queue (render/_native/pool.pxi, in stagedoor._render) and the
# shared directory fsync's mutex and condition, and the temporary names' thread id
# (tickets/_durable.pyx).  Declarations only: `from stagedoor._pthread cimport ...`
# needs no module of its own at run time.

cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    ctypedef struct pthread_cond_t:
        pass
    ctypedef unsigned long pthread_t
    ctypedef struct pthread_attr_t:
        pass
    int pthread_mutex_init(pthread_mutex_t*, void*)
    int pthread_mutex_destroy(pthread_mutex_t*)
    int pthread_mutex_lock(pthread_mutex_t*)
    int pthread_mutex_unlock(pthread_mutex_t*)
    int pthread_cond_init(pthread_cond_t*, void*)
    int pthread_cond_destroy(pthread_cond_t*)
    int pthread_cond_wait(pthread_cond_t*, pthread_mutex_t*)
    int pthread_cond_signal(pthread_cond_t*)
    int pthread_cond_broadcast(pthread_cond_t*)
    int pthread_create(pthread_t*, const pthread_attr_t*, void* (*)(void*) noexcept nogil,
                       void*)
    int pthread_join(pthread_t, void**)
    pthread_t pthread_self()
