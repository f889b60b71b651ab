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

/* Maximal runs of equal values of x (m == NULL) or of avg2(x, m). With starts == NULL only counts them; else
 * writes each run's start + offset, end + offset and value (float32: the track's dtype). Returns the number of
 * runs. Branch-free: values change every ~3 bp in predictions, where a branch per position mispredicts. */
#define RUNS_LOOP(VALUE)                                                                                         \
    do {                                                                                                         \
        int64_t prev = (VALUE(0)), k = 1;                                                                        \
        if (!starts) {                                                                                           \
            for (int64_t i = 1; i < n; i++) {                                                                    \
                int64_t v = (VALUE(i));                                                                          \
                k += (v != prev);                                                                                \
                prev = v;                                                                                        \
            }                                                                                                    \
            return k;                                                                                            \
        }                                                                                                        \
        starts[0] = offset;                                                                                      \
        vals[0] = (float)prev;                                                                                   \
        for (int64_t i = 1; i < n; i++) {                                                                        \
            int64_t v = (VALUE(i));                                                                              \
            int64_t c = (v != prev);                                                                             \
            ends[k - 1] = i + offset;     /* final once the next run starts */                                   \
            starts[k] = i + offset;                                                                              \
            vals[k] = (float)v;                                                                                  \
            k += c;                                                                                              \
            prev = v;                                                                                            \
        }                                                                                                        \
        ends[k - 1] = n + offset;                                                                                \
        return k;                                                                                                \
    } while (0)
#define X_ONLY(i) ((int64_t)x[i])
#define X_AVG(i) avg2(x[i], m[i])

int64_t cf_runs(const int32_t *x, const int32_t *m, int64_t n, int64_t offset, int64_t *starts, int64_t *ends,
                float *vals) {
    if (n <= 0) return 0;
    if (m) RUNS_LOOP(X_AVG);
    RUNS_LOOP(X_ONLY);
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
