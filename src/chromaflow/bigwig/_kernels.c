/* bedGraph text for chromaflow bigwig: one line per interval, "chrom\tstart\tend\tvalue", lines separated by
 * '\n' (a separator before every line, or before every line but the first: the file ends without a newline).
 * Value strings come from a table built in Python (numpy's str() of each distinct value), so the text is
 * exactly Predmoter's. Why C: formatting is ~15 ns per line here and ~300-500 ns with numpy or Python, and
 * predictions tracks have one line per ~3 bp. Integer arithmetic only: same bytes on every machine. */
#define _POSIX_C_SOURCE 200809L /* pread */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* narrowPeak lines of one chromosome's peaks (chromaflow peaks): "<head><start>\t<end><tag><n0 + i + 1>\t<score>\t.\t
 * <value>\t-1\t-1\t<offset>\n", head = "chrom\t", tag = "\t<name>_narrowPeak", the value's text from the table
 * as in cf_bedgraph; every integer >= 0 (the caller checks). Returns the bytes written to out (sized by the caller). */
int64_t cf_narrowpeak(const char *head, int64_t lh, const char *tag, int64_t lt, const int64_t *starts,
                      const int64_t *ends, int64_t n0, const int64_t *scores, const int32_t *vidx, const char *vtab,
                      const int32_t *voff, const int32_t *vlen, const int64_t *offs, int64_t n, char *out) {
    char *p = out;
    for (int64_t i = 0; i < n; i++) {
        memcpy(p, head, (size_t)lh);
        p += lh;
        p = put_u64(p, (uint64_t)starts[i]);
        *p++ = '\t';
        p = put_u64(p, (uint64_t)ends[i]);
        memcpy(p, tag, (size_t)lt);
        p += lt;
        p = put_u64(p, (uint64_t)(n0 + i + 1));
        *p++ = '\t';
        p = put_u64(p, (uint64_t)scores[i]);
        memcpy(p, "\t.\t", 3);
        p += 3;
        int32_t k = vidx[i];
        memcpy(p, vtab + voff[k], (size_t)vlen[k]);
        p += vlen[k];
        memcpy(p, "\t-1\t-1\t", 7);
        p += 7;
        p = put_u64(p, (uint64_t)offs[i]);
        *p++ = '\n';
    }
    return (int64_t)(p - out);
}

/* ---------------------------------------------------------------------------------------------------------------
 * Track kernels (the numpy versions in tracks.py define them; tests check that both agree bit for bit).
 * All integer arithmetic: exact, and the same on every machine.
 * ------------------------------------------------------------------------------------------------------------- */

/* round_half_even((p + m) / 2) for integers: a = p + m, q = floor(a / 2), result q + (a & q & 1) */
static inline int64_t avg2(int64_t p, int64_t m) {
    int64_t a = p + m;
    int64_t q = a >> 1; /* arithmetic shift: floor */
    return q + (a & q & 1);
}

/* avg2 in int32 lanes, for the runs' change flags (the compiler vectorises that loop with 32-bit lanes): exact
 * for the values the callers pass (int32 in [-1, 2^23): p + m cannot overflow) */
static inline int32_t avg2_32(int32_t p, int32_t m) {
    int32_t a = p + m;
    int32_t q = a >> 1;
    return q + (a & q & 1);
}

/* BODY for every position `at` in [0, n) whose flag byte is set, in order: the flags read 8 at a time (a zero word
 * skips 8 positions; predicted tracks change every ~3-30 bp), the set bytes of a word lowest address first on
 * either byte order. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define NEXT_SET_BYTE(w, b) (b = __builtin_clzll(w) >> 3, w &= ~(0xFFull << (56 - 8 * b)))
#else
#define NEXT_SET_BYTE(w, b) (b = __builtin_ctzll(w) >> 3, w &= w - 1)
#endif
#define FOR_EACH_SET(flags, n, at, BODY)                                                                         \
    do {                                                                                                         \
        int64_t i_ = 0;                                                                                          \
        for (; i_ + 8 <= (n); i_ += 8) {                                                                         \
            uint64_t w_;                                                                                         \
            memcpy(&w_, (flags) + i_, 8);                                                                        \
            while (w_) {                                                                                         \
                int b_;                                                                                          \
                NEXT_SET_BYTE(w_, b_);                                                                           \
                int64_t at = i_ + b_;                                                                            \
                BODY;                                                                                            \
            }                                                                                                    \
        }                                                                                                        \
        for (; i_ < (n); i_++)                                                                                   \
            if ((flags)[i_]) {                                                                                   \
                int64_t at = i_;                                                                                 \
                BODY;                                                                                            \
            }                                                                                                    \
    } while (0)

/* One block of a run walk (cf_runs, cf_peaks_feed): v[i + 1] = x[i] (m == NULL) or avg2(x[i], m[i]), the average
 * computed once per position, and flags[i] = 1 where v[i + 1] differs from v[i] (v[0], the value before the block,
 * is the caller's), for i < len <= RUN_BLOCK: two loops the compiler vectorises, into the caller's stack buffers
 * that stay in L1. Before, the walks flagged a whole piece into a flags array (the average computed twice per
 * position) and read it back from memory: 1.8x (peak caller) and 2x (runs) the time, on 38.5 Mbp of a realistic
 * strand average. */
#define RUN_BLOCK 4096
static inline void block_flags(const int32_t *x, const int32_t *m, int64_t len, int32_t *v, uint8_t *flags) {
    if (m) {
        for (int64_t i = 0; i < len; i++) v[i + 1] = avg2_32(x[i], m[i]);
    } else {
        memcpy(v + 1, x, (size_t)len * sizeof *v);
    }
    for (int64_t i = 0; i < len; i++) flags[i] = v[i + 1] != v[i];
}

/* Maximal runs of equal values of x (m == NULL) or of avg2(x, m): each run's start + offset, end + offset and value
 * (float32: the track's dtype) into starts, ends and vals, which have room for `cap` runs. Returns the number of
 * runs; when that is more than cap, only the first cap starts and values were written (and not every end): the
 * caller calls again with room for all. Block by block (block_flags), the flags read 8 bytes at a time (a zero word
 * skips 8 positions; predicted tracks change every ~3-30 bp). (A single branch-free pass storing start, end and
 * value at every position ran at a third of the speed of a flags pass.) */
int64_t cf_runs(const int32_t *x, const int32_t *m, int64_t n, int64_t offset, int64_t cap, int64_t *starts,
                int64_t *ends, float *vals) {
    int32_t v[RUN_BLOCK + 1]; /* v[0]: the value before the block; v[i + 1]: position a + i */
    uint8_t flags[RUN_BLOCK];
    int64_t k = 0;
    int32_t last = 0; /* the previous block's last value (the first block's first position starts a run) */
    for (int64_t a = 0; a < n; a += RUN_BLOCK) {
        int64_t len = n - a < RUN_BLOCK ? n - a : RUN_BLOCK;
        v[0] = last;
        block_flags(x + a, m ? m + a : NULL, len, v, flags);
        if (a == 0) flags[0] = 1;
#define RUN_AT(j)                                                                                                \
    do {                                                                                                         \
        int64_t q_ = (j);                                                                                        \
        if (k < cap) {                                                                                           \
            if (k) ends[k - 1] = a + q_ + offset;                                                                \
            starts[k] = a + q_ + offset;                                                                         \
            vals[k] = (float)v[q_ + 1];                                                                          \
        }                                                                                                        \
        k++;                                                                                                     \
    } while (0)
        FOR_EACH_SET(flags, len, at, RUN_AT(at));
#undef RUN_AT
        last = v[len];
    }
    if (k && k <= cap) ends[k - 1] = n + offset;
    return k;
}

/* dst[i] = src[i] (rev == 0) or src[n - 1 - i], int64 to int32, and the bitwise OR of all of src: one pass over an
 * inflated chunk where numpy needs two (the OR that proves the values fit, then the cast); the caller uses dst
 * only when the OR says every value lies in [0, 2^23) or is -1 (padding). */
int64_t cf_take_i64(const int64_t *src, int64_t n, int rev, int32_t *dst) {
    int64_t o = 0;
    if (rev) {
        for (int64_t i = 0; i < n; i++) {
            int64_t v = src[n - 1 - i];
            o |= v;
            dst[i] = (int32_t)v;
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            int64_t v = src[i];
            o |= v;
            dst[i] = (int32_t)v;
        }
    }
    return o;
}

/* ---------------------------------------------------------------------------------------------------------------
 * Chunk reader: a batch of a predictions h5's int64 chunks (Predmoter's layout: one chunk of L values per row and
 * channel), read with pread, inflated with libdeflate and stored as int32 rows, in one call.
 * libdeflate comes from the `deflate` package's extension, which exports it (its functions are passed in as
 * pointers: no header or library to link against); the GIL is released for the whole batch, where one Python call
 * per chunk released and took it back three times (pread, inflate, store) and the threads' hand-overs of it cost
 * more CPU than the stores.
 * ------------------------------------------------------------------------------------------------------------- */
typedef int (*zlib_decompress_fn)(void *d, const void *in, size_t in_n, void *out, size_t avail, size_t *actual);

/* Chunk j: file descriptor fds[j], at offs[j] (< 0: never written, every value `fill`), sizes[j] bytes, inflated
 * when inflate[j] (else stored raw), reversed when rev[j], into the L int32 at address dst[j]. status[j]: 0 =
 * every value in [0, limit), 1 = also -1s (padding), 2 = a value outside [-1, limit) (the row is then not usable).
 * Returns -1, or the first chunk that could not be read or inflated to L * 8 bytes (nothing after it is done). */
int64_t cf_read_chunks(int64_t n, const int32_t *fds, const int64_t *offs, const uint32_t *sizes,
                       const uint8_t *inflate, const uint8_t *rev, const uint64_t *dst, int64_t L,
                       int64_t fill, int64_t limit, void *decompress, void *decompressor, uint8_t *status) {
    zlib_decompress_fn zdec = (zlib_decompress_fn)decompress;
    size_t nbytes = (size_t)L * 8, cap = 0;
    uint8_t *raw = NULL;
    int64_t *vals = malloc(nbytes);
    int64_t failed = -1;
    if (!vals) return 0;
    for (int64_t j = 0; j < n && failed < 0; j++) {
        int32_t *out = (int32_t *)(uintptr_t)dst[j];
        const int64_t *src = vals;
        if (offs[j] < 0) {
            for (int64_t i = 0; i < L; i++) vals[i] = fill;
        } else {
            if (sizes[j] > cap) {
                free(raw);
                cap = sizes[j];
                raw = malloc(cap);
                if (!raw) { failed = j; cap = 0; break; }
            }
            if (pread(fds[j], raw, sizes[j], offs[j]) != (ssize_t)sizes[j]) { failed = j; break; }
            if (inflate[j]) {
                size_t got = 0;
                if (zdec(decompressor, raw, sizes[j], vals, nbytes, &got) != 0 || got != nbytes) { failed = j; break; }
            } else {
                if (sizes[j] != nbytes) { failed = j; break; }
                src = (const int64_t *)raw; /* malloc's memory: aligned for int64 */
            }
        }
        int64_t o = cf_take_i64(src, L, rev[j], out);
        uint8_t st = 0;
        if (o < 0 || o >= limit) {
            int64_t lo = src[0], hi = src[0];
            for (int64_t i = 1; i < L; i++) {
                if (src[i] < lo) lo = src[i];
                if (src[i] > hi) hi = src[i];
            }
            st = (lo < -1 || hi >= limit) ? 2 : 1;
        }
        status[j] = st;
    }
    free(raw);
    free(vals);
    return failed;
}

/* A bigWig writer task's data blocks in one call (the GIL released once, not once per block): the n intervals
 * (s, e: int64; v: float32) of chromosome tid, in blocks of `per_block` bedGraph items (the 24-byte section header:
 * chromId, start, end, itemStep 0, itemSpan 0, type 1, reserved 0, itemCount; then start, end, value per item, all
 * little-endian: the caller checks the machine is), each compressed with libdeflate's zlib_compress (`compress`,
 * its compressor `c`; at most `bound` bytes a block) into `out`, one after another. Writes each block's compressed
 * size and (tid, start, end); returns the bytes written, or -1 when a block did not fit its bound. */
typedef size_t (*zlib_compress_fn)(void *c, const void *in, size_t in_n, void *out, size_t avail);

int64_t cf_data_blocks(int64_t tid, const int64_t *s, const int64_t *e, const float *v, int64_t n, int64_t per_block,
                       void *compress, void *c, int64_t bound, uint8_t *out, int64_t *sizes, int64_t *meta) {
    zlib_compress_fn zc = (zlib_compress_fn)compress;
    uint8_t *buf = malloc(24 + 12 * (size_t)per_block);
    int64_t pos = 0, nb = 0;
    if (!buf) return -1;
    for (int64_t a = 0; a < n; a += per_block, nb++) {
        int64_t b = a + per_block < n ? a + per_block : n;
        uint32_t hdr[5] = {(uint32_t)tid, (uint32_t)s[a], (uint32_t)e[b - 1], 0, 0};
        uint8_t type[2] = {1, 0};
        uint16_t count = (uint16_t)(b - a);
        memcpy(buf, hdr, 20);
        memcpy(buf + 20, type, 2);
        memcpy(buf + 22, &count, 2);
        uint8_t *p = buf + 24;
        for (int64_t i = a; i < b; i++, p += 12) {
            uint32_t se[2] = {(uint32_t)s[i], (uint32_t)e[i]};
            memcpy(p, se, 8);
            memcpy(p + 8, v + i, 4);
        }
        size_t got = zc(c, buf, (size_t)(p - buf), out + pos, (size_t)bound);
        if (!got) { free(buf); return -1; }
        sizes[nb] = (int64_t)got;
        meta[3 * nb] = tid;
        meta[3 * nb + 1] = s[a];
        meta[3 * nb + 2] = e[b - 1];
        pos += (int64_t)got;
    }
    free(buf);
    return pos;
}

/* out[i] = x[i] (m == NULL) or avg2(x[i], m[i]), widened to int64: the input of cf_smooth_runs in one pass (numpy
 * needs five passes and two casts for the same integers) */
void cf_track_i64(const int32_t *x, const int32_t *m, int64_t n, int64_t *out) {
    if (m) { for (int64_t i = 0; i < n; i++) out[i] = avg2(x[i], m[i]); }
    else { for (int64_t i = 0; i < n; i++) out[i] = x[i]; }
}

/* Exact smoothing of positions [start, end) of a block (FORMATS 5.4, numpy 'same' alignment for tracks of at
 * least w values): y[i] = round_half_even(S[i] / w), S[i] = sum of t[j] for j in [i - left, i + right] within
 * [0, block_end), where t[j] = data[j - d0] (data holds block positions [d0, d0 + nd); every j a window needs
 * lies there or outside the block). Emits the runs of y: starts (block coordinates) and values. Returns the
 * number of runs (starts/vals hold at least end - start entries). The window sum slides by one value in and one
 * out per step; the quotient and remainder of (2S + w) / 2w follow it without a division per position. */
int64_t cf_smooth_runs(const int64_t *data, int64_t d0, int64_t nd, int64_t block_end, int64_t start, int64_t end,
                       int64_t w, int64_t left, int64_t right, int64_t *starts, int64_t *vals) {
    if (end <= start) return 0;
    int64_t lo = start - left, hi = start + right; /* inclusive window of `start` */
    int64_t S = 0;
    for (int64_t j = (lo < 0 ? 0 : lo); j <= hi && j < block_end; j++) S += data[j - d0];
    int64_t w2 = 2 * w;
    int64_t t = 2 * S + w;
    int64_t q = t / w2, r = t % w2; /* C division truncates: make it floor */
    if (r < 0) { r += w2; q -= 1; }
    int64_t k = 0, prev = 0;
    for (int64_t i = start; i < end; i++) {
        if (i > start) { /* slide: t[i + right] enters, t[i - left - 1] leaves */
            int64_t jin = i + right, jout = i - left - 1;
            int64_t d = (jin < block_end ? data[jin - d0] : 0) - (jout >= 0 ? data[jout - d0] : 0);
            r += 2 * d;
            if (r >= w2 || r < 0) { /* large steps: one division; small ones: a few subtractions */
                int64_t c = r / w2;
                if (r % w2 < 0) c -= 1;
                q += c;
                r -= c * w2;
            }
        }
        int64_t y = q - (r == 0 ? (q & 1) : 0); /* (2S + w) divisible by 2w: S/w is k + 1/2, take the even one */
        if (i == start || y != prev) {
            starts[k] = i;
            vals[k] = y;
            k++;
            prev = y;
        }
    }
    return k;
}

/* Zoom records of sorted, non-overlapping intervals for bins [b*z, (b+1)*z): for every bin holding data, its
 * first covered base, last covered base + 1, covered bases, min, max, sum and sum of squares (double: exact for
 * integer values). Intervals across bin edges are split. Returns the number of records; the caller sizes the
 * arrays for n + (e[n-1] - s[0]) / z + 2 records. Same results as _bin_records in bigwigfile.py. */
int64_t cf_zoom0(const int64_t *s, const int64_t *e, const float *v, int64_t n, int64_t z, int64_t *bin, int64_t *bstart,
                 int64_t *bend, int64_t *cnt, float *mn, float *mx, double *sum, double *sumsq) {
    int64_t k = -1;
    for (int64_t i = 0; i < n; i++) {
        int64_t a = s[i], end = e[i];
        float val = v[i];
        double dv = (double)val;
        while (a < end) {
            int64_t b = a / z;
            int64_t stop = (b + 1) * z;
            if (stop > end) stop = end;
            int64_t len = stop - a;
            if (k < 0 || bin[k] != b) {
                k++;
                bin[k] = b;
                bstart[k] = a;
                cnt[k] = 0;
                mn[k] = val;
                mx[k] = val;
                sum[k] = 0.0;
                sumsq[k] = 0.0;
            }
            bend[k] = stop;
            cnt[k] += len;
            if (val < mn[k]) mn[k] = val;
            if (val > mx[k]) mx[k] = val;
            sum[k] += (double)len * dv;
            sumsq[k] += (double)len * dv * dv;
            a = stop;
        }
    }
    return k + 1;
}

/* ---------------------------------------------------------------------------------------------------------------
 * Peaks (chromaflow peaks at a known cutoff): MACS3 bdgpeakcall's peaks (peaks/call.py's module docstring: the
 * rules; call_peaks and PeakStream, the numpy version, define them) called while a chromosome's track streams in
 * pieces, straight from the int32 strands: no runs arrays. State per chromosome; the caller feeds the pieces in
 * order, then finishes the chromosome and takes its peaks.
 * ------------------------------------------------------------------------------------------------------------- */
typedef struct {
    int32_t floor;                    /* a run is above the cutoff when its (integer) value >= floor */
    int64_t min_length, max_gap;
    int64_t pos;                      /* bp fed so far */
    int64_t run_start;                /* the last run, not closed yet (the next piece may continue it) */
    int32_t run_val, has_run;
    int32_t open, top;                /* the open peak: its start, the end of its last above run, top value */
    int64_t p_start, p_end;
    int64_t *cand, n_cand, cap_cand;  /* midpoints of its runs at the top value, in order */
    int64_t runs;                     /* closed runs (the track's merged runs) */
    int64_t *out, n_out, cap_out;     /* peaks: start, end, summit, top per peak */
    int failed;                       /* an allocation failed */
} cf_peaks_state;

void *cf_peaks_new(int32_t floor, int64_t min_length, int64_t max_gap) {
    cf_peaks_state *s = calloc(1, sizeof *s);
    if (s) {
        s->floor = floor;
        s->min_length = min_length;
        s->max_gap = max_gap;
    }
    return s;
}

void cf_peaks_free(void *p) {
    cf_peaks_state *s = p;
    if (!s) return;
    free(s->cand);
    free(s->out);
    free(s);
}

static int grow(int64_t **buf, int64_t *cap, int64_t need) {
    if (need <= *cap) return 1;
    int64_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    int64_t *b = realloc(*buf, (size_t)c * sizeof **buf);
    if (!b) return 0;
    *buf = b;
    *cap = c;
    return 1;
}

/* the open peak is over: kept when at least min_length long, its summit the middle candidate (the lower of two) */
static void close_peak(cf_peaks_state *s) {
    if (!s->open) return;
    s->open = 0;
    if (s->p_end - s->p_start < s->min_length) return;
    if (!grow(&s->out, &s->cap_out, 4 * (s->n_out + 1))) { s->failed = 1; return; }
    int64_t *o = s->out + 4 * s->n_out++;
    o[0] = s->p_start;
    o[1] = s->p_end;
    o[2] = s->cand[(s->n_cand + 1) / 2 - 1];
    o[3] = s->top;
}

static void add_cand(cf_peaks_state *s, int64_t mid) {
    if (!grow(&s->cand, &s->cap_cand, s->n_cand + 1)) { s->failed = 1; return; }
    s->cand[s->n_cand++] = mid;
}

/* a closed run [a, b) of value v */
static inline void close_run(cf_peaks_state *s, int64_t a, int64_t b, int32_t v) {
    s->runs++;
    if (v < s->floor) return;
    if (s->open && a - s->p_end <= s->max_gap) {
        s->p_end = b;
        if (v > s->top) {
            s->top = v;
            s->n_cand = 0;
        }
        if (v == s->top) add_cand(s, (a + b) / 2);
        return;
    }
    close_peak(s);
    s->open = 1;
    s->p_start = a;
    s->p_end = b;
    s->top = v;
    s->n_cand = 0;
    add_cand(s, (a + b) / 2);
}

/* Feed the next n positions of the chromosome: x (m == NULL) or the strand average of x and m, block by block
 * (block_flags). Returns 0, or -1 when an allocation failed (the state is then unusable). */
int cf_peaks_feed(void *p, const int32_t *x, const int32_t *m, int64_t n) {
    cf_peaks_state *s = p;
    int32_t v[RUN_BLOCK + 1]; /* v[0]: the value before the block; v[i + 1]: position a + i */
    uint8_t flags[RUN_BLOCK];
    int first = !s->has_run; /* the chromosome's first position starts a run */
    int32_t last = s->run_val; /* the previous block's last value (or the open run's) */
    for (int64_t a = 0; a < n; a += RUN_BLOCK) {
        int64_t len = n - a < RUN_BLOCK ? n - a : RUN_BLOCK;
        v[0] = last;
        block_flags(x + a, m ? m + a : NULL, len, v, flags);
        if (first) flags[0] = 1, first = 0;
        int64_t base = s->pos + a;
#define RUN_STARTS_AT(j)                                                                                         \
    do {                                                                                                         \
        int64_t q_ = (j);                                                                                        \
        if (s->has_run) close_run(s, s->run_start, base + q_, s->run_val);                                       \
        s->has_run = 1;                                                                                          \
        s->run_start = base + q_;                                                                                \
        s->run_val = v[q_ + 1];                                                                                  \
    } while (0)
        FOR_EACH_SET(flags, len, at, RUN_STARTS_AT(at));
#undef RUN_STARTS_AT
        last = v[len];
    }
    s->pos += n;
    return s->failed ? -1 : 0;
}

/* End the chromosome at `size` (the last run closes there; a chromosome without data is one run of 0) and return
 * its number of peaks (-1 when an allocation failed); cf_peaks_take copies them out. */
int64_t cf_peaks_finish(void *p, int64_t size) {
    cf_peaks_state *s = p;
    if (s->has_run) close_run(s, s->run_start, size, s->run_val);
    else if (size > 0) close_run(s, 0, size, 0);
    close_peak(s);
    return s->failed ? -1 : s->n_out;
}

/* The finished chromosome's peaks into starts, ends, summits (int64) and values (float32) and its run count into
 * *runs; the state is reset for the next chromosome. */
void cf_peaks_take(void *p, int64_t *starts, int64_t *ends, int64_t *summits, float *values, int64_t *runs) {
    cf_peaks_state *s = p;
    for (int64_t k = 0; k < s->n_out; k++) {
        starts[k] = s->out[4 * k];
        ends[k] = s->out[4 * k + 1];
        summits[k] = s->out[4 * k + 2];
        values[k] = (float)s->out[4 * k + 3];
    }
    *runs = s->runs;
    s->n_out = s->runs = s->pos = s->n_cand = 0;
    s->has_run = s->open = 0;
}

/* ---------------------------------------------------------------------------------------------------------------
 * HDF5 chunk index and one-row chunks (Predmoter's and Helixer's files store every row of every dataset as its own
 * chunk): HDF5's H5Dchunk_iter (the h5py build's own library, passed in by address) with a C callback, where h5py
 * calls a Python function per chunk (~3 us each: 0.15 s for a 200 Mbp predictions file's 37,000 chunks), and a
 * pread per unfiltered row chunk, where HDF5 looks each one up (~6 us: data/seqids and data/start_ends of that
 * file took 0.25 s).
 * ------------------------------------------------------------------------------------------------------------- */
typedef int (*h5_chunk_iter_fn)(int64_t dset, int64_t dxpl, void *cb, void *op);

typedef struct {
    int64_t *offset;
    uint32_t *size, *mask;
    int64_t nrows, ncols, cd0, cdl;
    int rank;
} chunk_index;

static int index_visit(const unsigned long long *off, unsigned filter_mask, uint64_t addr, unsigned long long size,
                       void *op) {
    chunk_index *ci = op;
    int64_t r = (int64_t)(off[0] / (unsigned long long)ci->cd0);
    int64_t c = ci->rank > 1 ? (int64_t)(off[ci->rank - 1] / (unsigned long long)ci->cdl) : 0;
    if (r >= ci->nrows || c >= ci->ncols || size > 0xFFFFFFFFull) return -1; /* stops the iteration: an error */
    int64_t k = r * ci->ncols + c;
    ci->offset[k] = (int64_t)addr;
    ci->size[k] = (uint32_t)size;
    ci->mask[k] = filter_mask;
    return 0;
}

/* Every written chunk of the dataset `dset` (an HDF5 id; H5Dchunk_iter at `iter`) into the (nrows, ncols) tables
 * offset (file address), size and filter mask, at row offset[0] / cd0 and column offset[rank - 1] / cdl. Returns
 * H5Dchunk_iter's status (negative: failed; the tables are then incomplete). */
int cf_chunk_index(void *iter, int64_t dset, int rank, int64_t cd0, int64_t cdl, int64_t nrows, int64_t ncols,
                   int64_t *offset, uint32_t *size, uint32_t *mask) {
    chunk_index ci = {offset, size, mask, nrows, ncols, cd0, cdl, rank};
    return ((h5_chunk_iter_fn)iter)(dset, 0 /* H5P_DEFAULT */, (void *)index_visit, &ci);
}

/* n chunks of nbytes each from file descriptor fd at offs[j] into out, one after another. Returns -1, or the first
 * chunk that was never written (offset < 0) or could not be read whole. */
int64_t cf_gather_chunks(int fd, const int64_t *offs, int64_t n, int64_t nbytes, uint8_t *out) {
    for (int64_t j = 0; j < n; j++) {
        if (offs[j] < 0) return j;
        if (pread(fd, out + j * nbytes, (size_t)nbytes, offs[j]) != (ssize_t)nbytes) return j;
    }
    return -1;
}

/* ---------------------------------------------------------------------------------------------------------------
 * LZF, as h5py's LZF filter writes it. h5py bundles liblzf (Marc Lehmann's, BSD) built with HLOG 17 and ULTRA_FAST;
 * this encoder takes the same decisions (the same 3-byte hash into 2^17 slots, the same match test, a match never
 * taken from offset 0, the same re-hash of one position after a match, literal runs of at most 32, the same
 * "output full" tests), so it writes the same bytes. Two differences, neither visible in the output:
 * - the match is extended 8 bytes at a time (liblzf compares byte by byte, which was most of add-coverage's time:
 *   its shuffled rows are long runs of equal bytes, 264 at a time);
 * - the hash table starts empty on every call (stamped entries; liblzf leaves its table uninitialised, INIT_HTAB 0,
 *   and only its offset and byte tests keep a stale entry from changing the output).
 * Written from the format and the algorithm's description; tests/coverage compare it with h5py's lzf_compress.
 * ------------------------------------------------------------------------------------------------------------- */
#define LZF_HLOG 17
#define LZF_HSIZE (1u << LZF_HLOG)
#define LZF_MAX_LIT 32
#define LZF_MAX_OFF 8192
#define LZF_MAX_REF 264

typedef struct {
    uint64_t *slot; /* (stamp << 32) | position + 1 */
    uint64_t stamp;
} lzf_table;

static inline uint32_t lzf_idx(uint32_t h) { return ((h >> (24 - LZF_HLOG)) - h) & (LZF_HSIZE - 1); }

/* first index >= from where a[i] != b[i], or `bound` when none below it */
static inline int64_t lzf_mismatch(const uint8_t *a, const uint8_t *b, int64_t from, int64_t bound) {
    int64_t i = from;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && defined(__GNUC__)
    for (; i + 8 <= bound; i += 8) {
        uint64_t x, y;
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        if (x != y) return i + (__builtin_ctzll(x ^ y) >> 3);
    }
#endif
    for (; i < bound; i++)
        if (a[i] != b[i]) return i;
    return bound;
}

/* One more literal byte in[*i] into the open literal run (closed at 32 bytes, a new one opened). */
static inline void lzf_literal(const uint8_t *in, int64_t *i, uint8_t *out, int64_t *o, int64_t *lit) {
    ++*lit;
    out[(*o)++] = in[(*i)++];
    if (*lit == LZF_MAX_LIT) {
        out[*o - *lit - 1] = (uint8_t)(*lit - 1);
        *lit = 0;
        ++*o;
    }
}

/* Compress in[0, n) into out[0, cap); the compressed length, or 0 when it does not fit (or n or cap is 0). */
static uint32_t lzf_encode(lzf_table *t, const uint8_t *in, int64_t n, uint8_t *out, int64_t cap) {
    if (n <= 0 || cap <= 0) return 0;
    if (++t->stamp == 0xFFFFFFFFu) { /* the stamps wrapped: forget every entry */
        memset(t->slot, 0, LZF_HSIZE * sizeof(uint64_t));
        t->stamp = 1;
    }
    uint64_t stamp = t->stamp << 32;
    int64_t i = 0, o = 1, lit = 0; /* o - lit - 1: the pending literal run's control byte */
    uint32_t h = n >= 2 ? ((uint32_t)in[0] << 8) | in[1] : 0;
    while (i < n - 2) {
        h = (h << 8) | in[i + 2];
        uint64_t *slot = t->slot + lzf_idx(h);
        uint64_t e = *slot;
        *slot = stamp | (uint64_t)(i + 1);
        int64_t ref = (e >> 32) == (stamp >> 32) ? (int64_t)(e & 0xFFFFFFFFu) - 1 : -1;
        if (ref > 0 && i - ref - 1 < LZF_MAX_OFF && i + 4 < n && in[ref] == in[i] && in[ref + 1] == in[i + 1] &&
            in[ref + 2] == in[i + 2]) {
            int64_t off = i - ref - 1, maxlen = n - i - 2, len;
            if (maxlen > LZF_MAX_REF) maxlen = LZF_MAX_REF;
            if (o + 4 >= cap && o - !lit + 4 >= cap) return 0;
            out[o - lit - 1] = (uint8_t)(lit - 1);
            o -= !lit;
            /* liblzf's loop: 16 bytes unrolled when maxlen > 16, then on while below maxlen (so up to 19) */
            if (maxlen > 16) {
                int64_t m = lzf_mismatch(in + ref, in + i, 3, maxlen > 19 ? maxlen : 19);
                len = m <= 18 ? m : (m < maxlen ? m : (maxlen > 19 ? maxlen : 19));
            } else {
                len = lzf_mismatch(in + ref, in + i, 3, maxlen);
            }
            int64_t code = len - 2; /* bytes copied by the decoder: code + 2 */
            if (code < 7) {
                out[o++] = (uint8_t)((off >> 8) + (code << 5));
            } else {
                out[o++] = (uint8_t)((off >> 8) + (7 << 5));
                out[o++] = (uint8_t)(code - 7);
            }
            out[o++] = (uint8_t)off;
            lit = 0;
            o++;
            i += len;
            if (i >= n - 2) break;
            h = ((uint32_t)in[i - 1] << 8) | in[i];
            h = (h << 8) | in[i + 1];
            t->slot[lzf_idx(h)] = stamp | (uint64_t)i; /* position i - 1, stored + 1 */
        } else {
            if (o >= cap) return 0;
            lzf_literal(in, &i, out, &o, &lit);
        }
    }
    if (o + 3 > cap) return 0;
    while (i < n) lzf_literal(in, &i, out, &o, &lit);
    out[o - lit - 1] = (uint8_t)(lit - 1);
    o -= !lit;
    return (uint32_t)o;
}

/* lzf_encode for callers outside this file (the tests compare it with h5py's lzf_compress). */
uint32_t cf_lzf_compress(const uint8_t *in, int64_t n, uint8_t *out, int64_t cap) {
    lzf_table t = {calloc(LZF_HSIZE, sizeof(uint64_t)), 0};
    if (!t.slot) return 0;
    uint32_t k = lzf_encode(&t, in, n, out, cap);
    free(t.slot);
    return k;
}

/* ---------------------------------------------------------------------------------------------------------------
 * HDF5's shuffle + lzf filters for add-coverage's chunks (the coverage datasets' pipeline, Helixer's layout): rows
 * of L int64 as HDF5 would store them with h5py's LZF filter (the encoder above: the same bytes). add-coverage ran
 * each window's rows through an in-memory HDF5 file for this, about half of its time, then h5py's own lzf_compress.
 * ------------------------------------------------------------------------------------------------------------- */

/* HDF5's shuffle filter for 8-byte elements: byte b of element i goes to dst[b * L + i]. One pass over the source,
 * eight output streams, which -O3 vectorises (~9 us a 21,384-value row; eight passes of stride 8 were as slow as the
 * whole LZF encoding; an 8 x 8 byte transpose in 64-bit words, tried, ~13 us). */
static void shuffle8(const uint8_t *src, int64_t L, uint8_t *dst) {
    uint8_t *d0 = dst, *d1 = dst + L, *d2 = dst + 2 * L, *d3 = dst + 3 * L, *d4 = dst + 4 * L, *d5 = dst + 5 * L,
            *d6 = dst + 6 * L, *d7 = dst + 7 * L;
    for (int64_t i = 0; i < L; i++) {
        const uint8_t *e = src + 8 * i;
        d0[i] = e[0];
        d1[i] = e[1];
        d2[i] = e[2];
        d3[i] = e[3];
        d4[i] = e[4];
        d5[i] = e[5];
        d6[i] = e[6];
        d7[i] = e[7];
    }
}

/* Row j of `rows` (n rows of L int64, row-major): its bytes shuffled, then lzf-compressed into out + j * L * 8 when
 * that is shorter (the lzf filter gets an output buffer as long as its input); else the shuffled bytes are stored
 * and masks[j] = 2 (HDF5 skips a failed optional filter and records it in the chunk's filter mask: lzf is the
 * second filter). sizes[j]: the stored bytes. Returns 0, or -1 when L * 8 does not fit lzf's 32-bit lengths or
 * memory ran out. */
int cf_shuffle_lzf(const int64_t *rows, int64_t n, int64_t L, uint8_t *out, int64_t *sizes, uint32_t *masks) {
    size_t nb = (size_t)L * 8;
    if (nb > 0xFFFFFFFFu) return -1;
    uint8_t *tmp = malloc(nb ? nb : 1);
    lzf_table t = {calloc(LZF_HSIZE, sizeof(uint64_t)), 0};
    if (!tmp || !t.slot) {
        free(tmp);
        free(t.slot);
        return -1;
    }
    for (int64_t j = 0; j < n; j++) {
        shuffle8((const uint8_t *)(rows + j * L), L, tmp);
        uint8_t *dst = out + (size_t)j * nb;
        uint32_t k = lzf_encode(&t, tmp, (int64_t)nb, dst, (int64_t)nb);
        if (k == 0) {
            memcpy(dst, tmp, nb);
            sizes[j] = (int64_t)nb;
            masks[j] = 2;
        } else {
            sizes[j] = k;
            masks[j] = 0;
        }
    }
    free(tmp);
    free(t.slot);
    return 0;
}
