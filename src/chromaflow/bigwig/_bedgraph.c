/* bedGraph text for chromaflow bigwig: one line per interval, "chrom\tstart\tend\tvalue", lines separated by
 * '\n' (a separator before every line, or before every line but the first: the file ends without a newline).
 * Value strings come from a table built in Python (numpy's str() of each distinct value), so the text is
 * exactly Predmoter's. Why C: formatting is ~15 ns per line here and ~300-500 ns with numpy or Python, and
 * predictions tracks have one line per ~3 bp. Integer arithmetic only: same bytes on every machine. */
#include <stdint.h>
#include <string.h>

static const char DIGITS[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static char *put_u64(char *p, uint64_t x) {
    char buf[24];
    char *q = buf + sizeof buf;
    while (x >= 100) {
        uint64_t r = x % 100;
        x /= 100;
        q -= 2;
        memcpy(q, DIGITS + 2 * r, 2);
    }
    if (x >= 10) {
        q -= 2;
        memcpy(q, DIGITS + 2 * x, 2);
    } else {
        *--q = (char)('0' + x);
    }
    size_t n = (size_t)(buf + sizeof buf - q);
    memcpy(p, q, n);
    return p + n;
}

/* Returns the number of bytes written to out (sized by the caller for the longest possible lines). */
int64_t cf_bedgraph(const char *chrom, int64_t lc, const int64_t *starts, const int64_t *ends, const int32_t *vidx,
                    const char *vtab, const int32_t *voff, const int32_t *vlen, int64_t n, int32_t first_without_sep,
                    char *out) {
    char *p = out;
    for (int64_t i = 0; i < n; i++) {
        if (i > 0 || !first_without_sep) *p++ = '\n';
        memcpy(p, chrom, (size_t)lc);
        p += lc;
        *p++ = '\t';
        p = put_u64(p, (uint64_t)starts[i]);
        *p++ = '\t';
        p = put_u64(p, (uint64_t)ends[i]);
        *p++ = '\t';
        int32_t k = vidx[i];
        memcpy(p, vtab + voff[k], (size_t)vlen[k]);
        p += vlen[k];
    }
    return (int64_t)(p - out);
}
