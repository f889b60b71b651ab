/* Link-list ranking and formatting of the genie3 stage.
 *
 * Ranking: genie3_order_desc gives the stable order of n values by value descending (ties keep their input
 * order), the order np.lexsort((position, -value)) gives, by an LSD radix sort (8-bit digits, digits that are
 * the same for every key skipped): ~6 linear passes instead of a comparison merge sort (~0.3 us per element at
 * 25 M), and no comparison whose outcome could depend on the CPU.
 *
 * Formatting: one line "regulator<TAB>target<TAB>%.9g<LF>" per ranked pair.
 *
 * Why C: at thousands of genes the link list has tens of millions of lines and Python spends ~0.9 us on each
 * (an f-string, a join, an encode): at 5,000 genes that was a third of the run. The number is printed with the C
 * library's "%.9g", which is exact (correctly rounded, ties to even) like Python's format(x, ".9g"), so the
 * bytes are those of the Python writer (tests compare both on edge cases). Names are copied as given (bytes of
 * their UTF-8 encoding). The process' LC_NUMERIC is "C" under Python unless a program changes it; the caller
 * checks the decimal point before using this. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int genie3_links_version(void) { return 2; }

/* Lines for pairs k in [0, n): regulator rows[k], target cols[k], value vals[k]. Names: concatenated bytes
 * with offsets (name i is rnames[roff[i] .. roff[i+1])). out has room for cap bytes; returns the bytes
 * written, or -1 if they would not fit (nothing is promised about out then). */
int64_t genie3_format_links(const char *rnames, const int64_t *roff, const char *tnames, const int64_t *toff,
                            const int64_t *rows, const int64_t *cols, const double *vals, int64_t n,
                            char *out, int64_t cap) {
    int64_t o = 0;
    for (int64_t k = 0; k < n; k++) {
        const int64_t r = rows[k], c = cols[k];
        const int64_t lr = roff[r + 1] - roff[r], lc = toff[c + 1] - toff[c];
        if (o + lr + lc + 2 + 32 > cap) return -1;
        memcpy(out + o, rnames + roff[r], (size_t)lr); o += lr;
        out[o++] = '\t';
        memcpy(out + o, tnames + toff[c], (size_t)lc); o += lc;
        out[o++] = '\t';
        const int w = snprintf(out + o, 32, "%.9g", vals[k]);
        if (w < 0 || w >= 31) return -1;
        o += w;
        out[o++] = '\n';
    }
    return o;
}

/* The k-th largest of n values, ties in input order: value i is wp[i] (nk == NULL) or wp[nk[i]], and out[k]
 * has position i or nk[i] (positions < 2^32, values finite; -0.0 equals 0.0). Returns 0, or -1 when memory runs
 * out. LSD radix sort on the 64-bit key "bits of -value, made unsigned-monotone" in 8-bit digits
 * (8 passes; a digit every key shares is skipped), positions carried along: stable by construction. 8-bit
 * digits: 11-bit ones (6 passes) were slower at 25 M values (scatter into 2,048 buckets misses the caches).
 * The first nout positions are written as rows[k] = rord[pos / T], cols[k] = cord[pos % T]. */
#define RBITS 8
#define RBUCKETS (1 << RBITS)
#define RPASSES ((64 + RBITS - 1) / RBITS)
int genie3_order_desc(const double *wp, const int64_t *nk, int64_t n, int64_t T, const int64_t *rord,
                      const int64_t *cord, int64_t nout, int64_t *rows, int64_t *cols) {
    if (n <= 0) return 0;
    uint64_t *k0 = malloc(sizeof(uint64_t) * (size_t)n), *k1 = malloc(sizeof(uint64_t) * (size_t)n);
    uint32_t *p0 = malloc(sizeof(uint32_t) * (size_t)n), *p1 = malloc(sizeof(uint32_t) * (size_t)n);
    size_t (*hist)[RBUCKETS] = calloc(RPASSES, sizeof(*hist));
    if (!k0 || !k1 || !p0 || !p1 || !hist) { free(k0); free(k1); free(p0); free(p1); free(hist); return -1; }
    for (int64_t i = 0; i < n; i++) {
        const int64_t at = nk ? nk[i] : i;
        const double v = wp[at] + 0.0;                    /* -0.0 -> +0.0 */
        uint64_t u; memcpy(&u, &v, 8);
        u = (u >> 63) ? ~u : (u | 0x8000000000000000ULL); /* ascending in value */
        u = ~u;                                           /* ascending in -value */
        k0[i] = u; p0[i] = (uint32_t)at;
        for (int d = 0; d < RPASSES; d++) hist[d][(u >> (RBITS * d)) & (RBUCKETS - 1)]++;
    }
    for (int d = 0; d < RPASSES; d++) {
        size_t *h = hist[d];
        int trivial = 0;
        for (int b = 0; b < RBUCKETS; b++) if (h[b] == (size_t)n) { trivial = 1; break; }
        if (trivial) continue;                            /* every key has this digit: order unchanged */
        size_t sum = 0;
        for (int b = 0; b < RBUCKETS; b++) { const size_t c = h[b]; h[b] = sum; sum += c; }
        const int sh = RBITS * d;
        for (int64_t i = 0; i < n; i++) {
            const uint64_t u = k0[i];
            const size_t at = h[(u >> sh) & (RBUCKETS - 1)]++;
            k1[at] = u; p1[at] = p0[i];
        }
        uint64_t *tk = k0; k0 = k1; k1 = tk;
        uint32_t *tp = p0; p0 = p1; p1 = tp;
    }
    if (nout > n) nout = n;
    for (int64_t i = 0; i < nout; i++) { const int64_t q = p0[i]; rows[i] = rord[q / T]; cols[i] = cord[q % T]; }
    free(k0); free(k1); free(p0); free(p1); free(hist);
    return 0;
}
