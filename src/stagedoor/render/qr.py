"""QR code encoder in pure Python: the reference (test oracle) for the one in _render.pyx.

Byte mode, error correction level M, versions 1..40 (the smallest that fits), Reed-Solomon
over GF(256) with the polynomial 0x11D, all 8 masks scored with the ISO 18004 penalty rules
N1-N4 (lowest score wins, ties go to the lower mask number), format and version
information.  Data that is not plain ASCII is prefixed with ECI 26 (UTF-8) so a reader
decodes the right characters.

The C version in _render.pyx follows this module step by step; any change here must be
made there too (tests/render/test_render.py checks the two are byte-identical on random input).
The N3 rule follows zxing's MaskUtil: a 1:1:3:1:1 run with four light modules (the quiet
zone counts as light) on at least one side scores 40.
"""

from __future__ import annotations

from .tables import ECC_M_BLOCKS, ECC_M_PER_BLOCK

MAX_VERSION = 40
FORMAT_ECC_M = 0  # the two ECC level bits of the format information for M

PENALTY_N1, PENALTY_N2, PENALTY_N3, PENALTY_N4 = 3, 3, 40, 10

_GF_EXP = [0] * 512
_GF_LOG = [0] * 256


def _init_gf() -> None:
    x = 1
    for i in range(255):
        _GF_EXP[i] = x
        _GF_LOG[x] = i
        x <<= 1
        if x & 0x100:
            x ^= 0x11D
    for i in range(255, 512):
        _GF_EXP[i] = _GF_EXP[i - 255]


_init_gf()


def gf_mul(a: int, b: int) -> int:
    if a == 0 or b == 0:
        return 0
    return _GF_EXP[_GF_LOG[a] + _GF_LOG[b]]


def raw_data_modules(ver: int) -> int:
    """Modules left for data and ECC once the function patterns are placed."""
    result = (16 * ver + 128) * ver + 64
    if ver >= 2:
        num_align = ver // 7 + 2
        result -= (25 * num_align - 10) * num_align - 55
        if ver >= 7:
            result -= 36
    return result


def data_codewords(ver: int) -> int:
    return raw_data_modules(ver) // 8 - ECC_M_PER_BLOCK[ver] * ECC_M_BLOCKS[ver]


def _needs_eci(data: bytes) -> bool:
    return any(b >= 0x80 for b in data)


def data_bits_needed(data: bytes, ver: int) -> int:
    count_bits = 8 if ver <= 9 else 16
    return (12 if _needs_eci(data) else 0) + 4 + count_bits + 8 * len(data)


def choose_version(data: bytes) -> int:
    for ver in range(1, MAX_VERSION + 1):
        if data_bits_needed(data, ver) <= data_codewords(ver) * 8:
            return ver
    raise ValueError(f"QR data too long: {len(data)} bytes (at most 2331 at level M)")


def data_codeword_bytes(data: bytes, ver: int) -> bytearray:
    """Mode indicators, count, payload, terminator and pad bytes."""
    bits: list[int] = []

    def put(value: int, n: int) -> None:
        for i in range(n - 1, -1, -1):
            bits.append((value >> i) & 1)

    if _needs_eci(data):
        put(0b0111, 4)
        put(26, 8)
    put(0b0100, 4)
    put(len(data), 8 if ver <= 9 else 16)
    for b in data:
        put(b, 8)
    capacity = data_codewords(ver) * 8
    put(0, min(4, capacity - len(bits)))
    put(0, (-len(bits)) % 8)
    out = bytearray()
    for i in range(0, len(bits), 8):
        v = 0
        for bit in bits[i:i + 8]:
            v = (v << 1) | bit
        out.append(v)
    pad = 0xEC
    while len(out) < data_codewords(ver):
        out.append(pad)
        pad ^= 0xEC ^ 0x11
    return out


def rs_divisor(degree: int) -> list[int]:
    """Coefficients (highest first, leading 1 omitted) of prod (x - a^i), i < degree."""
    result = [0] * degree
    result[degree - 1] = 1
    root = 1
    for _ in range(degree):
        for j in range(degree):
            result[j] = gf_mul(result[j], root)
            if j + 1 < degree:
                result[j] ^= result[j + 1]
        root = gf_mul(root, 2)
    return result


def rs_remainder(data: bytes | bytearray, divisor: list[int]) -> list[int]:
    result = [0] * len(divisor)
    for b in data:
        factor = b ^ result[0]
        result.pop(0)
        result.append(0)
        for i, coef in enumerate(divisor):
            result[i] ^= gf_mul(coef, factor)
    return result


def add_ecc_and_interleave(data: bytearray, ver: int) -> bytearray:
    num_blocks = ECC_M_BLOCKS[ver]
    ecc_len = ECC_M_PER_BLOCK[ver]
    raw_codewords = raw_data_modules(ver) // 8
    num_short = num_blocks - raw_codewords % num_blocks
    short_len = raw_codewords // num_blocks
    divisor = rs_divisor(ecc_len)
    blocks: list[tuple[bytearray, list[int]]] = []
    k = 0
    for i in range(num_blocks):
        n = short_len - ecc_len + (0 if i < num_short else 1)
        dat = data[k:k + n]
        k += n
        blocks.append((dat, rs_remainder(dat, divisor)))
    out = bytearray()
    for i in range(short_len - ecc_len + 1):
        for dat, _ in blocks:
            if i < len(dat):
                out.append(dat[i])
    for i in range(ecc_len):
        for _, ecc in blocks:
            out.append(ecc[i])
    return out


def alignment_positions(ver: int) -> list[int]:
    if ver == 1:
        return []
    num_align = ver // 7 + 2
    step = (ver * 8 + num_align * 3 + 5) // (num_align * 4 - 4) * 2
    size = ver * 4 + 17
    result = [6]
    pos = size - 7
    while len(result) < num_align:
        result.insert(1, pos)
        pos -= step
    return result


class _Matrix:
    def __init__(self, ver: int) -> None:
        self.ver = ver
        self.size = ver * 4 + 17
        self.dark = [[False] * self.size for _ in range(self.size)]  # [y][x]
        self.func = [[False] * self.size for _ in range(self.size)]

    def set_func(self, x: int, y: int, dark: bool) -> None:
        self.dark[y][x] = dark
        self.func[y][x] = True

    def draw_function_patterns(self) -> None:
        size = self.size
        for i in range(size):
            self.set_func(6, i, i % 2 == 0)
            self.set_func(i, 6, i % 2 == 0)
        for cx, cy in ((3, 3), (size - 4, 3), (3, size - 4)):
            for dy in range(-4, 5):
                for dx in range(-4, 5):
                    x, y = cx + dx, cy + dy
                    if 0 <= x < size and 0 <= y < size:
                        dist = max(abs(dx), abs(dy))
                        self.set_func(x, y, dist not in (2, 4))
        pos = alignment_positions(self.ver)
        n = len(pos)
        for i in range(n):
            for j in range(n):
                if (i == 0 and j == 0) or (i == 0 and j == n - 1) or (i == n - 1 and j == 0):
                    continue
                for dy in range(-2, 3):
                    for dx in range(-2, 3):
                        self.set_func(pos[i] + dx, pos[j] + dy, max(abs(dx), abs(dy)) != 1)
        self.draw_format_bits(0)
        self.draw_version()

    def draw_format_bits(self, mask: int) -> None:
        data = FORMAT_ECC_M << 3 | mask
        rem = data
        for _ in range(10):
            rem = (rem << 1) ^ ((rem >> 9) * 0x537)
        bits = (data << 10 | rem) ^ 0x5412
        size = self.size

        def bit(i: int) -> bool:
            return (bits >> i) & 1 != 0

        for i in range(6):
            self.set_func(8, i, bit(i))
        self.set_func(8, 7, bit(6))
        self.set_func(8, 8, bit(7))
        self.set_func(7, 8, bit(8))
        for i in range(9, 15):
            self.set_func(14 - i, 8, bit(i))
        for i in range(8):
            self.set_func(size - 1 - i, 8, bit(i))
        for i in range(8, 15):
            self.set_func(8, size - 15 + i, bit(i))
        self.set_func(8, size - 8, True)

    def draw_version(self) -> None:
        if self.ver < 7:
            return
        rem = self.ver
        for _ in range(12):
            rem = (rem << 1) ^ ((rem >> 11) * 0x1F25)
        bits = self.ver << 12 | rem
        for i in range(18):
            dark = (bits >> i) & 1 != 0
            a = self.size - 11 + i % 3
            b = i // 3
            self.set_func(a, b, dark)
            self.set_func(b, a, dark)

    def draw_codewords(self, codewords: bytearray) -> None:
        size = self.size
        i = 0
        total = len(codewords) * 8
        right = size - 1
        while right >= 1:
            if right == 6:
                right = 5
            upward = ((right + 1) & 2) == 0
            for vert in range(size):
                y = size - 1 - vert if upward else vert
                for j in range(2):
                    x = right - j
                    if not self.func[y][x] and i < total:
                        self.dark[y][x] = (codewords[i >> 3] >> (7 - (i & 7))) & 1 != 0
                        i += 1
            right -= 2

    def apply_mask(self, mask: int) -> None:
        for y in range(self.size):
            for x in range(self.size):
                if self.func[y][x]:
                    continue
                if mask == 0:
                    inv = (x + y) % 2 == 0
                elif mask == 1:
                    inv = y % 2 == 0
                elif mask == 2:
                    inv = x % 3 == 0
                elif mask == 3:
                    inv = (x + y) % 3 == 0
                elif mask == 4:
                    inv = (x // 3 + y // 2) % 2 == 0
                elif mask == 5:
                    inv = x * y % 2 + x * y % 3 == 0
                elif mask == 6:
                    inv = (x * y % 2 + x * y % 3) % 2 == 0
                else:
                    inv = ((x + y) % 2 + x * y % 3) % 2 == 0
                if inv:
                    self.dark[y][x] = not self.dark[y][x]

    def penalty(self) -> int:
        size = self.size
        rows = self.dark
        cols = [[rows[y][x] for y in range(size)] for x in range(size)]
        score = 0
        for line in (*rows, *cols):
            score += _penalty_runs(line) + _penalty_finder_like(line)
        for y in range(size - 1):
            for x in range(size - 1):
                c = rows[y][x]
                if c == rows[y][x + 1] == rows[y + 1][x] == rows[y + 1][x + 1]:
                    score += PENALTY_N2
        dark = sum(sum(1 for m in row if m) for row in rows)
        total = size * size
        score += abs(dark * 2 - total) * 10 // total * PENALTY_N4
        return score


def _penalty_runs(line: list[bool]) -> int:
    score = 0
    run = 1
    for i in range(1, len(line) + 1):
        if i < len(line) and line[i] == line[i - 1]:
            run += 1
            continue
        if run >= 5:
            score += PENALTY_N1 + (run - 5)
        run = 1
    return score


def _light(line: list[bool], start: int, end: int) -> bool:
    """True when line[start:end], clamped to the line, has no dark module."""
    return not any(line[max(start, 0):min(end, len(line))])


_FINDER = (True, False, True, True, True, False, True)


def _penalty_finder_like(line: list[bool]) -> int:
    score = 0
    for x in range(len(line) - 6):
        if tuple(line[x:x + 7]) == _FINDER and (
                _light(line, x - 4, x) or _light(line, x + 7, x + 11)):
            score += PENALTY_N3
    return score


def encode(data: bytes) -> list[list[bool]]:
    """The QR symbol for `data` (without quiet zone) as rows of modules, True = dark."""
    ver = choose_version(data)
    codewords = add_ecc_and_interleave(data_codeword_bytes(data, ver), ver)
    m = _Matrix(ver)
    m.draw_function_patterns()
    m.draw_codewords(codewords)
    best_mask, best_score = 0, -1
    for mask in range(8):
        m.apply_mask(mask)
        m.draw_format_bits(mask)
        score = m.penalty()
        if best_score < 0 or score < best_score:
            best_mask, best_score = mask, score
        m.apply_mask(mask)  # XOR again: undo
    m.apply_mask(best_mask)
    m.draw_format_bits(best_mask)
    return m.dark


def version_for(data: bytes) -> int:
    return choose_version(data)
