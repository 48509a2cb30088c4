# The CPython C API the renderer reads that Cython's own cpython/*.pxd do not declare (as
# asyncpg's protocol/python.pxd and pgproto's cpythonx.pxd do): the str internals
# text.pxi reads the fields' text by.

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)
    int PyUnicode_1BYTE_KIND
    # PyUnicode_READ is a macro over plain memory: safe without the GIL while the str
    # is kept alive (shaped_fill reads the fields' text that way)
    Py_UCS4 PyUnicode_READ_nogil "PyUnicode_READ" (int kind, const void* data,
                                                  Py_ssize_t index) noexcept nogil
