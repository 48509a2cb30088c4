# libdeflate's whole-buffer compressor (pdf.pxi: the PDF's deflate streams), callable
# without the GIL.  Linked as -ldeflate (setup.py).  Why not zlib there: the streams are
# small (a page's operators, ~2-3 KB) and compressed whole, and libdeflate's level 1 does
# one in ~40 % of zlib's level-1 time with smaller output (docs/benchmarks.md, "libdeflate").

cdef extern from "libdeflate.h" nogil:
    struct libdeflate_compressor:
        pass
    libdeflate_compressor* libdeflate_alloc_compressor(int compression_level)
    size_t libdeflate_zlib_compress(libdeflate_compressor* c, const void* src, size_t n,
                                    void* out, size_t out_avail)
    size_t libdeflate_zlib_compress_bound(libdeflate_compressor* c, size_t n)
    void libdeflate_free_compressor(libdeflate_compressor* c)
