# C declarations shared by worker/_entries.pyx's units (_native/*.pxi): the parts of
# CPython's C API they call directly, where Cython has no declaration of its own.

from cpython.ref cimport PyObject


cdef extern from "Python.h":
    # A slot of a __slots__ class: its member descriptor holds where it lives in the
    # object (CPython's public structmember API).  Setting and reading a Job's fields
    # through it skips the frozen dataclass's __setattr__ and the descriptor's Python
    # call (docs/benchmarks.md, "The read path").
    ctypedef struct PyMemberDef:
        pass
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member
    int PyMember_SetOne(char* addr, PyMemberDef* m, object v) except -1
    object PyMember_GetOne(const char* addr, PyMemberDef* m)
    object PyUnicode_DecodeASCII(const char* s, Py_ssize_t size, const char* errors)

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
    # grown key by key.
    dict PyDict_Copy(object d)
    int PyDict_SetItem(object d, object key, object value) except -1
    # NULL and no exception set: not there (a borrowed reference otherwise)
    PyObject* PyDict_GetItemWithError(object d, object key) except? NULL
