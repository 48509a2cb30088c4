# Included by stagedoor/_render.pyx.  The QR encoder (byte mode, level M, versions
# 1-40), step by step as stagedoor/render/qr.py: version choice, data codewords,
# Reed-Solomon, function patterns, codeword placement; the mask choice is qr_mask.pxi.

# -- tables (written once at import, read-only afterwards) ----------------------------
# The ECC table is stagedoor.render.tables' (one copy for both renderers); GF(256)'s
# exp/log tables are computed, as in qr.py.

cdef int ECC_M_PER_BLOCK[41]
cdef int ECC_M_BLOCKS[41]
cdef unsigned char GF_EXP[512]
cdef unsigned char GF_LOG[256]


cdef void _init_tables() except *:
    cdef int i, x = 1
    for i in range(41):
        ECC_M_PER_BLOCK[i] = _tables.ECC_M_PER_BLOCK[i]
        ECC_M_BLOCKS[i] = _tables.ECC_M_BLOCKS[i]
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
