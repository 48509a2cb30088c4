# Included by stagedoor/_render.pyx.  The QR mask choice: the eight masks scored with
# the ISO 18004 penalty rules N1-N4, a scalar version (any version) and 64-bit
# row/column bitsets for versions 1-10 (the hot path).

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
# data-dependent branches that dominated the scalar version's profile of a render
# (docs/benchmarks.md, "Moved from comments").
# PAT_R/PAT_C hold, per version and mask, the bits the mask flips (data modules only)
# plus the format bits that differ from those of mask 0, so that
# rows = base ^ PAT_R[ver][mask] is exactly the masked symbol.  Results are the same as
# penalty() (the tests compare every version against stagedoor.render.qr).
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


_init_patterns()
