# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Native ticket renderer: the same bytes as stagedoor.render.render_order, GIL released.

Why the split: the Python part only turns the order's strings into C buffers (cp1252
bytes straight from the str data; the rare field that needs an approximation goes
through stagedoor.render.encode_text for it and its ActualText hex); everything
else runs in C inside `with nogil:` -- the QR code, the content stream, deflate through
zlib's C API, the xref table -- so threads render in parallel.  The static part of the
page (border, header bar, labels) is compressed once at import and shared by every page.

Where the time went (perf + callgrind, one ticket): first the QR mask choice (branchy
penalty scoring, now 64-bit row/column bitsets for versions 1-10), then deflate (level 1,
memLevel 4, and a third less input by drawing the QR as greedy rectangles), then setting
up deflate per stream (its state now lives in a pooled scratch area, reset not rebuilt).

The layout and the QR algorithm mirror stagedoor/render.py and stagedoor/qr.py step by
step; change both together (tests/test_render.py compares them byte for byte).
"""

from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, memset, strlen
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport (
    PyUnicode_AsUTF8AndSize,
    PyUnicode_DATA,
    PyUnicode_GET_LENGTH,
    PyUnicode_KIND,
    PyUnicode_READ,
)
from cpython.pythread cimport (
    WAIT_LOCK,
    PyThread_acquire_lock,
    PyThread_allocate_lock,
    PyThread_release_lock,
    PyThread_type_lock,
)

ctypedef unsigned long long u64

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)

# -- tables (written once at import, read-only afterwards) ----------------------------

cdef int ECC_M_PER_BLOCK[41]
cdef int ECC_M_BLOCKS[41]
cdef unsigned char GF_EXP[512]
cdef unsigned char GF_LOG[256]

_per_block = (
    -1, 10, 16, 26, 18, 24, 16, 18, 22, 22, 26, 30, 22, 22, 24, 24, 28, 28, 26, 26, 26,
    26, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28)
_blocks = (
    -1, 1, 1, 1, 2, 2, 4, 4, 4, 5, 5, 5, 8, 9, 9, 10, 10, 11, 13, 14, 16,
    17, 17, 18, 20, 21, 23, 25, 26, 28, 29, 31, 33, 35, 37, 38, 40, 43, 45, 47, 49)


cdef void _init_tables() noexcept:
    cdef int i, x = 1
    for i in range(41):
        ECC_M_PER_BLOCK[i] = _per_block[i]
        ECC_M_BLOCKS[i] = _blocks[i]
    GF_LOG[0] = 0
    for i in range(255):
        GF_EXP[i] = <unsigned char>x
        GF_LOG[x] = <unsigned char>i
        x <<= 1
        if x & 0x100:
            x ^= 0x11D
    for i in range(255, 512):
        GF_EXP[i] = GF_EXP[i - 255]


_init_tables()

# -- byte buffer ------------------------------------------------------------------------

cdef int buf_reserve(Buf* b, Py_ssize_t extra) noexcept nogil:
    cdef Py_ssize_t cap
    cdef char* p
    if b.failed:
        return -1
    if b.len + extra <= b.cap:
        return 0
    cap = b.cap * 2 if b.cap else 4096
    while cap < b.len + extra:
        cap *= 2
    p = <char*>realloc(b.data, cap)
    if p == NULL:
        b.failed = 1
        return -1
    b.data = p
    b.cap = cap
    return 0


cdef inline void buf_put(Buf* b, const char* s, Py_ssize_t n) noexcept nogil:
    if buf_reserve(b, n) == 0:
        memcpy(b.data + b.len, s, n)
        b.len += n


cdef inline void buf_puts(Buf* b, const char* s) noexcept nogil:
    buf_put(b, s, <Py_ssize_t>strlen(s))


cdef inline void buf_byte(Buf* b, char c) noexcept nogil:
    if buf_reserve(b, 1) == 0:
        b.data[b.len] = c
        b.len += 1


cdef void buf_int(Buf* b, long v) noexcept nogil:
    cdef char tmp[24]
    cdef int i = 24
    cdef unsigned long u
    if v < 0:
        buf_byte(b, b'-')
        u = <unsigned long>(-v)
    else:
        u = <unsigned long>v
    while True:
        i -= 1
        tmp[i] = <char>(48 + u % 10)
        u //= 10
        if u == 0:
            break
    buf_put(b, tmp + i, 24 - i)


cdef void buf_int10(Buf* b, long v) noexcept nogil:
    """Ten digits, zero padded (xref offsets)."""
    cdef char tmp[10]
    cdef int i
    for i in range(9, -1, -1):
        tmp[i] = <char>(48 + v % 10)
        v //= 10
    buf_put(b, tmp, 10)


cdef void buf_milli(Buf* b, long v) noexcept nogil:
    """v / 1000 with three decimals, no locale involved."""
    if v < 0:
        buf_byte(b, b'-')
        v = -v
    buf_int(b, v // 1000)
    buf_byte(b, b'.')
    buf_byte(b, <char>(48 + (v // 100) % 10))
    buf_byte(b, <char>(48 + (v // 10) % 10))
    buf_byte(b, <char>(48 + v % 10))

# -- QR code (see stagedoor/qr.py for the reference and the rules) ---------------------

cdef inline int gf_mul(int a, int b) noexcept nogil:
    if a == 0 or b == 0:
        return 0
    return GF_EXP[GF_LOG[a] + GF_LOG[b]]


cdef int raw_data_modules(int ver) noexcept nogil:
    cdef int result = (16 * ver + 128) * ver + 64
    cdef int num_align
    if ver >= 2:
        num_align = ver // 7 + 2
        result -= (25 * num_align - 10) * num_align - 55
        if ver >= 7:
            result -= 36
    return result


cdef inline int data_codewords(int ver) noexcept nogil:
    return raw_data_modules(ver) // 8 - ECC_M_PER_BLOCK[ver] * ECC_M_BLOCKS[ver]


cdef int needs_eci(const unsigned char* data, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if data[i] >= 0x80:
            return 1
    return 0


cdef int choose_version(const unsigned char* data, Py_ssize_t n) noexcept nogil:
    cdef int ver
    cdef long bits
    cdef int eci = needs_eci(data, n)
    for ver in range(1, QR_MAX_VERSION + 1):
        bits = (12 if eci else 0) + 4 + (8 if ver <= 9 else 16) + 8 * n
        if bits <= data_codewords(ver) * 8:
            return ver
    return -1


cdef struct BitWriter:
    unsigned char* out
    int nbits


cdef inline void put_bits(BitWriter* w, unsigned int value, int n) noexcept nogil:
    cdef int i
    for i in range(n - 1, -1, -1):
        if (value >> i) & 1:
            w.out[w.nbits >> 3] |= <unsigned char>(0x80 >> (w.nbits & 7))
        w.nbits += 1


cdef void data_codeword_bytes(const unsigned char* data, Py_ssize_t n, int ver,
                              unsigned char* out) noexcept nogil:
    cdef int total = data_codewords(ver)
    cdef BitWriter w
    cdef Py_ssize_t i
    cdef int capacity = total * 8, k, pad
    memset(out, 0, total)
    w.out = out
    w.nbits = 0
    if needs_eci(data, n):
        put_bits(&w, 0b0111, 4)
        put_bits(&w, 26, 8)
    put_bits(&w, 0b0100, 4)
    put_bits(&w, <unsigned int>n, 8 if ver <= 9 else 16)
    for i in range(n):
        put_bits(&w, data[i], 8)
    k = capacity - w.nbits
    w.nbits += 4 if k > 4 else k          # terminator (zeros)
    w.nbits += (-w.nbits) & 7             # to a byte boundary (zeros)
    pad = 0xEC
    for k in range(w.nbits >> 3, total):
        out[k] = <unsigned char>pad
        pad ^= 0xEC ^ 0x11


cdef void rs_divisor(int degree, unsigned char* result) noexcept nogil:
    cdef int i, j, root = 1
    memset(result, 0, degree)
    result[degree - 1] = 1
    for i in range(degree):
        for j in range(degree):
            result[j] = <unsigned char>gf_mul(result[j], root)
            if j + 1 < degree:
                result[j] ^= result[j + 1]
        root = gf_mul(root, 2)


cdef void rs_remainder(const unsigned char* data, int n, const unsigned char* divisor,
                       int degree, unsigned char* result) noexcept nogil:
    cdef int i, j, factor, lf
    memset(result, 0, degree)
    for i in range(n):
        factor = data[i] ^ result[0]
        for j in range(degree - 1):
            result[j] = result[j + 1]
        result[degree - 1] = 0
        if factor:
            lf = GF_LOG[factor]
            for j in range(degree):
                if divisor[j]:
                    result[j] ^= GF_EXP[GF_LOG[divisor[j]] + lf]


cdef void add_ecc_and_interleave(const unsigned char* data, int ver,
                                 unsigned char* out) noexcept nogil:
    cdef int num_blocks = ECC_M_BLOCKS[ver]
    cdef int ecc_len = ECC_M_PER_BLOCK[ver]
    cdef int raw_codewords = raw_data_modules(ver) // 8
    cdef int num_short = num_blocks - raw_codewords % num_blocks
    cdef int short_len = raw_codewords // num_blocks
    cdef unsigned char divisor[32]
    cdef unsigned char ecc[64 * 32]      # 49 blocks at most, 30 ecc bytes each
    cdef int block_start[64]
    cdef int block_len[64]
    cdef int i, j, k = 0, o = 0
    rs_divisor(ecc_len, divisor)
    for i in range(num_blocks):
        block_start[i] = k
        block_len[i] = short_len - ecc_len + (0 if i < num_short else 1)
        rs_remainder(data + k, block_len[i], divisor, ecc_len, ecc + i * 32)
        k += block_len[i]
    for i in range(short_len - ecc_len + 1):
        for j in range(num_blocks):
            if i < block_len[j]:
                out[o] = data[block_start[j] + i]
                o += 1
    for i in range(ecc_len):
        for j in range(num_blocks):
            out[o] = ecc[j * 32 + i]
            o += 1


cdef inline void set_func(QR* q, int x, int y, int dark) noexcept nogil:
    q.dark[y * q.size + x] = 1 if dark else 0
    q.func[y * q.size + x] = 1


cdef int alignment_positions(int ver, int* out) noexcept nogil:
    cdef int num_align, step, size, pos, i, count
    if ver == 1:
        return 0
    num_align = ver // 7 + 2
    step = (ver * 8 + num_align * 3 + 5) // (num_align * 4 - 4) * 2
    size = ver * 4 + 17
    out[0] = 6
    # the reference inserts size-7, size-7-step, ... at index 1; same list, built backwards
    pos = size - 7
    for i in range(num_align - 1, 0, -1):
        out[i] = pos
        pos -= step
    count = num_align
    return count


cdef void draw_format_bits(QR* q, int mask) noexcept nogil:
    cdef int data = (0 << 3) | mask          # ECC level M = 0b00
    cdef int rem = data, i, bits, size = q.size
    for i in range(10):
        rem = (rem << 1) ^ ((rem >> 9) * 0x537)
    bits = ((data << 10) | rem) ^ 0x5412
    for i in range(6):
        set_func(q, 8, i, (bits >> i) & 1)
    set_func(q, 8, 7, (bits >> 6) & 1)
    set_func(q, 8, 8, (bits >> 7) & 1)
    set_func(q, 7, 8, (bits >> 8) & 1)
    for i in range(9, 15):
        set_func(q, 14 - i, 8, (bits >> i) & 1)
    for i in range(8):
        set_func(q, size - 1 - i, 8, (bits >> i) & 1)
    for i in range(8, 15):
        set_func(q, 8, size - 15 + i, (bits >> i) & 1)
    set_func(q, 8, size - 8, 1)


cdef void draw_version(QR* q) noexcept nogil:
    cdef int rem, bits, i, a, b, dark
    if q.ver < 7:
        return
    rem = q.ver
    for i in range(12):
        rem = (rem << 1) ^ ((rem >> 11) * 0x1F25)
    bits = (q.ver << 12) | rem
    for i in range(18):
        dark = (bits >> i) & 1
        a = q.size - 11 + i % 3
        b = i // 3
        set_func(q, a, b, dark)
        set_func(q, b, a, dark)


cdef inline int iabs(int v) noexcept nogil:
    return -v if v < 0 else v


cdef void draw_function_patterns(QR* q) noexcept nogil:
    cdef int size = q.size, i, j, dx, dy, x, y, n, c, dist
    cdef int cx[3]
    cdef int cy[3]
    cdef int pos[8]
    for i in range(size):
        set_func(q, 6, i, i % 2 == 0)
        set_func(q, i, 6, i % 2 == 0)
    cx[0] = 3; cy[0] = 3
    cx[1] = size - 4; cy[1] = 3
    cx[2] = 3; cy[2] = size - 4
    for c in range(3):
        for dy in range(-4, 5):
            for dx in range(-4, 5):
                x = cx[c] + dx
                y = cy[c] + dy
                if 0 <= x < size and 0 <= y < size:
                    dist = iabs(dx) if iabs(dx) > iabs(dy) else iabs(dy)
                    set_func(q, x, y, dist != 2 and dist != 4)
    n = alignment_positions(q.ver, pos)
    for i in range(n):
        for j in range(n):
            if (i == 0 and j == 0) or (i == 0 and j == n - 1) or (i == n - 1 and j == 0):
                continue
            for dy in range(-2, 3):
                for dx in range(-2, 3):
                    dist = iabs(dx) if iabs(dx) > iabs(dy) else iabs(dy)
                    set_func(q, pos[i] + dx, pos[j] + dy, dist != 1)
    draw_format_bits(q, 0)
    draw_version(q)


cdef void draw_codewords(QR* q, const unsigned char* cw, int ncw) noexcept nogil:
    cdef int size = q.size, i = 0, total = ncw * 8
    cdef int right = size - 1, vert, j, x, y, upward
    while right >= 1:
        if right == 6:
            right = 5
        upward = ((right + 1) & 2) == 0
        for vert in range(size):
            y = size - 1 - vert if upward else vert
            for j in range(2):
                x = right - j
                if not q.func[y * size + x] and i < total:
                    q.dark[y * size + x] = (cw[i >> 3] >> (7 - (i & 7))) & 1
                    i += 1
        right -= 2


cdef inline int mask_bit(int mask, int x, int y) noexcept nogil:
    if mask == 0:
        return (x + y) % 2 == 0
    if mask == 1:
        return y % 2 == 0
    if mask == 2:
        return x % 3 == 0
    if mask == 3:
        return (x + y) % 3 == 0
    if mask == 4:
        return (x // 3 + y // 2) % 2 == 0
    if mask == 5:
        return x * y % 2 + x * y % 3 == 0
    if mask == 6:
        return (x * y % 2 + x * y % 3) % 2 == 0
    return ((x + y) % 2 + x * y % 3) % 2 == 0


cdef void apply_mask(QR* q, int mask) noexcept nogil:
    cdef int size = q.size, x, y, k
    for y in range(size):
        for x in range(size):
            k = y * size + x
            if not q.func[k] and mask_bit(mask, x, y):
                q.dark[k] ^= 1


cdef int line_penalty(const unsigned char* m, int start, int stride, int size) noexcept nogil:
    """N1 (runs of 5+) and N3 (finder-like 1011101 with 4 light on a side) on one line."""
    cdef int score = 0, run = 1, i, x, k, light
    cdef unsigned char v[QR_MAX_SIZE]
    for i in range(size):
        v[i] = m[start + i * stride]
    for i in range(1, size + 1):
        if i < size and v[i] == v[i - 1]:
            run += 1
            continue
        if run >= 5:
            score += 3 + (run - 5)
        run = 1
    for x in range(size - 6):
        if (v[x] and not v[x + 1] and v[x + 2] and v[x + 3] and v[x + 4]
                and not v[x + 5] and v[x + 6]):
            light = 1
            for k in range(x - 4 if x >= 4 else 0, x):
                if v[k]:
                    light = 0
                    break
            if not light:
                light = 1
                for k in range(x + 7, x + 11 if x + 11 < size else size):
                    if v[k]:
                        light = 0
                        break
            if light:
                score += 40
    return score


cdef int penalty(QR* q) noexcept nogil:
    cdef int size = q.size, score = 0, i, x, y, dark = 0, total
    cdef const unsigned char* m = q.dark
    cdef unsigned char c
    for i in range(size):
        score += line_penalty(m, i * size, 1, size)
        score += line_penalty(m, i, size, size)
    for y in range(size - 1):
        for x in range(size - 1):
            c = m[y * size + x]
            if (c == m[y * size + x + 1] and c == m[(y + 1) * size + x]
                    and c == m[(y + 1) * size + x + 1]):
                score += 3
    for i in range(size * size):
        dark += m[i]
    total = size * size
    score += iabs(dark * 2 - total) * 10 // total * 10
    return score


# Fast path for versions 1..10 (at most 57 modules a side): every row and column is a
# 64-bit word, and the penalty rules become shifts, ands and popcounts, without the
# data-dependent branches that dominate the scalar version (profiled: 60% of a render).
# PAT_R/PAT_C hold, per version and mask, the bits the mask flips (data modules only)
# plus the format bits that differ from those of mask 0, so that
# rows = base ^ PAT_R[ver][mask] is exactly the masked symbol.  Results are the same as
# penalty() (the tests compare every version against stagedoor.qr).
cdef enum:
    FAST_MAX_VERSION = 10

cdef inline int popcount64(u64 x) noexcept nogil:
    # SWAR: no libgcc call and no -mpopcnt (which not every x86-64 has)
    x = x - ((x >> 1) & 0x5555555555555555ULL)
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL)
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL
    return <int>((x * 0x0101010101010101ULL) >> 56)


cdef u64 PAT_R[FAST_MAX_VERSION + 1][8][64]
cdef u64 PAT_C[FAST_MAX_VERSION + 1][8][64]


cdef void _init_patterns() except *:
    cdef QR* t = <QR*>malloc(sizeof(QR))
    cdef QR* t2 = <QR*>malloc(sizeof(QR))
    cdef int ver, m, x, y, k, bit
    if t == NULL or t2 == NULL:
        free(t)
        free(t2)
        raise MemoryError()
    memset(PAT_R, 0, sizeof(PAT_R))
    memset(PAT_C, 0, sizeof(PAT_C))
    for ver in range(1, FAST_MAX_VERSION + 1):
        t.ver = ver
        t.size = ver * 4 + 17
        memset(t.dark, 0, sizeof(t.dark))
        memset(t.func, 0, sizeof(t.func))
        draw_function_patterns(t)
        for m in range(8):
            memcpy(t2, t, sizeof(QR))
            draw_format_bits(t2, m)
            for y in range(t.size):
                for x in range(t.size):
                    k = y * t.size + x
                    bit = (t2.dark[k] ^ t.dark[k]) | (not t.func[k] and mask_bit(m, x, y))
                    if bit:
                        PAT_R[ver][m][y] |= (<u64>1) << x
                        PAT_C[ver][m][x] |= (<u64>1) << y
    free(t)
    free(t2)


cdef inline int bits_line_penalty(u64 r, int size) noexcept nogil:
    """N1 + N3 of one line held in the low `size` bits of r (bit i = module i)."""
    cdef u64 e, w, st, f, d, a, rp
    cdef int score
    e = ~(r ^ (r >> 1)) & (((<u64>1) << (size - 1)) - 1)   # v[i] == v[i+1]
    w = e & (e >> 1) & (e >> 2) & (e >> 3)                   # v[i..i+4] equal
    st = w & ~(e << 1)                                       # ... and a run starts at i
    f = (r & ~(r >> 1) & (r >> 2) & (r >> 3) & (r >> 4) & ~(r >> 5) & (r >> 6)
         & (((<u64>1) << (size - 6)) - 1))                   # 1011101 at i
    rp = r << 4
    d = rp | (rp >> 1) | (rp >> 2) | (rp >> 3)               # dark in [i-4, i)
    a = (r >> 7) | (r >> 8) | (r >> 9) | (r >> 10)           # dark in [i+7, i+11)
    # a run of L >= 5 has L-4 windows of five and one start: (L-4) + 2 = 3 + (L-5)
    score = (popcount64(w) + 2 * popcount64(st)) if w else 0
    f &= ~(d & a)
    return score + 40 * popcount64(f) if f else score   # finder-like runs are rare


cdef int bits_penalty(const u64* rows, const u64* cols, int size) noexcept nogil:
    cdef int score = 0, i, dark = 0, total = size * size
    cdef u64 v, h, lim = ((<u64>1) << (size - 1)) - 1
    for i in range(size):
        score += bits_line_penalty(rows[i], size) + bits_line_penalty(cols[i], size)
        dark += popcount64(rows[i])
    for i in range(size - 1):
        v = ~(rows[i] ^ rows[i + 1])
        h = ~(rows[i] ^ (rows[i] >> 1))
        score += 3 * popcount64(v & (v >> 1) & h & lim)
    score += iabs(dark * 2 - total) * 10 // total * 10
    return score


cdef int choose_mask_fast(QR* q) noexcept nogil:
    cdef u64 base_r[64]
    cdef u64 base_c[64]
    cdef u64 rows[64]
    cdef u64 cols[64]
    cdef int size = q.size, x, y, m, score, best_mask = 0, best_score = -1
    cdef u64 bit
    memset(base_r, 0, sizeof(base_r))
    memset(base_c, 0, sizeof(base_c))
    for y in range(size):
        for x in range(size):
            bit = q.dark[y * size + x]
            base_r[y] |= bit << x
            base_c[x] |= bit << y
    for m in range(8):
        for y in range(size):
            rows[y] = base_r[y] ^ PAT_R[q.ver][m][y]
            cols[y] = base_c[y] ^ PAT_C[q.ver][m][y]
        score = bits_penalty(rows, cols, size)
        if best_score < 0 or score < best_score:
            best_mask = m
            best_score = score
    return best_mask


cdef void apply_mask_fast(QR* q, int mask) noexcept nogil:
    """apply_mask from the PAT_R bits (format cells flip too; draw_format_bits follows)."""
    cdef int size = q.size, x, y
    cdef u64 r
    for y in range(size):
        r = PAT_R[q.ver][mask][y]
        for x in range(size):
            q.dark[y * size + x] ^= <unsigned char>((r >> x) & 1)


cdef int qr_encode(QR* q, const unsigned char* data, Py_ssize_t n) noexcept nogil:
    """Fill q with the symbol for data; -1 when it does not fit version 40."""
    cdef unsigned char dcw[QR_MAX_CODEWORDS]
    cdef unsigned char cw[QR_MAX_CODEWORDS]
    cdef int ver = choose_version(data, n)
    cdef int mask, score, best_mask = 0, best_score = -1
    if ver < 0:
        return -1
    q.ver = ver
    q.size = ver * 4 + 17
    memset(q.dark, 0, q.size * q.size)
    memset(q.func, 0, q.size * q.size)
    data_codeword_bytes(data, n, ver, dcw)
    add_ecc_and_interleave(dcw, ver, cw)
    draw_function_patterns(q)
    draw_codewords(q, cw, raw_data_modules(ver) // 8)
    if ver <= FAST_MAX_VERSION:
        best_mask = choose_mask_fast(q)
        apply_mask_fast(q, best_mask)
        draw_format_bits(q, best_mask)
        return 0
    for mask in range(8):
        apply_mask(q, mask)
        draw_format_bits(q, mask)
        score = penalty(q)
        if best_score < 0 or score < best_score:
            best_mask = mask
            best_score = score
        apply_mask(q, mask)
    apply_mask(q, best_mask)
    draw_format_bits(q, best_mask)
    return 0

_init_patterns()

# -- the PDF ----------------------------------------------------------------------------

cdef enum:
    ZLIB_LEVEL = 1               # Z_BEST_SPEED: 2.5x faster than 6, streams ~16% larger
    ZLIB_WBITS = 15
    ZLIB_MEMLEVEL = 4            # a 4 KB hash instead of 64 KB: deflateReset clears it per stream
    WRAP = 110
    PAGE_W = 420
    PAGE_H = 298
    QR_X = 288
    QR_TOP = 246
    QR_SIDE = 116
    FIRST_PAGE_OBJ = 7

cdef const char* STATIC_CONTENT = (
    b"q\n0.8 w 0 0 0 RG\n12 12 396 274 re S\n0.11 0.16 0.29 rg\n12 250 396 36 re f\nQ\n"
    b"BT\n/F2 8 Tf 1 1 1 rg\n1 0 0 1 340 264 Tm (STAGEDOOR) Tj\n"
    b"/F1 6.5 Tf 0.4 0.4 0.4 rg\n"
    b"1 0 0 1 24 238 Tm (VENUE) Tj\n"
    b"1 0 0 1 24 212 Tm (DATE / TIME) Tj\n"
    b"1 0 0 1 24 186 Tm (SECTION) Tj\n"
    b"1 0 0 1 130 186 Tm (ROW) Tj\n"
    b"1 0 0 1 180 186 Tm (SEAT) Tj\n"
    b"1 0 0 1 24 160 Tm (BUYER) Tj\n"
    b"1 0 0 1 24 134 Tm (PRICE) Tj\n"
    b"1 0 0 1 130 134 Tm (ORDER) Tj\n"
    b"1 0 0 1 24 108 Tm (ADMISSION CODE) Tj\n"
    b"ET\n"
)

cdef const char* FIELD_OPS[NFIELDS]
FIELD_OPS[0] = b"/F2 14 Tf 1 1 1 rg 24 262 Td"
FIELD_OPS[1] = b"/F2 11 Tf 0 0 0 rg 24 227 Td"
FIELD_OPS[2] = b"/F1 11 Tf 0 0 0 rg 24 201 Td"
FIELD_OPS[3] = b"/F2 11 Tf 0 0 0 rg 24 175 Td"
FIELD_OPS[4] = b"/F2 11 Tf 0 0 0 rg 130 175 Td"
FIELD_OPS[5] = b"/F2 11 Tf 0 0 0 rg 180 175 Td"
FIELD_OPS[6] = b"/F2 11 Tf 0 0 0 rg 24 149 Td"
FIELD_OPS[7] = b"/F1 11 Tf 0 0 0 rg 24 123 Td"
FIELD_OPS[8] = b"/F1 11 Tf 0 0 0 rg 130 123 Td"
FIELD_OPS[9] = b"/F2 10 Tf 0 0 0 rg 24 97 Td"
cdef const char* SMALL_PRINT_OPS = b"/F1 5 Tf 0.3 0.3 0.3 rg 6 TL 24 80 Td"

cdef const char* HEADER = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"
cdef const char* OBJ_CATALOG = b"1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n"
cdef const char* OBJ_FONTS = (
    b"3 0 obj\n<< /Font << /F1 4 0 R /F2 5 0 R >> >>\nendobj\n")
# WinAnsi plus the Central European letters of render.EXTRA_GLYPHS on unused codes
cdef bytes DEF_ENCODING = (
    b"<< /Type /Encoding /BaseEncoding /WinAnsiEncoding /Differences [1 /Aogonek /aogonek "
    b"/Cacute /cacute /Eogonek /eogonek /Lslash /lslash /Nacute /nacute /Sacute /sacute "
    b"/Zacute /zacute /Zdotaccent /zdotaccent /Ccaron /ccaron /Dcaron /dcaron /Ecaron "
    b"/ecaron /Ncaron /ncaron /Rcaron /rcaron /Tcaron /tcaron /Uring /uring /Ohungarumlaut "
    b"127 /ohungarumlaut 129 /Uhungarumlaut 141 /uhungarumlaut 143 /Dcroat /dcroat] >>")
cdef bytes _OBJ_HELVETICA = (b"4 0 obj\n<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding "
                  + DEF_ENCODING + b" >>\nendobj\n")
cdef bytes _OBJ_HELVETICA_BOLD = (b"5 0 obj\n<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold "
                       b"/Encoding " + DEF_ENCODING + b" >>\nendobj\n")
cdef const char* OBJ_HELVETICA = _OBJ_HELVETICA          # the module keeps the bytes alive
cdef const char* OBJ_HELVETICA_BOLD = _OBJ_HELVETICA_BOLD


# object 6, built and compressed once at import
cdef Buf STATIC_STREAM


cdef void put_escaped(Buf* b, const char* s, Py_ssize_t n) noexcept nogil:
    """( ) \\ escaped; codes 10 and 13 (letters of EXTRA_GLYPHS) as \\n and \\r."""
    cdef Py_ssize_t i
    cdef char c
    if buf_reserve(b, 2 * n) != 0:
        return
    for i in range(n):
        c = s[i]
        if c == b'(' or c == b')' or c == b'\\':
            b.data[b.len] = b'\\'
            b.len += 1
        elif c == 10 or c == 13:
            b.data[b.len] = b'\\'
            b.data[b.len + 1] = b'n' if c == 10 else b'r'
            b.len += 2
            continue
        b.data[b.len] = c
        b.len += 1


cdef inline void span_open(Buf* b, const Text* t) noexcept nogil:
    if t.an:
        buf_puts(b, b"/Span << /ActualText <")
        buf_put(b, t.act, t.an)
        buf_puts(b, b"> >> BDC\n")


cdef inline void span_close(Buf* b, const Text* t) noexcept nogil:
    if t.an:
        buf_puts(b, b"EMC\n")


cdef void put_small_print(Buf* b, const Text* t) noexcept nogil:
    cdef Py_ssize_t pos = 0, n = t.n, i, cut, first = 1
    cdef const char* s = t.s
    while pos < n:
        while pos < n and s[pos] == b' ':
            pos += 1
        if pos >= n:
            break
        if first:
            span_open(b, t)
            buf_puts(b, b"BT ")
            buf_puts(b, SMALL_PRINT_OPS)
            buf_puts(b, b" (")
            first = 0
        else:
            buf_puts(b, b" T* (")
        if n - pos <= WRAP:
            put_escaped(b, s + pos, n - pos)
            buf_puts(b, b") Tj")
            break
        cut = -1
        for i in range(pos + WRAP, pos - 1, -1):
            if s[i] == b' ':
                cut = i
                break
        if cut <= pos:
            put_escaped(b, s + pos, WRAP)
            pos += WRAP
        else:
            put_escaped(b, s + pos, cut - pos)
            pos = cut
        buf_puts(b, b") Tj")
    if not first:
        buf_puts(b, b" ET\n")
        span_close(b, t)


cdef inline char* put_small(char* p, int v) noexcept nogil:
    """Decimal of 0 <= v < 1000000 at p; returns the end."""
    cdef char tmp[8]
    cdef int i = 8
    while True:
        i -= 1
        tmp[i] = <char>(48 + v % 10)
        v //= 10
        if v == 0:
            break
    memcpy(p, tmp + i, 8 - i)
    return p + 8 - i


cdef void put_qr(Buf* b, QR* q, unsigned char* used) noexcept nogil:
    """The dark modules as filled rectangles: greedy, each as wide, then as tall, as it
    can grow over modules not yet covered (a third fewer than one per run)."""
    cdef int size = q.size, x, y, i, h, start, ok, yy
    cdef long scale = QR_SIDE * 1000 // (size + 8)
    cdef const unsigned char* dark = q.dark
    cdef char* p
    buf_puts(b, b"q 0 0 0 rg ")
    buf_milli(b, scale)
    buf_puts(b, b" 0 0 ")
    buf_milli(b, -scale)
    buf_byte(b, b' ')
    buf_milli(b, QR_X * 1000 + 4 * scale)
    buf_byte(b, b' ')
    buf_milli(b, QR_TOP * 1000 - 4 * scale)
    buf_puts(b, b" cm\n")
    memset(used, 0, size * size)
    for y in range(size):
        x = 0
        while x < size:
            if not dark[y * size + x] or used[y * size + x]:
                x += 1
                continue
            start = x
            while x < size and dark[y * size + x] and not used[y * size + x]:
                x += 1
            h = 1
            while y + h < size:
                ok = 1
                for i in range(start, x):
                    if not dark[(y + h) * size + i] or used[(y + h) * size + i]:
                        ok = 0
                        break
                if not ok:
                    break
                h += 1
            for yy in range(y, y + h):
                memset(used + yy * size + start, 1, x - start)
            if buf_reserve(b, 40) != 0:
                return
            p = b.data + b.len
            p = put_small(p, start)
            p[0] = b' '
            p = put_small(p + 1, y)
            p[0] = b' '
            p = put_small(p + 1, x - start)
            p[0] = b' '
            p = put_small(p + 1, h)
            memcpy(p, b" re\n", 4)
            b.len = (p + 4) - b.data
    buf_puts(b, b"f Q\n")


# -- scratch pool -------------------------------------------------------------------------

cdef enum:
    POOL_MAX = 16                 # idle scratch areas kept (more threads allocate more)
    KEEP_BUF_MAX = 1 << 20        # buffers grown beyond this are freed, not pooled

cdef PyThread_type_lock POOL_LOCK = PyThread_allocate_lock()
cdef Scratch* POOL = NULL
cdef int POOL_SIZE = 0


cdef inline void buf_trim(Buf* b) noexcept nogil:
    if b.failed or b.cap > KEEP_BUF_MAX:
        free(b.data)
        memset(b, 0, sizeof(Buf))
    b.len = 0


cdef void scratch_free(Scratch* s) noexcept nogil:
    if s.zinit:
        deflateEnd(&s.zs)
    free(s.content.data)
    free(s.z.data)
    free(s.out.data)
    free(s)


cdef Scratch* scratch_get() noexcept nogil:
    global POOL, POOL_SIZE
    cdef Scratch* s = NULL
    PyThread_acquire_lock(POOL_LOCK, WAIT_LOCK)
    if POOL != NULL:
        s = POOL
        POOL = s.next
        POOL_SIZE -= 1
    PyThread_release_lock(POOL_LOCK)
    if s == NULL:
        s = <Scratch*>calloc(1, sizeof(Scratch))
    return s


cdef void scratch_put(Scratch* s) noexcept nogil:
    global POOL, POOL_SIZE
    buf_trim(&s.content)
    buf_trim(&s.z)
    buf_trim(&s.out)
    PyThread_acquire_lock(POOL_LOCK, WAIT_LOCK)
    if POOL_SIZE < POOL_MAX:
        s.next = POOL
        POOL = s
        POOL_SIZE += 1
        s = NULL
    PyThread_release_lock(POOL_LOCK)
    if s != NULL:
        scratch_free(s)


cdef int put_stream(Buf* out, int num, const char* content, Py_ssize_t n,
                    Scratch* s) noexcept nogil:
    """Object `num`: content deflated (zlib format, ZLIB_* parameters) into out."""
    cdef uLong bound
    cdef int rc
    if not s.zinit:
        if deflateInit2(&s.zs, ZLIB_LEVEL, Z_DEFLATED, ZLIB_WBITS, ZLIB_MEMLEVEL,
                        Z_DEFAULT_STRATEGY) != Z_OK:
            return -2
        s.zinit = 1
    elif deflateReset(&s.zs) != Z_OK:
        return -2
    bound = deflateBound(&s.zs, <uLong>n)
    s.z.len = 0
    if buf_reserve(&s.z, <Py_ssize_t>bound) != 0:
        return -1
    s.zs.next_in = <Bytef*>content
    s.zs.avail_in = <uInt>n
    s.zs.next_out = <Bytef*>s.z.data
    s.zs.avail_out = <uInt>bound
    rc = deflate(&s.zs, Z_FINISH)
    if rc != Z_STREAM_END:
        return -2
    s.z.len = <Py_ssize_t>(bound - s.zs.avail_out)
    buf_int(out, num)
    buf_puts(out, b" 0 obj\n<< /Length ")
    buf_int(out, <long>s.z.len)
    buf_puts(out, b" /Filter /FlateDecode >>\nstream\n")
    buf_put(out, s.z.data, s.z.len)
    buf_puts(out, b"\nendstream\nendobj\n")
    return 0


cdef int render_c(const TicketC* tickets, Py_ssize_t n, Scratch* s,
                  Py_ssize_t* offsets) noexcept nogil:
    """The whole PDF into s.out. 0, -1 out of memory, -2 zlib error, -3 QR too long."""
    cdef Buf* out = &s.out
    cdef Buf* content = &s.content
    cdef Py_ssize_t k, i, nobj = 0
    cdef int page, rc = 0
    cdef const TicketC* t
    out.len = 0
    buf_puts(out, HEADER)
    offsets[nobj] = out.len; nobj += 1
    buf_puts(out, OBJ_CATALOG)
    offsets[nobj] = out.len; nobj += 1
    buf_puts(out, b"2 0 obj\n<< /Type /Pages /Kids [")
    for k in range(n):
        if k:
            buf_byte(out, b' ')
        buf_int(out, FIRST_PAGE_OBJ + 2 * k)
        buf_puts(out, b" 0 R")
    buf_puts(out, b"] /Count ")
    buf_int(out, n)
    buf_puts(out, b" >>\nendobj\n")
    offsets[nobj] = out.len; nobj += 1
    buf_puts(out, OBJ_FONTS)
    offsets[nobj] = out.len; nobj += 1
    buf_puts(out, OBJ_HELVETICA)
    offsets[nobj] = out.len; nobj += 1
    buf_puts(out, OBJ_HELVETICA_BOLD)
    offsets[nobj] = out.len; nobj += 1
    buf_put(out, STATIC_STREAM.data, STATIC_STREAM.len)
    for k in range(n):
        t = &tickets[k]
        page = FIRST_PAGE_OBJ + 2 * <int>k
        offsets[nobj] = out.len; nobj += 1
        buf_int(out, page)
        buf_puts(out, b" 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 ")
        buf_int(out, PAGE_W)
        buf_byte(out, b' ')
        buf_int(out, PAGE_H)
        buf_puts(out, b"] /Resources 3 0 R /Contents [6 0 R ")
        buf_int(out, page + 1)
        buf_puts(out, b" 0 R] >>\nendobj\n")
        content.len = 0
        for i in range(NFIELDS):
            span_open(content, &t.text[i])
            buf_puts(content, b"BT ")
            buf_puts(content, FIELD_OPS[i])
            buf_puts(content, b" (")
            put_escaped(content, t.text[i].s, t.text[i].n)
            buf_puts(content, b") Tj ET\n")
            span_close(content, &t.text[i])
        put_small_print(content, &t.text[SMALL_PRINT])
        if qr_encode(&s.q, t.qr, t.nqr) != 0:
            rc = -3
            break
        put_qr(content, &s.q, s.used)
        if content.failed:
            rc = -1
            break
        offsets[nobj] = out.len; nobj += 1
        rc = put_stream(out, page + 1, content.data, content.len, s)
        if rc != 0:
            break
    if rc == 0:
        k = out.len
        buf_puts(out, b"xref\n0 ")
        buf_int(out, nobj + 1)
        buf_puts(out, b"\n0000000000 65535 f \n")
        for i in range(nobj):
            buf_int10(out, offsets[i])
            buf_puts(out, b" 00000 n \n")
        buf_puts(out, b"trailer\n<< /Size ")
        buf_int(out, nobj + 1)
        buf_puts(out, b" /Root 1 0 R >>\nstartxref\n")
        buf_int(out, k)
        buf_puts(out, b"\n%%EOF\n")
        if out.failed:
            rc = -1
    return rc


cdef void _init_static() except *:
    cdef Scratch* s = scratch_get()
    cdef int rc
    if s == NULL:
        raise MemoryError()
    memset(&STATIC_STREAM, 0, sizeof(Buf))
    rc = put_stream(&STATIC_STREAM, 6, STATIC_CONTENT, <Py_ssize_t>strlen(STATIC_CONTENT), s)
    scratch_put(s)
    if rc != 0 or STATIC_STREAM.failed:
        raise MemoryError("cannot build the static page content")


_init_static()

# -- Python entry points ----------------------------------------------------------------

cdef object _fallback = None

# cp1252 bytes 0x80-0x9f (the rest of cp1252 is Latin-1): code point -> byte, taken from
# Python's own codec so the fast encoder below agrees with str.encode("cp1252").
cdef Py_UCS4 CP1252_HIGH_CP[32]
cdef unsigned char CP1252_HIGH_BYTE[32]
cdef int CP1252_HIGH_N = 0


cdef void _init_cp1252() except *:
    global CP1252_HIGH_N
    for b in range(0x80, 0xA0):
        try:
            ch = bytes([b]).decode("cp1252")
        except UnicodeDecodeError:
            continue
        CP1252_HIGH_CP[CP1252_HIGH_N] = ord(ch)
        CP1252_HIGH_BYTE[CP1252_HIGH_N] = b
        CP1252_HIGH_N += 1


_init_cp1252()


# render.EXTRA_GLYPHS: the letters, and their codes (the same order)
_EXTRA_CHARS = "ĄąĆćĘęŁłŃńŚśŹźŻżČčĎďĚěŇňŘřŤťŮůŐőŰűĐđ"
_EXTRA_CODES = (*range(1, 32), 0x7F, 0x81, 0x8D, 0x8F, 0x90)
cdef Py_UCS4 EXTRA_CP[36]
cdef unsigned char EXTRA_BYTE[36]
for _i in range(36):
    EXTRA_CP[_i] = ord(_EXTRA_CHARS[_i])
    EXTRA_BYTE[_i] = _EXTRA_CODES[_i]


cdef object encode_winansi(str value):
    """render.encode_text for text it shows exactly (no ActualText); None otherwise."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(value), i
    cdef int kind = PyUnicode_KIND(value), j
    cdef void* data = PyUnicode_DATA(value)
    cdef Py_UCS4 c
    cdef bytes out = PyBytes_FromStringAndSize(NULL, n)
    cdef char* p = PyBytes_AS_STRING(out)
    for i in range(n):
        c = PyUnicode_READ(kind, data, i)
        if c < 0x20 or c == 0x7F:
            p[i] = b' '
            continue
        if c < 0x80 or 0xA0 <= c <= 0xFF:
            p[i] = <char>c
            continue
        for j in range(36):
            if EXTRA_CP[j] == c:
                p[i] = <char>EXTRA_BYTE[j]
                break
        else:
            for j in range(CP1252_HIGH_N):
                if CP1252_HIGH_CP[j] == c:
                    p[i] = <char>CP1252_HIGH_BYTE[j]
                    break
            else:
                return None
    return out


cdef inline bint has_controls(const char* p, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i
    for i in range(n):
        if <unsigned char>p[i] < 0x20 or p[i] == 0x7F:
            return True
    return False


cdef object encode_text(object value, list keep, Text* t):
    """Point t at the shown bytes of value (kept alive in keep), with ActualText if needed."""
    global _fallback
    cdef Py_ssize_t n
    cdef const char* p
    if type(value) is not str:
        value = str(value)
    t.act = NULL
    t.an = 0
    if PyUnicode_IS_ASCII(value):
        p = PyUnicode_AsUTF8AndSize(value, &n)   # the ASCII data itself, no copy
        if not has_controls(p, n):
            keep.append(value)
            t.s = p
            t.n = n
            return None
    raw = encode_winansi(<str>value)
    if raw is None:
        if _fallback is None:
            from stagedoor.render import encode_text as fallback
            _fallback = fallback
        raw, act = _fallback(value)
        keep.append(act)
        t.act = <const char*>(<bytes>act)
        t.an = len(<bytes>act)
    keep.append(raw)
    t.s = <const char*>(<bytes>raw)
    t.n = len(<bytes>raw)
    return None


cdef object qr_bytes(object code, list keep, const unsigned char** p, Py_ssize_t* n):
    cdef const char* s
    if type(code) is str and PyUnicode_IS_ASCII(code):
        s = PyUnicode_AsUTF8AndSize(code, n)
        keep.append(code)
        p[0] = <const unsigned char*>s
        return None
    raw = str(code).encode("utf-8", "surrogatepass")
    keep.append(raw)
    p[0] = <const unsigned char*>(<bytes>raw)
    n[0] = len(<bytes>raw)
    return None


def render_order(order):
    """PDF bytes, one page per ticket; byte-identical to stagedoor.render.render_order."""
    cdef object tickets = order.tickets
    cdef Py_ssize_t n = len(tickets), k
    cdef TicketC* tc
    cdef Scratch* s = NULL
    cdef Py_ssize_t* offsets
    cdef int rc
    cdef list keep = []
    if n == 0:
        raise ValueError("order has no tickets")
    tc = <TicketC*>malloc(n * sizeof(TicketC))
    offsets = <Py_ssize_t*>malloc((6 + 2 * n) * sizeof(Py_ssize_t))
    try:
        if tc == NULL or offsets == NULL:
            raise MemoryError()
        for k in range(n):
            t = tickets[k]
            encode_text(t.event, keep, &tc[k].text[0])
            encode_text(t.venue, keep, &tc[k].text[1])
            encode_text(t.starts_at, keep, &tc[k].text[2])
            encode_text(t.section, keep, &tc[k].text[3])
            encode_text(t.row, keep, &tc[k].text[4])
            encode_text(t.seat, keep, &tc[k].text[5])
            encode_text(t.buyer, keep, &tc[k].text[6])
            encode_text(t.price, keep, &tc[k].text[7])
            encode_text(t.order_id, keep, &tc[k].text[8])
            encode_text(t.admission_code, keep, &tc[k].text[9])
            encode_text(t.small_print, keep, &tc[k].text[SMALL_PRINT])
            qr_bytes(t.admission_code, keep, &tc[k].qr, &tc[k].nqr)
        with nogil:
            s = scratch_get()
            rc = render_c(tc, n, s, offsets) if s != NULL else -1
        if rc == -1:
            raise MemoryError()
        if rc == -2:
            raise RuntimeError("zlib deflate failed")
        if rc == -3:
            for k in range(n):
                if choose_version(tc[k].qr, tc[k].nqr) < 0:
                    raise ValueError(f"QR data too long: {tc[k].nqr} bytes "
                                     "(at most 2331 at level M)")
            raise ValueError("QR data too long")
        return PyBytes_FromStringAndSize(s.out.data, s.out.len)
    finally:
        if s != NULL:
            scratch_put(s)
        free(tc)
        free(offsets)


def qr_matrix(data):
    """The QR symbol for bytes `data` as rows of booleans (True = dark), like qr.encode."""
    cdef const unsigned char[:] view = data
    cdef QR* q = <QR*>malloc(sizeof(QR))
    cdef int rc, x, y
    cdef const unsigned char* p = <const unsigned char*>b""
    cdef Py_ssize_t n = view.shape[0]
    if q == NULL:
        raise MemoryError()
    if n:
        p = &view[0]
    try:
        with nogil:
            rc = qr_encode(q, p, n)
        if rc != 0:
            raise ValueError(f"QR data too long: {view.shape[0]} bytes "
                             "(at most 2331 at level M)")
        return [[q.dark[y * q.size + x] != 0 for x in range(q.size)] for y in range(q.size)]
    finally:
        free(q)
