/* chromaflow genie3 fast engine: for each target gene, grow fully grown regression trees (random forest or
 * extra-trees) on the other regulators and return only the mean unnormalised impurity-decrease importances.
 * No tree is stored.
 *
 * Written for chromaflow from the algorithm description (Breiman 2001; Geurts et al. 2006; Huynh-Thu et al.
 * 2010) and scikit-learn's documented split rules -- no code of GENIE3, arboreto or scikit-learn:
 *   squared error; fully grown (min_samples_split 2, min_samples_leaf 1, a node whose impurity is <= EPSILON
 *   is a leaf); best split over K features drawn without replacement per node, drawing on past K while every
 *   feature seen so far was constant in the node; a feature is constant when max <= min + 1e-7 (float32) and
 *   two consecutive values in a node are never separated when the larger is <= the smaller + 1e-7 (float32);
 *   RF: a bootstrap sample of size n, multiplicities as integer sample weights; ET: no bootstrap, one uniform
 *   threshold in [min, max) per drawn feature. The first maximal split wins (features in draw order,
 *   thresholds in increasing order). Importance of input i = mean over trees of
 *   sum over nodes splitting on i of (w*imp - wL*impL - wR*impR) / w_root, with w_root = n.
 *
 * Split search (RF), no comparison sort per node (one sort of y per target):
 *   pos[r*n + s]  = rank of sample s in regulator r's stable order (uint16, one row per regulator, built once);
 *   lims[...]     = for regulators with values within 1e-7 of each other ("slow" rows): the last rank whose
 *                   value is <= value(s) + 1e-7, so a split between consecutive node samples a < b is allowed
 *                   iff pos[b] > lims[a], and the feature is constant in the node iff pos[last] <= lims[first].
 *   For a node and a drawn feature, each node sample sets one bit at its rank in an n-bit bitmap and stores
 *   its id at that rank (pass 1); walking the set bits (count trailing zeros) visits the node's samples in
 *   feature order, and prefix sums of the integer bootstrap counts and of w*y give every split's score
 *   S_L^2/w_L + S_R^2/w_R (1/w from a table: counts are integers). Cost O(m + n/64) per node and feature;
 *   only the rows of the drawn features are touched (2 bytes per sample), all other data is per node.
 *   All K drawn features of a node are marked before any is walked, so their memory reads overlap.
 *   Nodes of 3 samples: a split isolates the feature's first or last sample, so the 3 possible proxies are
 *   computed once per node and each feature only orders 3 ranks. Nodes of 4..16 samples (n <= 4095): keys
 *   (rank << 4 | local index) sorted by an SSE2 bitonic network (plain C: insertion sort, the same order), then
 *   the same prefix scan as the walk (the same bits); for n <= 128 nodes of 4..8 keep the two-word bitmap.
 *
 * Early stop (nodes of 3..16 samples): for squared error the best split of a node into two groups is contiguous
 *   in y order (Fisher 1958), so the node's best possible partition is the best split of the y ranks. Once a
 *   drawn feature's best split is that partition, no later feature can beat it (the first maximal split wins),
 *   so the remaining draws are made -- the random stream stays what it would have been -- but not evaluated.
 *   The chosen partition is one the full search chooses up to rounding; when a later feature offers the same
 *   partition, the full search may credit it instead, by a last-bit rounding difference of its sums, so importances differ
 *   from the full search as one random forest differs from another, not systematically. A GENIE3_CHECK_EXIT build
 *   evaluates on after each stop and counts later splits beating it (tests: none beyond rounding).
 *
 * Root candidates: balanced over a forest (root_candidates): each tree's are a uniform K-subset as in a random
 *   forest, but every feature is a candidate equally often (+-1) -- a variance reduction, not another model.
 *
 * Prior weights (iRafNet's weighted sampling of split candidates, genie3 --prior): with a weight per
 *   (regulator, target) the candidates of every node are drawn without replacement with probability proportional
 *   to the target's integer weights (quantised by the caller): a draw from the target's alias table (Walker;
 *   built once per target in exact integer arithmetic, O(1) a draw), redrawn while it hits a feature already
 *   drawn in this node (rejection: exactly the conditional distribution over the features not yet drawn); once
 *   less than a quarter of the weight is left undrawn, an O(p) scan of the undrawn features instead. Features of
 *   weight 0 are never drawn: a node draws at most the positive ones. The draws an early stop would skip are not
 *   made (no full-search stream to keep). A target whose weights are all equal (alpha = 0,
 *   or no prior entry) or all 0 is grown exactly as without weights (uniform draws, balanced root candidates),
 *   so the same bytes; balanced root candidates are not used for weighted targets (their roots draw by weight).
 *
 * Out-of-bag rows (genie3 --prior-check prediction; only when the caller asks, a separate instance of the tree loop,
 *   so the plain one is unchanged): each tree's samples with bootstrap count 0 follow the tree as it grows (a split
 *   between in-bag samples a < b sends a row left when its value <= the midpoint of a's and b's values, as
 *   scikit-learn's threshold; ET: the drawn threshold) and add the leaf's mean to their prediction sum; the target's
 *   mean squared error of y over the rows predicted at least once is returned. No random draw is added, the in-bag
 *   partition is untouched: the trees and importances are the same bytes. ET is bagged for it (bag = 1).
 *
 * Determinism: every target's random stream is xoshiro256** seeded (splitmix64) from a 64-bit seed the caller
 * derives from (run seed, target gene NAME: order-invariant); targets are independent, so results do not depend on the
 * number of threads or on which other targets run. Only IEEE double/float add, sub, mul, div and compares
 * are used, in a fixed order; build without -ffast-math, -march=native or FP contraction
 * (-ffp-contract=off): the same bytes on every x86-64 CPU with or without AVX2/AVX-512.
 *
 * Build: cc -O3 -std=c99 -fno-math-errno -ffp-contract=off -fPIC -shared -pthread -o lib.so _kernel.c -lm
 * (done at run time by fast.py).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__) && !defined(GENIE3_NO_SIMD)
#include <emmintrin.h>
#define G3_SSE2 1
#endif

#define KERNEL_VERSION 11
#define EPS_IMP 2.220446049250313e-16   /* scikit-learn's EPSILON: a node at least this pure is a leaf */
#ifndef REJECT_SHIFT
#define REJECT_SHIFT 2                  /* weighted draws: rejection while >= 1/4 of the weight is undrawn */
#endif
#define FEAT_THR 1e-7f                  /* scikit-learn's FEATURE_THRESHOLD, compared in float32 */
#define SLOT_BUDGET (192 * 1024)        /* bytes of per-feature scratch: all K features for usual n */
#ifndef SUMMARY_ABOVE_WORDS
#define SUMMARY_ABOVE_WORDS 16          /* bitmaps of more words keep a summary word of non-zero words */
#endif

#ifdef GENIE3_CHECK_EXIT  /* test builds: after a stop, go on evaluating (best frozen) and count any better split */
#define CHECK_EXIT 1
#else
#define CHECK_EXIT 0
#endif

int genie3_kernel_version(void) { return KERNEL_VERSION; }

/* GENIE3_CHECK_EXIT builds: [early stops, stops beaten by a later feature beyond rounding (1e-10 relative),
 * stops equalled or beaten within rounding]; returns -1 in other builds */
static int64_t check_stats[3];
int genie3_check_stats(int64_t *out) {
    for (int i = 0; i < 3; i++) out[i] = check_stats[i];
    return CHECK_EXIT ? 0 : -1;
}
static inline void check_record(double best, double post) {
    __sync_fetch_and_add(&check_stats[0], 1);
    if (post > best + 1e-10 * fabs(best)) __sync_fetch_and_add(&check_stats[1], 1);
    else if (post >= best) __sync_fetch_and_add(&check_stats[2], 1);
}

/* ------------------------------------------------------------------------------------------------ RNG */
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

/* A node's draws: the features not yet drawn are perm[0..f_i), drawn ones are moved behind them; where[f] is
 * f's position in perm. forced > 0 (a tree's root only): the next draws are perm[f_i - 1], perm[f_i - 2], ...,
 * where root_candidates put the tree's designated root candidates, and use no random number. */
typedef struct {
    int32_t *perm, *where; int forced;
    int weighted, p;                /* weighted draws over p features */
    const uint64_t *qw;             /* integer weight of each feature */
    const uint64_t *thr;            /* alias table: column f keeps f when u < thr[f] (u uniform in [0, tot)) */
    const int32_t *alias;           /*   else gives alias[f] */
    uint32_t *stamp, node;          /* stamp[f] == node: f already drawn in this node */
    uint64_t tot, rem;              /* total weight; weight not yet drawn in this node */
} draw_t;

/* a weighted draw without replacement: feature f with probability qw[f] / (weight not yet drawn); the caller
 * guarantees a positive weight is left (*f_i counts the positive features not drawn) */
static inline int draw_weighted(rng_t *rng, draw_t *d, int *f_i) {
    int f;
    if ((d->rem << REJECT_SHIFT) >= d->tot) {     /* rejection from the alias table: < 2^REJECT_SHIFT tries on average */
        for (;;) {
            const uint64_t r = rng_next(rng);
            const int col = (int)(((r >> 32) * (uint64_t)d->p) >> 32);
            const uint64_t u = (uint64_t)(((__uint128_t)(r & 0xFFFFFFFFULL) * d->tot) >> 32);
            f = u < d->thr[col] ? col : d->alias[col];
            if (d->stamp[f] != d->node) break;
        }
    } else {                                     /* little weight left: scan the undrawn features */
        uint64_t u = (uint64_t)(((__uint128_t)rng_next(rng) * d->rem) >> 64);
        for (f = 0; f < d->p; f++) {
            if (d->stamp[f] == d->node) continue;
            if (u < d->qw[f]) break;
            u -= d->qw[f];
        }
    }
    d->stamp[f] = d->node; d->rem -= d->qw[f]; (*f_i)--;
    return f;
}

/* Walker's alias table of integer weights q[0..p) (total tot > 0), exact: column f holds q[f] * p of capacity
 * tot (scaled so that the columns' total is p * tot), topped up from a large column. sw, small, large: scratch */
static void alias_build(const uint64_t *q, int p, uint64_t tot, uint64_t *thr, int32_t *alias, uint64_t *sw,
                        int32_t *small, int32_t *large) {
    int ns = 0, nl = 0;
    for (int f = 0; f < p; f++) {
        sw[f] = q[f] * (uint64_t)p;
        if (sw[f] < tot) small[ns++] = f; else large[nl++] = f;
    }
    while (ns > 0 && nl > 0) {
        const int s = small[--ns], l = large[nl - 1];
        thr[s] = sw[s]; alias[s] = l;
        sw[l] -= tot - sw[s];
        if (sw[l] < tot) { nl--; small[ns++] = l; }
    }
    while (nl > 0) { const int l = large[--nl]; thr[l] = tot; alias[l] = l; }
    while (ns > 0) { const int s = small[--ns]; thr[s] = tot; alias[s] = s; }   /* none: the sums are exact */
}

/* one feature drawn without replacement: a uniform pick among the f_i not yet drawn (moved behind them) */
static inline int draw_feature(rng_t *rng, draw_t *d, int *f_i) {
    if (d->forced > 0) { d->forced--; (*f_i)--; return d->perm[*f_i]; }
    if (d->weighted) return draw_weighted(rng, d, f_i);
    int32_t *perm = d->perm, *where = d->where;
    const int j = (int)rand_below(rng, (uint32_t)*f_i), last = *f_i - 1;
    const int f = perm[j], g = perm[last];
    perm[j] = g; perm[last] = f; where[g] = j; where[f] = last; (*f_i)--;
    return f;
}

/* Balanced root candidates. A random forest's root draws K of the p features; over T trees a feature is among
 * them Binomial(T, K/p) times, and as the root split carries the largest impurity decrease that count drives
 * the noise of the strongest regulators' importances. Here the K features a root draws first are taken from a
 * cycle over all p features: K not yet taken in the current cycle (uniformly), or, when fewer than K are left,
 * all of those plus the rest drawn from a new cycle that leaves them out. No rule here tells features apart, so
 * each tree's root candidates are still a uniform K-subset, in uniform order -- every tree, taken alone, is the
 * random forest's tree and the expected importances are GENIE3's -- while over a forest each feature is a
 * root candidate K*T/p times (+-1). Measured: variance of the top-5 regulators' importances 0.4-0.7x that of
 * independent trees; DREAM4 mean AUPR +0.0008 (36 seeds). cyc/cp: the cycle (cyc[0..cp) taken). */
static void root_candidates(rng_t *rng, int32_t *cyc, int *cp, int p, int K, draw_t *d) {
    int32_t *perm = d->perm, *where = d->where;
    int nd = 0;
#define TAKE_ROOT(F_) do { const int f_ = (F_), at_ = where[f_], tg_ = p - 1 - nd, g_ = perm[tg_]; \
                           perm[tg_] = f_; perm[at_] = g_; where[f_] = tg_; where[g_] = at_; nd++; } while (0)
    int from = p;                                      /* draw from cyc[*cp .. from) */
    if (p - *cp < K) {                                 /* the cycle's last features, then a new cycle */
        for (int k = *cp; k < p; k++) TAKE_ROOT(cyc[k]);
        from = *cp;
        *cp = 0;
    }
    while (nd < K) {
        const int u = *cp + (int)rand_below(rng, (uint32_t)(from - *cp));
        const int32_t v = cyc[u]; cyc[u] = cyc[*cp]; cyc[*cp] = v;
        TAKE_ROOT(v);
        (*cp)++;
    }
#undef TAKE_ROOT
    d->forced = K;
}

/* the next batch of draws into F: within the first K draws the loop condition does not depend on the
 * results, so all K - visited are drawn together (at most B, at most what is left); after that one at a time */
static inline int draw_batch(rng_t *rng, draw_t *d, int *f_i, int32_t *F, int visited, int K, int B) {
    int nb = visited < K ? K - visited : 1;
    if (nb > B) nb = B;
    if (nb > *f_i) nb = *f_i;
    for (int j2 = 0; j2 < nb; j2++) F[j2] = draw_feature(rng, d, f_i);
    return nb;
}

/* after an early stop: the draws the full loop would still make. Once a drawn feature was usable the loop
 * runs while visited < K, so the random stream, and every later node, is what it would have been. */
static inline void skip_draws(rng_t *rng, draw_t *d, int *f_i, int visited, int K) {
    if (d->weighted) return;                            /* weighted: no full-search stream to keep */
    for (; visited < K && *f_i > 0; visited++) (void)draw_feature(rng, d, f_i);
}

static inline double rand01(rng_t *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

static inline int top_bit(uint64_t x) { return 63 - __builtin_clzll(x); }

/* ------------------------------------------------------------------------------------------ workspace */
typedef struct { int32_t start, end; } node_t;

typedef struct {           /* scratch of one drawn feature */
    uint64_t *bm;          /* bitmap over ranks */
    uint64_t *sm;          /* nw > 16: summary, bit i set when bm[i] is non-zero */
    uint16_t *sid;         /* sid[q] = node sample at rank q */
    uint16_t *slim;        /* slow rows: slim[q] = lims of that sample */
} slot_t;

typedef struct {           /* read-only inputs shared by all threads */
    const float *values;   /* G x n, genes x samples */
    const uint16_t *pos;   /* R x n (RF) */
    const uint16_t *lims;  /* slow rows x n (RF) */
    const int32_t *slot;   /* R: row of lims, or -1 (RF) */
    const uint32_t *pw; int64_t ldw;  /* prior weights pw[r * ldw + t], or NULL */
    const int32_t *regs;   /* R regulator gene indices (feature r = gene regs[r]) */
    const int32_t *targets;
    const uint64_t *seeds;
    int n, R, T, n_trees, K_in, K_out, method, tree_norm;
    double *out; int64_t ldo;  /* out[r * ldo + t] */
    int32_t *status;       /* per target: 0 grown, 1 constant target, 2 no inputs, <0 allocation failure */
    double *oob;           /* or NULL: per target [out-of-bag mean squared error of y, samples predicted] */
    int bag;               /* 1: bootstrap ET's trees too (the prior gate's forests: out-of-bag rows) */
    int next;              /* next target to take (atomic) */
} job_t;

typedef struct {           /* per thread; sizes fixed per run */
    int n, nw, nsw, B;
    double *inv, *wy, *wyy, *y, *acc;
    int32_t *wi, *idx, *buf, *perm, *feat, *F, *sf, *where, *cyc;
    uint64_t *qw, *thr, *sw;   /* prior: the target's integer weights, alias thresholds, scratch */
    int32_t *alias, *small, *large; uint32_t *stamp;
    double *sd;            /* tree-normalised importance: the splits of the current tree (feature, decrease) */
    node_t *stack;
    uint64_t *T0, *T1;     /* nw <= 2: the word-0 / word-1 bit of rank q */
    uint64_t *words; uint16_t *shorts, *zlim, *yr;
    struct ykey { double y; int32_t s; } *ys;   /* per target: y sorted, for yr */
    slot_t *slots;
    int32_t *oi, *obuf, *ost; double *psum; int32_t *pcnt;  /* out-of-bag rows (J->oob only) */
} ws_t;

static void ws_free(ws_t *w) {
    free(w->inv); free(w->wy); free(w->wyy); free(w->y); free(w->acc);
    free(w->wi); free(w->idx); free(w->buf); free(w->perm); free(w->feat); free(w->F); free(w->sf); free(w->sd); free(w->where); free(w->cyc);
    free(w->qw); free(w->thr); free(w->sw); free(w->alias); free(w->small); free(w->large); free(w->stamp);
    free(w->stack); free(w->T0); free(w->words); free(w->shorts); free(w->slots); free(w->zlim); free(w->yr); free(w->ys);
    free(w->oi); free(w->obuf); free(w->ost); free(w->psum); free(w->pcnt);
    memset(w, 0, sizeof(*w));
}

static int ws_alloc(ws_t *w, int n, int R, int K, int method, int oob) {
    memset(w, 0, sizeof(*w));
    w->n = n; w->nw = (n + 63) / 64; w->nsw = w->nw > SUMMARY_ABOVE_WORDS ? (w->nw + 63) / 64 : 0;
    const int nwa = w->nw < 2 ? 2 : w->nw;
    const size_t slot_words = (size_t)nwa + (size_t)w->nsw;
    const size_t slot_bytes = 8 * slot_words + 4 * (size_t)n;
    int B = (int)(SLOT_BUDGET / slot_bytes);
    if (B > K) B = K;
    if (B < 1) B = 1;
    if (method != 0) B = 1;
    w->B = B;
    w->inv = malloc(sizeof(double) * ((size_t)n + 1));
    w->wy = malloc(sizeof(double) * n); w->wyy = malloc(sizeof(double) * n); w->y = malloc(sizeof(double) * n);
    w->acc = malloc(sizeof(double) * (R > 0 ? R : 1));
    w->wi = malloc(sizeof(int32_t) * n); w->idx = malloc(sizeof(int32_t) * n); w->buf = malloc(sizeof(int32_t) * n);
    w->perm = malloc(sizeof(int32_t) * (R > 0 ? R : 1)); w->feat = malloc(sizeof(int32_t) * (R > 0 ? R : 1));
    w->F = malloc(sizeof(int32_t) * B);
    w->where = malloc(sizeof(int32_t) * (R > 0 ? R : 1)); w->cyc = malloc(sizeof(int32_t) * (R > 0 ? R : 1));
    {
        const size_t r1 = R > 0 ? (size_t)R : 1;
        w->qw = malloc(8 * r1); w->thr = malloc(8 * r1); w->sw = malloc(8 * r1);
        w->alias = malloc(4 * r1); w->small = malloc(4 * r1); w->large = malloc(4 * r1); w->stamp = malloc(4 * r1);
    }
    w->sf = malloc(sizeof(int32_t) * ((size_t)n + 1)); w->sd = malloc(sizeof(double) * ((size_t)n + 1));
    w->stack = malloc(sizeof(node_t) * ((size_t)n + 2));
    w->T0 = malloc(sizeof(uint64_t) * 256); w->T1 = w->T0 ? w->T0 + 128 : NULL;
    w->words = calloc((size_t)B * slot_words, 8);
    w->shorts = malloc(sizeof(uint16_t) * 2 * (size_t)n * B);
    w->slots = malloc(sizeof(slot_t) * B);
    w->zlim = calloc((size_t)n, sizeof(uint16_t));
    w->yr = malloc(sizeof(uint16_t) * (size_t)n);
    w->ys = malloc(sizeof(*w->ys) * (size_t)n);
    if (!(w->inv && w->wy && w->wyy && w->y && w->acc && w->wi && w->idx && w->buf && w->perm && w->feat && w->F && w->sf && w->sd && w->where && w->cyc && w->qw && w->thr && w->sw && w->alias && w->small && w->large && w->stamp &&
          w->stack && w->T0 && w->words && w->shorts && w->slots && w->zlim && w->yr && w->ys)) {
        ws_free(w);
        return -1;
    }
    if (oob) {
        w->oi = malloc(sizeof(int32_t) * (size_t)n); w->obuf = malloc(sizeof(int32_t) * (size_t)n);
        w->ost = malloc(sizeof(int32_t) * 2 * ((size_t)n + 2));
        w->psum = malloc(sizeof(double) * (size_t)n); w->pcnt = malloc(sizeof(int32_t) * (size_t)n);
        if (!(w->oi && w->obuf && w->ost && w->psum && w->pcnt)) { ws_free(w); return -1; }
    }
    for (int j = 0; j < B; j++) {
        w->slots[j].bm = w->words + (size_t)j * slot_words;
        w->slots[j].sm = w->slots[j].bm + nwa;
        w->slots[j].sid = w->shorts + (size_t)j * 2 * n;
        w->slots[j].slim = w->slots[j].sid + n;
    }
    w->inv[0] = 0.0;
    for (int c = 1; c <= n; c++) w->inv[c] = 1.0 / (double)c;
    for (int q = 0; q < 128; q++) {
        w->T0[q] = q < 64 ? 1ULL << q : 0;
        w->T1[q] = q >= 64 ? 1ULL << (q - 64) : 0;
    }
    return 0;
}

/* -------------------------------------------------------------------------- pass 1: mark the node */
static void pass1(const ws_t *w, const slot_t *sl, const int32_t *idx, int m, const uint16_t *pf,
                  const uint16_t *lf) {
    uint16_t *sid = sl->sid, *slim = sl->slim;
    if (w->nw <= 2) {                 /* bitmap in registers, bits from a table; two chains */
        uint64_t b0 = 0, b1 = 0, e0 = 0, e1 = 0;
        const uint64_t *T0 = w->T0, *T1 = w->T1;
        int k = 0;
        if (lf) {
            for (; k + 1 < m; k += 2) {
                size_t s = (uint32_t)idx[k], q = pf[s], s2 = (uint32_t)idx[k + 1], q2 = pf[s2];
                b0 |= T0[q]; b1 |= T1[q]; e0 |= T0[q2]; e1 |= T1[q2];
                sid[q] = (uint16_t)s; slim[q] = lf[s]; sid[q2] = (uint16_t)s2; slim[q2] = lf[s2];
            }
            if (k < m) {
                size_t s = (uint32_t)idx[k], q = pf[s];
                b0 |= T0[q]; b1 |= T1[q]; sid[q] = (uint16_t)s; slim[q] = lf[s];
            }
        } else {
            for (; k + 1 < m; k += 2) {
                size_t s = (uint32_t)idx[k], q = pf[s], s2 = (uint32_t)idx[k + 1], q2 = pf[s2];
                b0 |= T0[q]; b1 |= T1[q]; e0 |= T0[q2]; e1 |= T1[q2];
                sid[q] = (uint16_t)s; sid[q2] = (uint16_t)s2;
            }
            if (k < m) {
                size_t s = (uint32_t)idx[k], q = pf[s];
                b0 |= T0[q]; b1 |= T1[q]; sid[q] = (uint16_t)s;
            }
        }
        sl->bm[0] = b0 | e0; sl->bm[1] = b1 | e1;
    } else if (w->nsw == 0) {
        uint64_t *bm = sl->bm;
        if (lf) {
            for (int k = 0; k < m; k++) {
                unsigned s = (unsigned)idx[k], q = pf[s];
                bm[q >> 6] |= 1ULL << (q & 63);
                sid[q] = (uint16_t)s; slim[q] = lf[s];
            }
        } else {
            for (int k = 0; k < m; k++) {
                unsigned s = (unsigned)idx[k], q = pf[s];
                bm[q >> 6] |= 1ULL << (q & 63);
                sid[q] = (uint16_t)s;
            }
        }
    } else {
        uint64_t *bm = sl->bm, *sm = sl->sm;
        for (int k = 0; k < m; k++) {
            unsigned s = (unsigned)idx[k], q = pf[s];
            bm[q >> 6] |= 1ULL << (q & 63);
            sm[q >> 12] |= 1ULL << ((q >> 6) & 63);
            sid[q] = (uint16_t)s;
            if (lf) slim[q] = lf[s];
        }
    }
}

/* ------------------------------------------------------------------------ walk: score every split */
/* rows without near-ties: add the sample at rank q to the left side, score the split after it
 * (the highest set bit was cleared, so the last sample never starts a right side) */
#define FAST_STEP(QQ) { \
    unsigned q_ = (QQ); unsigned s_ = sid[q_]; size_t ww_ = (uint32_t)wgt[s_]; \
    pl += ww_; pr -= ww_; sl += wy[s_]; \
    double sr_ = S - sl; \
    double px_ = sl * sl * *pl + sr_ * sr_ * *pr; \
    int gt_ = px_ > lbest; lbest = gt_ ? px_ : lbest; lq = gt_ ? (int)q_ : lq; }

/* rows with near-ties: score the split before the sample at rank q if the values differ by more than
 * FEAT_THR, then add the sample */
#define SLOW_STEP(QQ) { \
    unsigned q_ = (QQ); unsigned s_ = sid[q_]; \
    if (pq >= 0) { \
        double sr_ = S - sl; \
        double px_ = sl * sl * inv[wl] + sr_ * sr_ * inv[Wi - wl]; \
        px_ = (q_ > plim) ? px_ : -INFINITY; \
        int gt_ = px_ > lbest; lbest = gt_ ? px_ : lbest; lq = gt_ ? pq : lq; } \
    wl += wgt[s_]; sl += wy[s_]; plim = slim[q_]; pq = (int)q_; }

/* Best split of the node in one marked feature. Returns 1 if the feature is constant in the node, else 0
 * with *lb = the best proxy (-inf when no boundary qualifies) and *lqo = the rank of the last sample of the
 * best left side. Leaves the slot's bitmap cleared. */
static int walk(const ws_t *w, const slot_t *slt, int slow, int Wi, double S, double *lb, int *lqo) {
    const double *inv = w->inv, *wy = w->wy; const int32_t *wgt = w->wi;
    const uint16_t *sid = slt->sid, *slim = slt->slim;
    double sl = 0, lbest = -INFINITY; int lq = -1;
    if (w->nw <= 2) {
        uint64_t b0 = slt->bm[0], b1 = slt->bm[1];
        if (!slow) {
            const double *pl = inv, *pr = inv + Wi;
            uint64_t c1 = b1 & ~(b1 ? (1ULL << top_bit(b1 | 1)) : 0);
            uint64_t c0 = b0 & ~(b1 ? 0 : (1ULL << top_bit(b0 | 1)));
            while (c0) { unsigned t = (unsigned)__builtin_ctzll(c0); c0 &= c0 - 1; FAST_STEP(t); }
            while (c1) { unsigned t = (unsigned)__builtin_ctzll(c1); c1 &= c1 - 1; FAST_STEP(64 + t); }
        } else {
            unsigned qlo = b0 ? (unsigned)__builtin_ctzll(b0) : 64 + (unsigned)__builtin_ctzll(b1);
            unsigned qhi = b1 ? 64 + (unsigned)top_bit(b1) : (unsigned)top_bit(b0);
            if (qhi <= slim[qlo]) return 1;
            int wl = 0, pq = -1; unsigned plim = 0;
            while (b0) { unsigned t = (unsigned)__builtin_ctzll(b0); b0 &= b0 - 1; SLOW_STEP(t); }
            while (b1) { unsigned t = (unsigned)__builtin_ctzll(b1); b1 &= b1 - 1; SLOW_STEP(64 + t); }
        }
    } else if (w->nsw == 0) {
        uint64_t *bm = slt->bm;
        const int nw = w->nw;
        int tw = nw - 1; while (!bm[tw]) tw--;
        int fw = 0; while (!bm[fw]) fw++;
        if (!slow) {
            const double *pl = inv, *pr = inv + Wi;
            bm[tw] &= ~(1ULL << top_bit(bm[tw]));
            for (int wd = fw; wd <= tw; wd++) {
                uint64_t b = bm[wd]; bm[wd] = 0;
                const unsigned base = (unsigned)wd << 6;
                while (b) { unsigned t = (unsigned)__builtin_ctzll(b); b &= b - 1; FAST_STEP(base + t); }
            }
        } else {
            unsigned qlo = ((unsigned)fw << 6) | (unsigned)__builtin_ctzll(bm[fw]);
            unsigned qhi = ((unsigned)tw << 6) | (unsigned)top_bit(bm[tw]);
            const int constant = qhi <= slim[qlo];
            int wl = 0, pq = -1; unsigned plim = 0;
            for (int wd = fw; wd <= tw; wd++) {
                uint64_t b = bm[wd]; bm[wd] = 0;
                const unsigned base = (unsigned)wd << 6;
                if (constant) continue;
                while (b) { unsigned t = (unsigned)__builtin_ctzll(b); b &= b - 1; SLOW_STEP(base + t); }
            }
            if (constant) return 1;
        }
    } else {
        uint64_t *bm = slt->bm, *sm = slt->sm;
        const int nsw = w->nsw;
        int st = nsw - 1; while (!sm[st]) st--;
        int sf = 0; while (!sm[sf]) sf++;
        const int tw = (st << 6) | top_bit(sm[st]), fw = (sf << 6) | __builtin_ctzll(sm[sf]);
        const int fast = !slow;
        int constant = 0, wl = 0, pq = -1; unsigned plim = 0;
        const double *pl = inv, *pr = inv + Wi;
        if (fast) bm[tw] &= ~(1ULL << top_bit(bm[tw]));
        else constant = (((unsigned)tw << 6) | (unsigned)top_bit(bm[tw])) <=
                        slim[((unsigned)fw << 6) | (unsigned)__builtin_ctzll(bm[fw])];
        for (int si = sf; si <= st; si++) {
            uint64_t sb = sm[si]; sm[si] = 0;
            while (sb) {
                unsigned wd = ((unsigned)si << 6) | (unsigned)__builtin_ctzll(sb); sb &= sb - 1;
                uint64_t b = bm[wd]; bm[wd] = 0;
                const unsigned base = wd << 6;
                if (constant) continue;
                if (fast) { while (b) { unsigned t = (unsigned)__builtin_ctzll(b); b &= b - 1; FAST_STEP(base + t); } }
                else { while (b) { unsigned t = (unsigned)__builtin_ctzll(b); b &= b - 1; SLOW_STEP(base + t); } }
            }
        }
        if (constant) return 1;
    }
    *lb = lbest; *lqo = lq;
    return 0;
}

/* ------------------------------------------------------------------- mid nodes: sorting network */
#define NET_MAX 16        /* nodes of 4..NET_MAX samples know their best partition (when n <= NET_NMAX) */
#define NET_NMAX 4095     /* a key (rank << 4) | local index fits 16 bits */
#define NET_BITMAP_MAX 8  /* n <= 128: nodes of 4..8 samples use the two-word bitmap, larger ones the general path */
#define NET_BATCH 4       /* features drawn (and, for the bitmap, marked) together in these nodes */

typedef struct {          /* a node of 4..NET_MAX samples: its samples in local order (ls padded with ls[0]) */
    int m;
    int32_t ls[NET_MAX]; int lw[NET_MAX]; double lwy[NET_MAX];
} net_t;

#if defined(G3_SSE2)
/* lane mask of a bitonic compare-exchange stage (merge size k, distance d): lane i keeps the minimum */
#define KM(i, k, d) (((((i) & (d)) == 0) == (((i) & (k)) == 0)) ? -1 : 0)
#define KMASK(b, k, d) _mm_set_epi16(KM((b) + 7, k, d), KM((b) + 6, k, d), KM((b) + 5, k, d), KM((b) + 4, k, d), \
                                     KM((b) + 3, k, d), KM((b) + 2, k, d), KM((b) + 1, k, d), KM((b) + 0, k, d))
static inline __attribute__((always_inline)) __m128i cex(__m128i v, __m128i p, __m128i keepmin) {
    const __m128i lo = _mm_min_epi16(v, p), hi = _mm_max_epi16(v, p);
    return _mm_or_si128(_mm_and_si128(keepmin, lo), _mm_andnot_si128(keepmin, hi));
}
#define SW1(v) _mm_shufflehi_epi16(_mm_shufflelo_epi16(v, 0xB1), 0xB1)
#define SW2(v) _mm_shuffle_epi32(v, 0xB1)
#define SW4(v) _mm_shuffle_epi32(v, 0x4E)
#define STAGE(V, b, k, d, SW) V = cex(V, SW(V), KMASK(b, k, d))
/* keys biased by 0x8000 (signed order = unsigned order), ascending; B = NULL: 8 keys in A */
static inline __attribute__((always_inline)) void net_sort(__m128i *A, __m128i *B) {
    __m128i a = *A;
    STAGE(a, 0, 2, 1, SW1); STAGE(a, 0, 4, 2, SW2); STAGE(a, 0, 4, 1, SW1);
    STAGE(a, 0, 8, 4, SW4); STAGE(a, 0, 8, 2, SW2); STAGE(a, 0, 8, 1, SW1);
    if (B) {
        __m128i b = *B;
        STAGE(b, 8, 2, 1, SW1); STAGE(b, 8, 4, 2, SW2); STAGE(b, 8, 4, 1, SW1);
        STAGE(b, 8, 8, 4, SW4); STAGE(b, 8, 8, 2, SW2); STAGE(b, 8, 8, 1, SW1);
        const __m128i lo = _mm_min_epi16(a, b), hi = _mm_max_epi16(a, b);
        a = lo; b = hi;
        STAGE(a, 0, 16, 4, SW4); STAGE(a, 0, 16, 2, SW2); STAGE(a, 0, 16, 1, SW1);
        STAGE(b, 8, 16, 4, SW4); STAGE(b, 8, 16, 2, SW2); STAGE(b, 8, 16, 1, SW1);
        *B = b;
    }
    *A = a;
}
#endif

/* sk[0..m) = the node's keys (rank << 4 | local index) in increasing order */
static inline __attribute__((always_inline)) void net_keys(const net_t *nt, const uint16_t *pf, uint16_t *sk,
                                                            const int wide) {
    const int m = nt->m;
#if defined(G3_SSE2)
    const int32_t *ls = nt->ls;
#define KEY(i) (short)((pf[ls[i]] << 4) | (i))
    __m128i A = _mm_cvtsi32_si128(KEY(0) & 0xFFFF);
    A = _mm_insert_epi16(A, KEY(1), 1); A = _mm_insert_epi16(A, KEY(2), 2); A = _mm_insert_epi16(A, KEY(3), 3);
    A = _mm_insert_epi16(A, KEY(4), 4); A = _mm_insert_epi16(A, KEY(5), 5); A = _mm_insert_epi16(A, KEY(6), 6);
    A = _mm_insert_epi16(A, KEY(7), 7);
    const __m128i bias = _mm_set1_epi16((short)0x8000);
    const __m128i padA = _mm_cmpgt_epi16(_mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7), _mm_set1_epi16((short)(m - 1)));
    A = _mm_xor_si128(_mm_or_si128(A, padA), bias);
    if (wide) {
        __m128i B = _mm_cvtsi32_si128(KEY(8) & 0xFFFF);
        B = _mm_insert_epi16(B, KEY(9), 1); B = _mm_insert_epi16(B, KEY(10), 2); B = _mm_insert_epi16(B, KEY(11), 3);
        B = _mm_insert_epi16(B, KEY(12), 4); B = _mm_insert_epi16(B, KEY(13), 5); B = _mm_insert_epi16(B, KEY(14), 6);
        B = _mm_insert_epi16(B, KEY(15), 7);
        const __m128i padB = _mm_cmpgt_epi16(_mm_setr_epi16(8, 9, 10, 11, 12, 13, 14, 15),
                                             _mm_set1_epi16((short)(m - 1)));
        B = _mm_xor_si128(_mm_or_si128(B, padB), bias);
        net_sort(&A, &B);
        _mm_storeu_si128((__m128i *)(sk + 8), _mm_xor_si128(B, bias));
    } else {
        net_sort(&A, NULL);
    }
    _mm_storeu_si128((__m128i *)sk, _mm_xor_si128(A, bias));
#undef KEY
#else
    (void)wide;
    for (int i = 0; i < m; i++) {                 /* insertion sort: the same order (keys are distinct) */
        const uint16_t key = (uint16_t)((pf[nt->ls[i]] << 4) | i);
        int j = i;
        while (j > 0 && sk[j - 1] > key) { sk[j] = sk[j - 1]; j--; }
        sk[j] = key;
    }
#endif
}

/* Best split of a mid node in one feature: the same arithmetic, in the same order, as walk() (so the same
 * bits); lf = the feature's lims row, or a row of zeros for a feature without near-ties (then every boundary
 * qualifies and the feature is never constant: ranks are distinct and the next rank is >= 1). */
static inline __attribute__((always_inline)) int net_eval(const ws_t *w, const net_t *nt, const uint16_t *pf,
        const uint16_t *lf, int Wi, double S, double *lb, int *lqo, unsigned *lmo, const int wide) {
    uint16_t sk[NET_MAX];
    const int m = nt->m;
    net_keys(nt, pf, sk, wide);
    if ((unsigned)(sk[m - 1] >> 4) <= lf[nt->ls[sk[0] & 15]]) return 1;
    const double *inv = w->inv;
    int wl = 0, lr = -1; double sl = 0, lbest = -INFINITY; unsigned cm = 0, bm = 0;
    for (int k = 0; k < m - 1; k++) {
        const unsigned i = sk[k] & 15, qn = (unsigned)(sk[k + 1] >> 4);
        wl += nt->lw[i]; sl += nt->lwy[i]; cm |= 1u << i;
        const double sr = S - sl;
        double px = sl * sl * inv[wl] + sr * sr * inv[Wi - wl];
        px = qn > lf[nt->ls[i]] ? px : -INFINITY;
        const int gt = px > lbest; lbest = gt ? px : lbest; lr = gt ? k : lr; bm = gt ? cm : bm;
    }
    *lb = lbest; *lmo = bm;
    *lqo = lr >= 0 ? (int)(sk[lr] >> 4) : -1;
    return 0;
}

/* Set up a node of 4..NET_MAX samples and find its best possible partition. For squared error the best
 * split of weighted values into two groups is contiguous in their sorted order (Fisher 1958), so it is the best
 * split of the y ranks (yr as a feature). opt / opt2: that left set and its complement as masks of local
 * samples (a feature may order either group first). */
static inline void net_init(const ws_t *w, net_t *nt, const int32_t *r, int m, int Wi, double S,
                            unsigned *opt, unsigned *opt2) {
    nt->m = m;
    for (int i = 0; i < m; i++) { const int s = r[i]; nt->ls[i] = s; nt->lw[i] = w->wi[s]; nt->lwy[i] = w->wy[s]; }
    for (int i = m; i < NET_MAX; i++) nt->ls[i] = r[0];
    double ub; int lq; unsigned o = 0;
    if (m > 8) net_eval(w, nt, w->yr, w->zlim, Wi, S, &ub, &lq, &o, 1);
    else net_eval(w, nt, w->yr, w->zlim, Wi, S, &ub, &lq, &o, 0);
    *opt = o; *opt2 = ((1u << m) - 1) ^ o;
}

/* -------------------------------------------------------------------------------- one target's forest */
/* feat: p feature rows (into pos/slot, and regs for the gene); y: n doubles; result in w->acc[0..p) */
/* ------------------------------------------------------------------- out-of-bag rows (J->oob only) */
/* a leaf of value v predicts every out-of-bag row of its node, oi[os..oe) */
static void oob_leaf(ws_t *w, int os, int oe, double v) {
    for (int k = os; k < oe; k++) { w->psum[w->oi[k]] += v; w->pcnt[w->oi[k]] += 1; }
}

/* route the node's out-of-bag rows oi[os..oe) by value: x <= thr to the left (first); returns how many go left */
static int oob_split(ws_t *w, int os, int oe, const float *xv, double thr) {
    int32_t *o = w->oi + os, *ob = w->obuf;
    const int mo = oe - os;
    int nl = 0, nr = 0;
    for (int k = 0; k < mo; k++) {
        const int s = o[k], c = (double)xv[s] <= thr;
        ob[nl] = s; ob[mo - 1 - nr] = s;
        nl += c; nr += 1 - c;
    }
    if (mo > 0) memcpy(o, ob, sizeof(int32_t) * (size_t)mo);
    return nl;
}

/* the value threshold of a split between in-bag samples a (largest left value) and b (smallest right value):
 * their midpoint, or a's value where the midpoint rounds onto b's (scikit-learn's rule) */
static double mid_threshold(const float *xv, int a, int b) {
    const double xa = (double)xv[a], xb = (double)xv[b];
    const double t = xa / 2.0 + xb / 2.0;
    return t >= xb ? xa : t;
}

/* RF: the threshold of a partition r[0..nl) | r[nl..m) by the ranks pf of the split feature */
static double rf_threshold(const float *xv, const uint16_t *pf, const int32_t *r, int nl, int m) {
    int a = r[0], b = r[nl];
    for (int k = 1; k < nl; k++) if (pf[r[k]] > pf[a]) a = r[k];
    for (int k = nl + 1; k < m; k++) if (pf[r[k]] < pf[b]) b = r[k];
    return mid_threshold(xv, a, b);
}

/* one target's forest; oob_on (a compile-time constant of the two instances below) adds the out-of-bag rows, so
 * the plain instance has no trace of them */
static inline __attribute__((always_inline)) void grow_forest_impl(ws_t *w, const job_t *J, const int32_t *feat,
                                                                   int p, int K, uint64_t seed, int weighted,
                                                                   const int oob_on) {
    const int n = w->n, method = J->method, n_trees = J->n_trees, B = w->B;
    const uint16_t *pos = J->pos, *lims = J->lims; const int32_t *slot = J->slot;
    const double *inv = w->inv, *y = w->y;
    double *wy = w->wy, *wyy = w->wyy, *acc = w->acc;
    int32_t *wi = w->wi, *idx = w->idx, *buf = w->buf, *perm = w->perm, *F = w->F;
    node_t *stack = w->stack;
    rng_t rng; rng_seed(&rng, seed);
    if (K > p) K = p;
    for (int f = 0; f < p; f++) { perm[f] = f; acc[f] = 0.0; w->where[f] = f; w->cyc[f] = f; }
    draw_t dr = { perm, w->where, 0, 0, p, w->qw, w->thr, w->alias, w->stamp, 0, 0, 0 };
    int npos = p;                                 /* features of positive weight */
    if (weighted) {
        dr.weighted = 1; npos = 0;
        for (int f = 0; f < p; f++) { dr.tot += w->qw[f]; npos += w->qw[f] > 0; w->stamp[f] = 0; }
        alias_build(w->qw, p, dr.tot, w->thr, w->alias, w->sw, w->small, w->large);
    }
    int cycle_pos = 0;
    const double inv_root = 1.0 / (double)n;
    const int tree_norm = J->tree_norm;
    int nsplit = 0, split_trees = 0;
    const int oob = oob_on, boot = method == 0 || (oob_on && J->bag);
    int on = 0;
    if (oob) for (int i = 0; i < n; i++) { w->psum[i] = 0.0; w->pcnt[i] = 0; }
    /* one split's importance: unnormalised (the reference GENIE3) straight into acc; tree-normalised
     * (scikit-learn's feature_importances_, as arboreto) kept until the tree's total is known */
#define ADD_SPLIT(F_, DEC_) do { if (tree_norm) { w->sf[nsplit] = (F_); w->sd[nsplit] = (DEC_); nsplit++; } \
                                 else acc[F_] += (DEC_) * inv_root; } while (0)

    for (int t = 0; t < n_trees; t++) {
        if (boot) {
            memset(wi, 0, sizeof(int32_t) * n);
            for (int i = 0; i < n; i++) wi[rand_below(&rng, (uint32_t)n)] += 1;
        } else {
            for (int i = 0; i < n; i++) wi[i] = 1;
        }
        int m0 = 0;
        for (int i = 0; i < n; i++) {
            const double v = (double)wi[i] * y[i];
            wy[i] = v; wyy[i] = v * y[i];
            if (wi[i] > 0) idx[m0++] = i;
        }
        if (oob) { on = 0; for (int i = 0; i < n; i++) if (wi[i] == 0) w->oi[on++] = i; w->ost[0] = 0; w->ost[1] = on; }
        dr.forced = 0;
        if (K < p && !weighted) root_candidates(&rng, w->cyc, &cycle_pos, p, K, &dr);
        int sp = 0, popped = 0;
        nsplit = 0;
        stack[sp].start = 0; stack[sp].end = m0; sp++;
        while (sp > 0) {
            sp--;
            if (popped++) dr.forced = 0;                         /* designated draws are the root's only */
            const int start = stack[sp].start, end = stack[sp].end, m = end - start;
            const int os = oob ? w->ost[2 * sp] : 0, oe = oob ? w->ost[2 * sp + 1] : 0;
            int32_t *r = idx + start;
            /* the node's weighted sums, from scratch as scikit-learn's criterion computes them */
            int Wi = 0; double Sn = 0, S2n = 0;
            for (int k = 0; k < m; k++) { const int s = r[k]; Wi += wi[s]; Sn += wy[s]; S2n += wyy[s]; }
            const double W = (double)Wi;
            const double imp = S2n / W - (Sn / W) * (Sn / W);
            if (imp <= EPS_IMP) { if (oob) oob_leaf(w, os, oe, Sn / W); continue; }   /* pure node: leaf */
            const double parent = Sn * Sn / W;
            double best = -INFINITY, bthr_v = 0; int bestf = -1, bthr = -1;
            int f_i = p, visited = 0, nconst = 0;
            if (weighted) { dr.node++; dr.rem = dr.tot; f_i = npos; }
            if (method == 0 && m == 2) {
                /* one possible split: the first non-constant drawn feature takes it */
                const unsigned s0 = (unsigned)r[0], s1 = (unsigned)r[1];
                while (f_i > 0 && (visited < K || visited <= nconst)) {
                    const int f = draw_feature(&rng, &dr, &f_i);
                    visited++;
                    const int sr = slot[feat[f]];
                    if (sr >= 0) {
                        const uint16_t *pf = pos + (size_t)feat[f] * n, *lf = lims + (size_t)sr * n;
                        const unsigned q0 = pf[s0], q1 = pf[s1];
                        const unsigned qhi = q0 < q1 ? q1 : q0, lim = q0 < q1 ? lf[s0] : lf[s1];
                        if (qhi <= lim) { nconst++; continue; }
                    }
                    best = wy[s0] * wy[s0] * inv[wi[s0]] + wy[s1] * wy[s1] * inv[wi[s1]];
                    bestf = f;
                    break;
                }
                if (bestf >= 0) ADD_SPLIT(bestf, best - parent);
                if (oob && bestf < 0) oob_leaf(w, os, oe, Sn / W);
                if (oob && bestf >= 0 && oe > os) {
                    const uint16_t *pf = pos + (size_t)feat[bestf] * n;
                    const int lo = pf[s0] < pf[s1] ? (int)s0 : (int)s1, hi = lo == (int)s0 ? (int)s1 : (int)s0;
                    const float *xv = J->values + (size_t)J->regs[feat[bestf]] * n;
                    const int onl = oob_split(w, os, oe, xv, mid_threshold(xv, lo, hi));
                    oob_leaf(w, os, os + onl, y[lo]); oob_leaf(w, os + onl, oe, y[hi]);
                }
                continue;                                        /* children are single samples */
            }
            if (method == 0 && m == 3) {
                /* three samples: a feature's splits isolate its first or its last sample, so the proxies of
                 * isolating each sample are computed once and every feature just orders three ranks. All
                 * features score with these same three numbers, so once one offers the largest, no later one
                 * can replace it (strict >): the remaining draws are made but not evaluated. */
                const unsigned s0 = (unsigned)r[0], s1 = (unsigned)r[1], s2 = (unsigned)r[2];
                double P1[3];
                const unsigned ss[3] = {s0, s1, s2};
                for (int i = 0; i < 3; i++) {
                    const double a = wy[ss[i]], b = Sn - a; const int wa = wi[ss[i]];
                    P1[i] = a * a * inv[wa] + b * b * inv[Wi - wa];
                }
                const double pmax = P1[0] > P1[1] ? (P1[0] > P1[2] ? P1[0] : P1[2]) : (P1[1] > P1[2] ? P1[1] : P1[2]);
                int stop = 0; double post = -INFINITY;
                while (f_i > 0 && (visited < K || visited <= nconst)) {
                    if (!stop && best >= pmax) {
                        stop = 1;
                        if (!CHECK_EXIT) { skip_draws(&rng, &dr, &f_i, visited, K); break; }
                    }
                    const int f = draw_feature(&rng, &dr, &f_i);
                    visited++;
                    const uint16_t *pf = pos + (size_t)feat[f] * n;
                    const unsigned q0 = pf[s0], q1 = pf[s1], q2 = pf[s2];
                    /* lo, mid, hi: local indices in rank order */
                    const int a01 = q0 < q1, a02 = q0 < q2, a12 = q1 < q2;
                    const int lo = a01 ? (a02 ? 0 : 2) : (a12 ? 1 : 2);
                    const int hi = a01 ? (a12 ? 2 : 1) : (a02 ? 2 : 0);
                    const int mid = 3 - lo - hi;
                    const unsigned qq[3] = {q0, q1, q2};
                    double b1 = P1[lo], b2 = P1[hi];
                    const int sr = slot[feat[f]];
                    if (sr >= 0) {
                        const uint16_t *lf = lims + (size_t)sr * n;
                        if (qq[hi] <= lf[ss[lo]]) { nconst++; continue; }
                        b1 = qq[mid] > lf[ss[lo]] ? b1 : -INFINITY;
                        b2 = qq[hi] > lf[ss[mid]] ? b2 : -INFINITY;
                    }
                    if (CHECK_EXIT && stop) { post = b1 > post ? b1 : post; post = b2 > post ? b2 : post; continue; }
                    if (b1 > best) { best = b1; bestf = f; bthr = (int)qq[lo]; }
                    if (b2 > best) { best = b2; bestf = f; bthr = (int)qq[mid]; }
                }
                if (CHECK_EXIT && stop) check_record(best, post);
            } else if (method == 0 && m <= NET_MAX && n <= NET_NMAX && (w->nw > 2 || m <= NET_BITMAP_MAX)) {
                /* 4..16 samples: the node's best possible partition is known (net_init); the draws stop at the
                 * first feature whose best split is that partition (a later one could only equal it). Samples
                 * are ordered by the sorting network, or (n <= 128) by the two-word bitmap, cheaper there. */
                net_t nt;
                unsigned opt, opt2;
                net_init(w, &nt, r, m, Wi, Sn, &opt, &opt2);
                const int bitmap = w->nw <= 2, wide = m > 8;
                int stop = 0; double post = -INFINITY;
                while ((CHECK_EXIT || !stop) && f_i > 0 && (visited < K || visited <= nconst)) {
                    const int nb = draw_batch(&rng, &dr, &f_i, F, visited, K, B < NET_BATCH ? B : NET_BATCH);
                    visited += nb;
                    if (bitmap) {
                        for (int j2 = 0; j2 < nb; j2++) {
                            const int g = feat[F[j2]], sr = slot[g];
                            pass1(w, &w->slots[j2], r, m, pos + (size_t)g * n, sr >= 0 ? lims + (size_t)sr * n : NULL);
                        }
                    }
                    for (int j2 = 0; j2 < nb && (CHECK_EXIT || !stop); j2++) {
                        const int g = feat[F[j2]], sr = slot[g];
                        const uint16_t *pf = pos + (size_t)g * n;
                        double lb; int lq; unsigned lm = 0;
                        int is_const;
                        if (bitmap) {
                            is_const = walk(w, &w->slots[j2], sr >= 0, Wi, Sn, &lb, &lq);
                        } else {
                            const uint16_t *lf = sr >= 0 ? lims + (size_t)sr * n : w->zlim;
                            is_const = wide ? net_eval(w, &nt, pf, lf, Wi, Sn, &lb, &lq, &lm, 1)
                                            : net_eval(w, &nt, pf, lf, Wi, Sn, &lb, &lq, &lm, 0);
                        }
                        if (is_const) { nconst++; continue; }
                        if (CHECK_EXIT && stop) { post = lb > post ? lb : post; continue; }
                        if (lb > best) {
                            best = lb; bestf = F[j2]; bthr = lq;
                            if (bitmap) for (int k = 0; k < m; k++) lm |= (unsigned)(pf[r[k]] <= (unsigned)lq) << k;
                            stop = lm == opt || lm == opt2;
                        }
                    }
                }
                if (stop && !CHECK_EXIT) skip_draws(&rng, &dr, &f_i, visited, K);
                if (CHECK_EXIT && stop) check_record(best, post);
            } else if (method == 0) {
                while (f_i > 0 && (visited < K || visited <= nconst)) {
                    /* draw a batch, mark all, then walk all (in draw order) */
                    const int nb = draw_batch(&rng, &dr, &f_i, F, visited, K, B);
                    visited += nb;
                    for (int j2 = 0; j2 < nb; j2++) {
                        const int g = feat[F[j2]], sr = slot[g];
                        pass1(w, &w->slots[j2], r, m, pos + (size_t)g * n, sr >= 0 ? lims + (size_t)sr * n : NULL);
                    }
                    for (int j2 = 0; j2 < nb; j2++) {
                        double lb; int lq;
                        if (walk(w, &w->slots[j2], slot[feat[F[j2]]] >= 0, Wi, Sn, &lb, &lq)) { nconst++; continue; }
                        if (lb > best) { best = lb; bestf = F[j2]; bthr = lq; }
                    }
                }
            } else {
                /* extra-trees: one uniform threshold in [min, max) per drawn feature */
                while (f_i > 0 && (visited < K || visited <= nconst)) {
                    const int f = draw_feature(&rng, &dr, &f_i);
                    visited++;
                    const float *xv = J->values + (size_t)J->regs[feat[f]] * n;
                    float vmin = INFINITY, vmax = -INFINITY;
                    for (int k = 0; k < m; k++) {
                        const float v = xv[r[k]];
                        vmin = v < vmin ? v : vmin;
                        vmax = v > vmax ? v : vmax;
                    }
                    if (vmax <= vmin + FEAT_THR) { nconst++; continue; }
                    double thr = (double)vmin + rand01(&rng) * ((double)vmax - (double)vmin);
                    if (thr >= (double)vmax) thr = (double)vmin;
                    int wl = 0; double sl = 0;
                    for (int k = 0; k < m; k++) {
                        const int s = r[k];
                        if ((double)xv[s] <= thr) { wl += wi[s]; sl += wy[s]; }
                    }
                    if (wl <= 0 || wl >= Wi) continue;
                    const double sr = Sn - sl;
                    const double proxy = sl * sl * inv[wl] + sr * sr * inv[Wi - wl];
                    if (proxy > best) { best = proxy; bestf = f; bthr_v = thr; }
                }
            }
            if (bestf < 0) { if (oob) oob_leaf(w, os, oe, Sn / W); continue; }   /* no usable split: leaf */
            ADD_SPLIT(bestf, best - parent);
            /* partition r[0..m) into left (<= threshold) | right (right part reversed) */
            int nl = 0, nr = 0;
            if (method == 0) {
                const uint16_t *pfb = pos + (size_t)feat[bestf] * n;
                for (int k = 0; k < m; k++) {
                    const int s = r[k];
                    const int c = pfb[s] <= (unsigned)bthr;
                    buf[nl] = s; buf[m - 1 - nr] = s;
                    nl += c; nr += 1 - c;
                }
            } else {
                const float *xv = J->values + (size_t)J->regs[feat[bestf]] * n;
                for (int k = 0; k < m; k++) {
                    const int s = r[k];
                    const int c = (double)xv[s] <= bthr_v;
                    buf[nl] = s; buf[m - 1 - nr] = s;
                    nl += c; nr += 1 - c;
                }
            }
            memcpy(r, buf, sizeof(int32_t) * m);
            int onl = 0;
            if (oob && oe > os) {   /* a node without out-of-bag rows passes none on */
                const float *xv = J->values + (size_t)J->regs[feat[bestf]] * n;
                const double thr = method == 0 ? rf_threshold(xv, pos + (size_t)feat[bestf] * n, r, nl, m) : bthr_v;
                onl = oob_split(w, os, oe, xv, thr);
                if (m - nl < 2) oob_leaf(w, os + onl, oe, y[r[nl]]);   /* single-sample children: leaves */
                if (nl < 2) oob_leaf(w, os, os + onl, y[r[0]]);
            }
            if (m - nl >= 2) {
                if (oob) { w->ost[2 * sp] = os + onl; w->ost[2 * sp + 1] = oe; }
                stack[sp].start = start + nl; stack[sp].end = end; sp++;
            }
            if (nl >= 2) {
                if (oob) { w->ost[2 * sp] = os; w->ost[2 * sp + 1] = os + onl; }
                stack[sp].start = start; stack[sp].end = start + nl; sp++;
            }
        }
        if (tree_norm && nsplit > 0) {
            double tot = 0;
            for (int k = 0; k < nsplit; k++) tot += w->sd[k];
            if (tot > 0) { for (int k = 0; k < nsplit; k++) acc[w->sf[k]] += w->sd[k] / tot; split_trees++; }
        }
    }
#undef ADD_SPLIT
    /* tree-normalised: the mean over the trees that split (scikit-learn leaves single-leaf trees out) */
    const double denom = tree_norm ? (double)(split_trees > 0 ? split_trees : 1) : (double)n_trees;
    for (int f = 0; f < p; f++) acc[f] /= denom;
}

static void grow_forest(ws_t *w, const job_t *J, const int32_t *feat, int p, int K, uint64_t seed, int weighted) {
    grow_forest_impl(w, J, feat, p, K, seed, weighted, 0);
}

static void grow_forest_oob(ws_t *w, const job_t *J, const int32_t *feat, int p, int K, uint64_t seed, int weighted) {
    grow_forest_impl(w, J, feat, p, K, seed, weighted, 1);
}

/* ----------------------------------------------------------------------------------- target loop */
/* order of y: value, then sample index (a total order: the same ranks on every run and CPU) */
static int cmp_ykey(const void *a, const void *b) {
    const struct ykey *u = (const struct ykey *)a, *v = (const struct ykey *)b;
    return u->y < v->y ? -1 : u->y > v->y ? 1 : (u->s > v->s) - (u->s < v->s);
}

static void run_target(ws_t *w, job_t *J, int t) {
    const int n = J->n, R = J->R, gene = J->targets[t];
    const float *x = J->values + (size_t)gene * n;
    double mean = 0, var = 0;
    for (int i = 0; i < n; i++) mean += (double)x[i];
    mean /= (double)n;
    for (int i = 0; i < n; i++) { const double d = (double)x[i] - mean; var += d * d; }
    const double sd = sqrt(var / (double)n);                      /* population std, as the reference */
    int p = 0;
    for (int r = 0; r < R; r++) if (J->regs[r] != gene) w->feat[p++] = r;
    if (J->oob) { J->oob[2 * (int64_t)t] = NAN; J->oob[2 * (int64_t)t + 1] = 0.0; }
    if (p == 0) { J->status[t] = 2; return; }
    if (!(sd > 0.0) || !isfinite(sd)) { J->status[t] = 1; return; }
    for (int i = 0; i < n; i++) w->y[i] = (double)x[i] / sd;     /* scaled, not centred */
    if (J->method == 0 && n <= NET_NMAX) {                       /* y ranks: the best partitions of small nodes */
        for (int i = 0; i < n; i++) { w->ys[i].y = w->y[i]; w->ys[i].s = i; }
        qsort(w->ys, (size_t)n, sizeof(*w->ys), cmp_ykey);
        for (int i = 0; i < n; i++) w->yr[w->ys[i].s] = (uint16_t)i;
    }
    int weighted = 0;
    if (J->pw) {                       /* weighted only when the target's input weights differ */
        for (int k = 0; k < p; k++) {
            w->qw[k] = J->pw[(int64_t)w->feat[k] * J->ldw + t];
            weighted |= w->qw[k] != w->qw[0];
        }
    }
    (J->oob ? grow_forest_oob : grow_forest)(w, J, w->feat, p, p == R ? J->K_out : J->K_in, J->seeds[t], weighted);
    for (int k = 0; k < p; k++) J->out[(int64_t)w->feat[k] * J->ldo + t] = w->acc[k];
    if (J->oob) {   /* mean squared out-of-bag error of y (variance 1), samples in index order */
        double e = 0; int c = 0;
        for (int i = 0; i < n; i++) {
            if (w->pcnt[i] == 0) continue;
            const double d = w->y[i] - w->psum[i] / (double)w->pcnt[i];
            e += d * d; c++;
        }
        J->oob[2 * (int64_t)t] = c ? e / (double)c : NAN; J->oob[2 * (int64_t)t + 1] = (double)c;
    }
    J->status[t] = 0;
}

static void *worker(void *arg) {
    job_t *J = (job_t *)arg;
    ws_t w;
    const int K = J->K_out > J->K_in ? J->K_out : J->K_in;
    if (ws_alloc(&w, J->n, J->R, K, J->method, J->oob != NULL) != 0) {
        for (;;) {   /* mark what this thread would have taken */
            const int t = __sync_fetch_and_add(&J->next, 1);
            if (t >= J->T) break;
            J->status[t] = -1;
        }
        return NULL;
    }
    for (;;) {
        const int t = __sync_fetch_and_add(&J->next, 1);
        if (t >= J->T) break;
        run_target(&w, J, t);
    }
    ws_free(&w);
    return NULL;
}

/* All targets of one call, on `threads` threads (the calling thread included).
 *   values : G x n float32 (genes x samples); targets/regs index its rows
 *   pos, lims, slot : RF tables over the R regulators (may be NULL for ET)
 *   seeds  : T per-target seeds; out: out[r * ldo + t] receives importance of regulator r for target t
 *            (entries of a regulator that is the target itself are not written)
 *   tree_norm : 0 = importance as the reference GENIE3 (mean over trees of sum of decreases / n);
 *            1 = scikit-learn's feature_importances_ (each tree's importances divided by their sum first)
 *   pw, ldw : prior weights pw[r * ldw + t] (uint32, 0 = never a candidate), or NULL (uniform draws)
 *   status : T ints, 0 grown, 1 constant target, 2 no inputs, -1 out of memory
 *   oob    : NULL, or T x 2 doubles: each target's out-of-bag mean squared error of y = x / sd (NaN where no sample
 *            was ever out of bag, or the target was not grown) and the number of samples predicted; the trees and
 *            importances are the same as without it (no random draw is added). bag: 1 = bootstrap ET's trees too.
 * Returns 0, or -2 for bad sizes. */
int genie3_run(const float *values, const uint16_t *pos, const uint16_t *lims, const int32_t *slot,
               int n, const int32_t *regs, int R, const int32_t *targets, int T, const uint64_t *seeds,
               int n_trees, int K_in, int K_out, int method, int tree_norm, int threads, double *out,
               int64_t ldo, int32_t *status, const uint32_t *pw, int64_t ldw, double *oob, int bag) {
    if (n < 2 || n > 65535 || R < 1 || T < 0 || n_trees < 1 || K_in < 1 || K_out < 1) return -2;
    if (method == 0 && (!pos || !slot)) return -2;
    job_t J;
    J.values = values; J.pos = pos; J.lims = lims; J.slot = slot; J.regs = regs; J.targets = targets;
    J.seeds = seeds; J.n = n; J.R = R; J.T = T; J.n_trees = n_trees; J.K_in = K_in; J.K_out = K_out;
    J.pw = pw; J.ldw = ldw; J.oob = oob; J.bag = bag;
    J.method = method; J.tree_norm = tree_norm; J.out = out; J.ldo = ldo; J.status = status; J.next = 0;
    if (threads < 1) threads = 1;
    if (threads > T) threads = T > 0 ? T : 1;
    pthread_t *th = threads > 1 ? malloc(sizeof(pthread_t) * (threads - 1)) : NULL;
    int started = 0;
    if (th) for (; started < threads - 1; started++) if (pthread_create(&th[started], NULL, worker, &J) != 0) break;
    worker(&J);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    free(th);
    return 0;
}
