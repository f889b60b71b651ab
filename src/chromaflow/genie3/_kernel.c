/* chromaflow genie3 fast engine: grow fully grown regression trees (RF or extra-trees) for ONE target
 * and return only the mean unnormalised impurity-decrease importances. No tree is stored.
 *
 * Written for chromaflow from the algorithm description (Breiman 2001; Geurts et al. 2006;
 * Huynh-Thu et al. 2010); mirrors scikit-learn's documented split rules: squared error, best split over
 * K features drawn without replacement per node (drawing continues while only constant features were
 * seen), min_samples_split 2, min_samples_leaf 1, bootstrap multiplicities as sample weights.
 *
 * Inputs: dense per-gene ranks (uint16, gene-major, ties share a rank) for RF, float32 values for ET.
 * Build: cc -O3 -shared -fPIC -o libgenie3k.so _kernel.c -lm   (done at run time by fast.py)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#define KERNEL_VERSION 3

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

/* sort keys (rank << 16 | local position) ascending */
static void sort_keys(uint32_t *key, uint32_t *tmp, int m, uint32_t rmin, uint32_t rmax, int *cnt) {
    if (m <= 24) {
        for (int i = 1; i < m; i++) {
            uint32_t v = key[i]; int j = i - 1;
            while (j >= 0 && key[j] > v) { key[j + 1] = key[j]; j--; }
            key[j + 1] = v;
        }
        return;
    }
    uint32_t range = rmax - rmin + 1;
    if (range <= (uint32_t)(8 * m)) {                     /* counting sort on rank */
        memset(cnt, 0, sizeof(int) * (range + 1));
        for (int i = 0; i < m; i++) cnt[(key[i] >> 16) - rmin + 1]++;
        for (uint32_t b = 1; b <= range; b++) cnt[b] += cnt[b - 1];
        for (int i = 0; i < m; i++) tmp[cnt[(key[i] >> 16) - rmin]++] = key[i];
        memcpy(key, tmp, sizeof(uint32_t) * m);
        return;
    }
    /* LSD radix, two 8-bit passes over the 16-bit rank (positions are already ascending) */
    int c[257];
    for (int pass = 0; pass < 2; pass++) {
        int shift = 16 + 8 * pass;
        memset(c, 0, sizeof c);
        for (int i = 0; i < m; i++) c[((key[i] >> shift) & 255) + 1]++;
        for (int b = 1; b <= 256; b++) c[b] += c[b - 1];
        for (int i = 0; i < m; i++) tmp[c[(key[i] >> shift) & 255]++] = key[i];
        memcpy(key, tmp, sizeof(uint32_t) * m);
    }
}

/* One target, n_trees trees. Returns 0 on success, <0 on allocation failure / bad sizes.
 *   ranks : n_genes*n uint16, row g = dense ranks of gene g (RF)      (may be NULL for ET)
 *   values: n_genes*n float32, row g = values of gene g (ET)         (may be NULL for RF)
 *   feat  : p gene indices of the inputs; y: n doubles (scaled target)
 *   method: 0 = RF (bootstrap, best split), 1 = ET (no bootstrap, one random threshold per feature)
 *   out   : p doubles, receives the mean over trees of sum(decrease)/w_root per input
 */
int genie3_target(const uint16_t *ranks, const float *values, int n, const int32_t *feat, int p,
                  const double *y, int n_trees, int K, int method, uint64_t seed, double *out) {
    if (n < 2 || n > 65535 || p < 1 || K < 1) return -2;
    if (K > p) K = p;
    rng_t rng; rng_seed(&rng, seed);
    double *w = malloc(sizeof(double) * n), *wy = malloc(sizeof(double) * n);
    double *acc = calloc((size_t)p, sizeof(double));
    int32_t *idx = malloc(sizeof(int32_t) * n), *perm = malloc(sizeof(int32_t) * p);
    uint32_t *key = malloc(sizeof(uint32_t) * n), *tmp = malloc(sizeof(uint32_t) * n);
    int *cnt = malloc(sizeof(int) * (n + 2));
    node_t *stack = malloc(sizeof(node_t) * (n + 2));
    int ok = w && wy && acc && idx && perm && key && tmp && cnt && stack;
    if (!ok) goto done;
    for (int f = 0; f < p; f++) perm[f] = f;

    for (int t = 0; t < n_trees; t++) {
        int m0 = 0;
        if (method == 0) {
            for (int i = 0; i < n; i++) w[i] = 0.0;
            for (int i = 0; i < n; i++) w[rand_below(&rng, (uint32_t)n)] += 1.0;
            for (int i = 0; i < n; i++) if (w[i] > 0) idx[m0++] = i;
        } else {
            for (int i = 0; i < n; i++) { w[i] = 1.0; idx[m0++] = i; }
        }
        for (int i = 0; i < n; i++) wy[i] = w[i] * y[i];
        const double inv_root = 1.0 / (double)n;   /* w_root = n (sum of bootstrap counts, or n) */
        int sp = 0;
        stack[sp].start = 0; stack[sp].end = m0; sp++;
        while (sp > 0) {
            sp--;
            const int start = stack[sp].start, end = stack[sp].end, m = end - start;
            if (m < 2) continue;
            double W = 0, S = 0, S2 = 0;
            for (int k = start; k < end; k++) { int s = idx[k]; W += w[s]; S += wy[s]; S2 += wy[s] * y[s]; }
            double imp = S2 / W - (S / W) * (S / W);
            if (imp <= 2.220446049250313e-16) continue;
            const double parent = S * S / W;
            double best = -INFINITY; int bestf = -1; uint32_t bthr_r = 0; double bthr_v = 0;
            int f_i = p, visited = 0, nconst = 0;
            while (f_i > 0 && (visited < K || visited <= nconst)) {
                int j = (int)rand_below(&rng, (uint32_t)f_i);
                int f = perm[j]; perm[j] = perm[f_i - 1]; perm[f_i - 1] = f; f_i--;
                visited++;
                const size_t g = (size_t)feat[f] * (size_t)n;
                if (method == 0) {
                    const uint16_t *rk = ranks + g;
                    uint32_t rmin = 0xFFFFFFFFu, rmax = 0;
                    for (int k = 0; k < m; k++) {
                        uint32_t r = rk[idx[start + k]];
                        key[k] = (r << 16) | (uint32_t)k;
                        if (r < rmin) rmin = r;
                        if (r > rmax) rmax = r;
                    }
                    if (rmin == rmax) { nconst++; continue; }
                    sort_keys(key, tmp, m, rmin, rmax, cnt);
                    double wl = 0, sl = 0;
                    for (int k = 0; k < m - 1; k++) {
                        int s = idx[start + (key[k] & 0xFFFFu)];
                        wl += w[s]; sl += wy[s];
                        if ((key[k] >> 16) == (key[k + 1] >> 16)) continue;
                        double wr = W - wl, sr = S - sl;
                        double proxy = sl * sl / wl + sr * sr / wr;
                        if (proxy > best) { best = proxy; bestf = f; bthr_r = key[k] >> 16; }
                    }
                } else {
                    const float *xv = values + g;
                    float vmin = INFINITY, vmax = -INFINITY;
                    for (int k = start; k < end; k++) {
                        float v = xv[idx[k]];
                        if (v < vmin) vmin = v;
                        if (v > vmax) vmax = v;
                    }
                    if (vmax <= vmin + 1e-7f) { nconst++; continue; }
                    double thr = (double)vmin + rand01(&rng) * ((double)vmax - (double)vmin);
                    if (thr >= (double)vmax) thr = (double)vmin;
                    double wl = 0, sl = 0;
                    for (int k = start; k < end; k++) {
                        int s = idx[k];
                        if ((double)xv[s] <= thr) { wl += w[s]; sl += wy[s]; }
                    }
                    double wr = W - wl, sr = S - sl;
                    if (wl <= 0 || wr <= 0) continue;
                    double proxy = sl * sl / wl + sr * sr / wr;
                    if (proxy > best) { best = proxy; bestf = f; bthr_v = thr; }
                }
            }
            if (bestf < 0) continue;                     /* only constant features: leaf */
            acc[bestf] += (best - parent) * inv_root;
            /* partition idx[start:end) into <= threshold | > threshold */
            const size_t g = (size_t)feat[bestf] * (size_t)n;
            int i = start, j = end - 1;
            if (method == 0) {
                const uint16_t *rk = ranks + g;
                while (i <= j) {
                    if (rk[idx[i]] <= bthr_r) i++;
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
    free(w); free(wy); free(acc); free(idx); free(perm); free(key); free(tmp); free(cnt); free(stack);
    return ok ? 0 : -1;
}
