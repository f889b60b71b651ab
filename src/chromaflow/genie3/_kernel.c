/* chromaflow genie3 fast engine: grow fully grown regression trees (RF or extra-trees) for ONE target
 * and return only the mean unnormalised impurity-decrease importances. No tree is stored.
 *
 * Written for chromaflow from the algorithm description (Breiman 2001; Geurts et al. 2006;
 * Huynh-Thu et al. 2010); follows scikit-learn's documented split rules: squared error, best split over
 * K features drawn without replacement per node (drawing continues while only constant features were
 * seen), min_samples_split 2, min_samples_leaf 1, bootstrap multiplicities as (integer) sample weights.
 *
 * Sort-free split search (RF): for every gene we keep its samples' order (order[g][pos] = sample) and the
 * inverse (pos[g][sample]), uint16. A node's samples, in feature order, are read by setting one bit per
 * sample at its position in a bitmap of n bits and walking the set bits (ctz): O(m + n/64) per feature,
 * no comparison sort. Tied values (exactly equal float32) are never separated.
 *
 * Build: cc -O3 -shared -fPIC -o libgenie3k.so _kernel.c -lm   (done at run time by fast.py)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#define KERNEL_VERSION 6

typedef struct { uint64_t s[4]; } rng_t;

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t rng_next(rng_t *r) {            /* xoshiro256** */
    uint64_t *s = r->s;
    const uint64_t result = rotl64(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t; s[3] = rotl64(s[3], 45);
    return result;
}

static void rng_seed(rng_t *r, uint64_t seed) {         /* splitmix64 expansion */
    for (int i = 0; i < 4; i++) {
        uint64_t z = (seed += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        r->s[i] = z ^ (z >> 31);
    }
}

static inline uint32_t rand_below(rng_t *r, uint32_t n) {   /* Lemire multiply-shift */
    return (uint32_t)(((rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

static inline double rand01(rng_t *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

int genie3_kernel_version(void) { return KERNEL_VERSION; }

typedef struct { int start, end; } node_t;

/* One target, n_trees trees. Returns 0 on success, <0 on allocation failure / bad sizes.
 *   values: n_genes*n float32, row g = values of gene g
 *   order, pos: n_genes*n uint16 (RF only; may be NULL for ET): stable argsort of each row and its inverse
 *   feat  : p gene indices of the inputs; y: n doubles (scaled target)
 *   method: 0 = RF (bootstrap, best split), 1 = ET (no bootstrap, one random threshold per feature)
 *   out   : p doubles, receives the mean over trees of sum(decrease)/w_root per input
 */
int genie3_target(const float *values, const uint16_t *order, const uint16_t *pos, int n,
                  const int32_t *feat, int p, const double *y, int n_trees, int K, int method,
                  uint64_t seed, double *out) {
    if (n < 2 || n > 65535 || p < 1 || K < 1) return -2;
    if (method == 0 && (!order || !pos)) return -3;
    if (K > p) K = p;
    rng_t rng; rng_seed(&rng, seed);
    const int nwords = (n + 63) / 64;
    double *wy = malloc(sizeof(double) * n), *inv = malloc(sizeof(double) * (n + 1));
    double *acc = calloc((size_t)p, sizeof(double));
    int *wi = malloc(sizeof(int) * n);
    int32_t *idx = malloc(sizeof(int32_t) * n), *perm = malloc(sizeof(int32_t) * p);
    uint64_t *bm = calloc((size_t)nwords, sizeof(uint64_t));
    node_t *stack = malloc(sizeof(node_t) * (n + 2));
    int ok = wy && inv && acc && wi && idx && perm && bm && stack;
    if (!ok) goto done;
    for (int f = 0; f < p; f++) perm[f] = f;
    inv[0] = 0.0;
    for (int c = 1; c <= n; c++) inv[c] = 1.0 / (double)c;
    const double inv_root = 1.0 / (double)n;   /* w_root = n (sum of bootstrap counts, or n) */

    for (int t = 0; t < n_trees; t++) {
        int m0 = 0;
        if (method == 0) {
            memset(wi, 0, sizeof(int) * n);
            for (int i = 0; i < n; i++) wi[rand_below(&rng, (uint32_t)n)] += 1;
            for (int i = 0; i < n; i++) if (wi[i] > 0) idx[m0++] = i;
        } else {
            for (int i = 0; i < n; i++) { wi[i] = 1; idx[m0++] = i; }
        }
        for (int i = 0; i < n; i++) wy[i] = (double)wi[i] * y[i];
        int sp = 0;
        stack[sp].start = 0; stack[sp].end = m0; sp++;
        while (sp > 0) {
            sp--;
            const int start = stack[sp].start, end = stack[sp].end, m = end - start;
            if (m < 2) continue;
            double S = 0, S2 = 0; int Wi = 0;
            for (int k = start; k < end; k++) { int s = idx[k]; Wi += wi[s]; S += wy[s]; S2 += wy[s] * y[s]; }
            const double W = (double)Wi;
            const double imp = S2 / W - (S / W) * (S / W);
            if (imp <= 2.220446049250313e-16) continue;     /* pure node: leaf (as sklearn's EPSILON) */
            const double parent = S * S / W;
            double best = -INFINITY, bthr_v = 0; int bestf = -1, bthr_p = 0;
            int f_i = p, visited = 0, nconst = 0;
            while (f_i > 0 && (visited < K || visited <= nconst)) {
                int j = (int)rand_below(&rng, (uint32_t)f_i);
                int f = perm[j]; perm[j] = perm[f_i - 1]; perm[f_i - 1] = f; f_i--;
                visited++;
                const size_t g = (size_t)feat[f] * (size_t)n;
                const float *xv = values + g;
                if (method == 0) {
                    const uint16_t *pf = pos + g, *of = order + g;
                    if (m == 2) {        /* the only possible split; every non-constant feature gives it */
                        int s0 = idx[start], s1 = idx[start + 1];
                        if (xv[s0] == xv[s1]) { nconst++; continue; }
                        best = wy[s0] * wy[s0] * inv[wi[s0]] + wy[s1] * wy[s1] * inv[wi[s1]];
                        bestf = f; bthr_p = pf[s0] < pf[s1] ? pf[s0] : pf[s1];
                        break;
                    }
                    int wlo = 0, whi = nwords - 1;
                    if (nwords <= 8) {               /* small n: scan every word, no min/max tracking */
                        for (int k = start; k < end; k++) {
                            int q = pf[idx[k]];
                            bm[q >> 6] |= 1ULL << (q & 63);
                        }
                    } else {
                        wlo = nwords; whi = -1;
                        for (int k = start; k < end; k++) {
                            int q = pf[idx[k]], wd = q >> 6;
                            bm[wd] |= 1ULL << (q & 63);
                            wlo = wd < wlo ? wd : wlo;
                            whi = wd > whi ? wd : whi;
                        }
                    }
                    int wl = 0, prevq = -1, boundary = 0; double sl = 0; float prev = 0;
                    for (int wd = wlo; wd <= whi; wd++) {
                        uint64_t bits = bm[wd];
                        bm[wd] = 0;
                        while (bits) {
                            int q = (wd << 6) | __builtin_ctzll(bits);
                            bits &= bits - 1;
                            int s = of[q];
                            float v = xv[s];
                            if (prevq >= 0 && v != prev) {
                                boundary = 1;
                                double sr = S - sl;
                                double proxy = sl * sl * inv[wl] + sr * sr * inv[Wi - wl];
                                if (proxy > best) { best = proxy; bestf = f; bthr_p = prevq; }
                            }
                            wl += wi[s]; sl += wy[s]; prev = v; prevq = q;
                        }
                    }
                    if (!boundary) nconst++;
                } else {
                    float vmin = INFINITY, vmax = -INFINITY;
                    for (int k = start; k < end; k++) {
                        float v = xv[idx[k]];
                        if (v < vmin) vmin = v;
                        if (v > vmax) vmax = v;
                    }
                    if (vmax <= vmin + 1e-7f) { nconst++; continue; }
                    double thr = (double)vmin + rand01(&rng) * ((double)vmax - (double)vmin);
                    if (thr >= (double)vmax) thr = (double)vmin;
                    int wl = 0; double sl = 0;
                    for (int k = start; k < end; k++) {
                        int s = idx[k];
                        if ((double)xv[s] <= thr) { wl += wi[s]; sl += wy[s]; }
                    }
                    if (wl <= 0 || wl >= Wi) continue;
                    double sr = S - sl;
                    double proxy = sl * sl * inv[wl] + sr * sr * inv[Wi - wl];
                    if (proxy > best) { best = proxy; bestf = f; bthr_v = thr; }
                }
            }
            if (bestf < 0) continue;                     /* only constant features: leaf */
            acc[bestf] += (best - parent) * inv_root;
            /* partition idx[start:end) into left (<= threshold) | right */
            const size_t g = (size_t)feat[bestf] * (size_t)n;
            int i = start, j = end - 1;
            if (method == 0) {
                const uint16_t *pf = pos + g;
                while (i <= j) {
                    if (pf[idx[i]] <= bthr_p) i++;
                    else { int tmpi = idx[i]; idx[i] = idx[j]; idx[j] = tmpi; j--; }
                }
            } else {
                const float *xv = values + g;
                while (i <= j) {
                    if ((double)xv[idx[i]] <= bthr_v) i++;
                    else { int tmpi = idx[i]; idx[i] = idx[j]; idx[j] = tmpi; j--; }
                }
            }
            stack[sp].start = i; stack[sp].end = end; sp++;
            stack[sp].start = start; stack[sp].end = i; sp++;
        }
    }
    for (int f = 0; f < p; f++) out[f] = acc[f] / (double)n_trees;
done:
    free(wy); free(inv); free(acc); free(wi); free(idx); free(perm); free(bm); free(stack);
    return ok ? 0 : -1;
}
