# worker/_entries.pyx: the common entry's fields -> Job (fast_job), a subset of parse_job.

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
