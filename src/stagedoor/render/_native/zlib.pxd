# zlib's C API (deflate for the glyph procedures and images, compressed once: glyphs.pxi,
# emoji.pxi; inflate for the colour glyphs'
# PNGs, emoji.pxi), callable without the GIL.  Linked as -lz (setup.py).

cdef extern from "zlib.h" nogil:
    ctypedef unsigned long uLong
    ctypedef uLong uLongf
    ctypedef unsigned char Bytef
    ctypedef unsigned int uInt
    ctypedef struct z_stream:
        Bytef* next_in
        uInt avail_in
        Bytef* next_out
        uInt avail_out
        uLong total_out
        void* zalloc
        void* zfree
        void* opaque
    int Z_OK
    int Z_STREAM_END
    int Z_FINISH
    int Z_DEFLATED
    int Z_DEFAULT_STRATEGY
    int deflateInit2(z_stream* strm, int level, int method, int windowBits, int memLevel,
                     int strategy)
    int deflate(z_stream* strm, int flush)
    int deflateReset(z_stream* strm)
    int deflateEnd(z_stream* strm)
    uLong deflateBound(z_stream* strm, uLong sourceLen)
    # emoji.pxi: a PNG's image data
    int Z_NO_FLUSH
    int inflateInit(z_stream* strm)
    int inflate(z_stream* strm, int flush)
    int inflateEnd(z_stream* strm)
