/* chromaflow onehot-deflate: a deflate (RFC 1951) encoder for one shuffled Helixer data/X chunk, built
 * straight from the chunk's base bytes.
 *
 * Why a special encoder: a data/X chunk is L rows x 4 float16 one-hot columns, stored after HDF5's shuffle
 * filter (element size 2) as all low bytes, then all high bytes. Seen in 4-byte groups ("units"), the chunk
 * is 2L units, each one of ~20 patterns (a base's 4 low bytes or 4 high bytes). A general-purpose deflate
 * (zlib, libdeflate, ISA-L) rediscovers this byte by byte; here the LZ77 match finder works on units
 * (hashing and comparing whole bases) and never sees the 171 kB of expanded float16 bytes, so it is several
 * times faster than zlib at the same or better compression. The output is an ordinary zlib stream (header,
 * one dynamic-Huffman deflate block -- or stored blocks where those are smaller -- and the Adler-32): every
 * inflate (HDF5's deflate filter, zlib, libdeflate) reads it. It is not byte-identical to zlib's.
 *
 * Deterministic: integer arithmetic only, no CPU-dependent code paths; the same input gives the same bytes
 * on every machine, compiler and thread count (each chunk is encoded independently).
 *
 * Written from RFC 1950/1951; the Huffman code-length construction is the in-place minimum-redundancy
 * algorithm of Moffat and Katajainen (1995) followed by the usual length-limiting rebalancing.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define WIN_UNITS 8192          /* 32768-byte deflate window, in 4-byte units */
#define MAX_MATCH_UNITS 64      /* 256 bytes (deflate allows 258) */
#define MIN_MATCH_UNITS 3       /* 12 bytes */
#define HASH_BITS 14
#define HASH_SIZE (1u << HASH_BITS)
#define PAD_BYTES 80            /* slack after the unit array for 8-byte loads */

typedef struct {
    int hash_units;   /* units hashed per position */
    int max_chain;    /* candidates examined per search */
    int nice;         /* stop searching at a match this long */
    int max_insert;   /* insert every position of matches up to this long (longer: only the first) */
} level_t;

/* levels 1..9: greedy parsing, effort (hash-chain depth) grows with the level. Lazy matching (zlib's
 * levels >= 4) was measured here and makes these files larger: a literal base costs ~6-8 bits, so giving up
 * a match start for a slightly longer match one base later does not pay. */
static const level_t LEVELS[10] = {
    {4, 1, 8, 8},        /* 0: unused (same as 1) */
    {4, 1, 8, 8},        /* 1 */
    {4, 2, 16, 16},      /* 2 */
    {4, 4, 16, 16},      /* 3 */
    {4, 8, 32, 64},      /* 4 */
    {4, 16, 32, 64},     /* 5 */
    {4, 32, 64, 64},     /* 6 */
    {4, 64, 64, 64},     /* 7 */
    {4, 128, 64, 64},    /* 8 */
    {4, 256, 64, 64},    /* 9 */
};

/* ---------------------------------------------------------------------------------------------------- */
/* deflate symbol tables                                                                                */
static inline int floor_log2(uint32_t x) { return 31 - __builtin_clz(x); }

/* length 3..258 (bytes) -> symbol 257..285, extra bit count and value */
static inline void len_code(int len, int *sym, int *nextra, int *extra) {
    int x = len - 3;
    if (len == 258) { *sym = 285; *nextra = 0; *extra = 0; return; }
    if (x < 8) { *sym = 257 + x; *nextra = 0; *extra = 0; return; }
    int b = floor_log2((uint32_t)x);
    *sym = 257 + 4 * (b - 1) + ((x >> (b - 2)) & 3);
    *nextra = b - 2;
    *extra = x & ((1 << (b - 2)) - 1);
}

/* distance 1..32768 (bytes) -> symbol 0..29, extra bit count and value */
static inline void dist_code(int dist, int *sym, int *nextra, int *extra) {
    int x = dist - 1;
    if (x < 4) { *sym = x; *nextra = 0; *extra = 0; return; }
    int b = floor_log2((uint32_t)x);
    *sym = 2 * b + ((x >> (b - 1)) & 1);
    *nextra = b - 1;
    *extra = x & ((1 << (b - 1)) - 1);
}

/* ---------------------------------------------------------------------------------------------------- */
/* Huffman code lengths                                                                                 */

/* In place: A[0..n) ascending weights -> A[i] = code length of the i-th lightest symbol (n >= 2). */
static void min_redundancy(uint32_t *A, int n) {
    int root, leaf, next, avbl, used, dpth;
    A[0] += A[1];
    root = 0;
    leaf = 2;
    for (next = 1; next < n - 1; next++) {
        if (leaf >= n || A[root] < A[leaf]) { A[next] = A[root]; A[root++] = (uint32_t)next; }
        else A[next] = A[leaf++];
        if (leaf >= n || (root < next && A[root] < A[leaf])) { A[next] += A[root]; A[root++] = (uint32_t)next; }
        else A[next] += A[leaf++];
    }
    A[n - 2] = 0;
    for (next = n - 3; next >= 0; next--) A[next] = A[A[next]] + 1;
    avbl = 1;
    used = dpth = 0;
    root = n - 2;
    next = n - 1;
    while (avbl > 0) {
        while (root >= 0 && (int)A[root] == dpth) { used++; root--; }
        while (avbl > used) { A[next--] = (uint32_t)dpth; avbl--; }
        avbl = 2 * used;
        dpth++;
        used = 0;
    }
}

/* freq[0..n) -> lens[0..n) (0 for unused symbols), at most maxbits; symbols with freq 0 at indices in
 * `force` (if fewer than 2 symbols are used) get a count of 1 so that the code is complete. */
static void huff_lengths(const uint32_t *freq_in, int n, int maxbits, uint8_t *lens, int force0, int force1) {
    uint32_t freq[288];
    int sym[288];
    uint32_t w[288] = {0};
    int used = 0;
    memcpy(freq, freq_in, sizeof(uint32_t) * (size_t)n);
    for (int i = 0; i < n; i++) used += freq[i] != 0;
    if (used < 2) {
        if (!freq[force0]) freq[force0] = 1;
        if (!freq[force1]) freq[force1] = 1;
    }
    used = 0;
    for (int i = 0; i < n; i++) {
        lens[i] = 0;
        if (freq[i]) sym[used++] = i;
    }
    /* insertion sort by (freq, symbol): deterministic, n <= 288 */
    for (int i = 1; i < used; i++) {
        int s = sym[i], j = i - 1;
        while (j >= 0 && (freq[sym[j]] > freq[s] || (freq[sym[j]] == freq[s] && sym[j] > s))) { sym[j + 1] = sym[j]; j--; }
        sym[j + 1] = s;
    }
    for (int i = 0; i < used; i++) w[i] = freq[sym[i]];
    min_redundancy(w, used);
    /* histogram of lengths, clamping overlong codes, then rebalance until the Kraft sum is exactly 1 */
    int count[33] = {0};
    for (int i = 0; i < used; i++) count[w[i] > (uint32_t)maxbits ? maxbits : (int)w[i]]++;
    uint32_t total = 0;
    for (int i = maxbits; i > 0; i--) total += (uint32_t)count[i] << (maxbits - i);
    while (total != (1u << maxbits)) {
        count[maxbits]--;
        for (int i = maxbits - 1; i > 0; i--) {
            if (count[i]) { count[i]--; count[i + 1] += 2; break; }
        }
        total--;
    }
    /* heaviest symbols (end of the ascending list) get the shortest codes */
    int j = used;
    for (int len = 1; len <= maxbits; len++)
        for (int c = count[len]; c > 0; c--) lens[sym[--j]] = (uint8_t)len;
}

/* canonical codes, bit-reversed for LSB-first output */
static void huff_codes(const uint8_t *lens, int n, uint16_t *codes) {
    int bl_count[16] = {0};
    uint32_t next_code[16];
    for (int i = 0; i < n; i++) bl_count[lens[i]]++;
    bl_count[0] = 0;
    uint32_t code = 0;
    for (int b = 1; b < 16; b++) {
        code = (code + (uint32_t)bl_count[b - 1]) << 1;
        next_code[b] = code;
    }
    for (int i = 0; i < n; i++) {
        int len = lens[i];
        if (!len) { codes[i] = 0; continue; }
        uint32_t c = next_code[len]++, r = 0;
        for (int k = 0; k < len; k++) { r = (r << 1) | (c & 1); c >>= 1; }
        codes[i] = (uint16_t)r;
    }
}

/* ---------------------------------------------------------------------------------------------------- */
/* bit writer                                                                                           */
typedef struct {
    uint8_t *out;
    size_t pos;
    uint64_t acc;
    int n;
} bw_t;

static inline void put(bw_t *w, uint32_t bits, int n) {
    w->acc |= (uint64_t)bits << w->n;
    w->n += n;
    if (w->n >= 32) {
        uint32_t v = (uint32_t)w->acc;
        memcpy(w->out + w->pos, &v, 4); /* little-endian hosts only: checked by the Python loader */
        w->pos += 4;
        w->acc >>= 32;
        w->n -= 32;
    }
}

static inline void flush_bytes(bw_t *w) {
    while (w->n > 0) {
        w->out[w->pos++] = (uint8_t)w->acc;
        w->acc >>= 8;
        w->n -= 8;
    }
    w->n = 0;
    w->acc = 0;
}

/* ---------------------------------------------------------------------------------------------------- */
/* workspace layout: units (2L + PAD_BYTES) | prev (int32, 2L) | head (int32, HASH_SIZE) | tokens (uint32, 2L+1) */
size_t chf_onehot_ws_size(size_t L) {
    size_t n = 2 * L;
    size_t a = (n + PAD_BYTES + 7) & ~(size_t)7;
    return a + 4 * n + 4 * (size_t)HASH_SIZE + 4 * (n + 1) + 64;
}

/* upper bound of the compressed size of one chunk of length L */
size_t chf_onehot_bound(size_t L) {
    size_t raw = 8 * L;
    return raw + 5 * (raw / 65535 + 1) + 64;
}

static inline uint32_t hash_at(const uint8_t *U, int p, uint64_t mask) {
    uint64_t v;
    memcpy(&v, U + p, 8);
    return (uint32_t)(((v & mask) * 0x9E3779B97F4A7C15ull) >> (64 - HASH_BITS));
}

static inline int match_len(const uint8_t *U, int a, int b, int maxlen) {
    int k = 0;
    while (k + 8 <= maxlen) {
        uint64_t x, y;
        memcpy(&x, U + a + k, 8);
        memcpy(&y, U + b + k, 8);
        if (x != y) return k + (__builtin_ctzll(x ^ y) >> 3);
        k += 8;
    }
    while (k < maxlen && U[a + k] == U[b + k]) k++;
    return k;
}

#define TOK_MATCH 0x80000000u

/*
 * Encode one chunk. seq[0..nvalid) are the bases of the row (file bytes; reverse != 0: read from the end, the
 * caller passes complement tables); unit_lo/unit_hi map a byte to the unit id of its 4 low / 4 high bytes;
 * unit_bytes[id*4 .. id*4+4) are the unit's bytes. Positions nvalid..L-1 are padding (byte 0).
 * Returns the size of the zlib stream written to out, or 0 if out_cap is too small.
 */
size_t chf_onehot_deflate(const uint8_t *seq, size_t nvalid, size_t L, int reverse, const uint8_t *unit_lo,
                          const uint8_t *unit_hi, const uint8_t *unit_bytes, int n_units, int level,
                          uint8_t *ws, uint8_t *out, size_t out_cap) {
    const int N = (int)(2 * L);
    const level_t P = LEVELS[level < 1 ? 1 : level > 9 ? 9 : level];
    uint8_t *U = ws;
    size_t a = ((size_t)N + PAD_BYTES + 7) & ~(size_t)7;
    int32_t *prev = (int32_t *)(ws + a);
    int32_t *head = prev + N;
    uint32_t *tok = (uint32_t *)(head + HASH_SIZE);
    int ntok = 0;

    /* 1. units, and the Adler-32 of the expanded bytes in the same pass. Over the 2L units p (4 bytes each,
     *    B = 8L bytes in all): s1 = 1 + sum S(p), s2 = B + sum (B - 4p) S(p) - V(p) (mod 65521), with S the
     *    sum of a unit's bytes and V = b1 + 2 b2 + 3 b3. Base i gives unit i (low bytes) and unit L + i. */
    uint32_t Sb[256], Hb[256], Vb[256];
    {
        uint32_t S[256], V[256];
        for (int u = 0; u < n_units; u++) {
            const uint8_t *q = unit_bytes + 4 * u;
            S[u] = (uint32_t)q[0] + q[1] + q[2] + q[3];
            V[u] = (uint32_t)q[1] + 2u * q[2] + 3u * q[3];
        }
        for (int b = 0; b < 256; b++) {
            Sb[b] = S[unit_lo[b]] + S[unit_hi[b]];
            Hb[b] = S[unit_hi[b]];
            Vb[b] = V[unit_lo[b]] + V[unit_hi[b]];
        }
    }
    uint64_t a1 = 0, a2 = 0, a3 = 0, a4 = 0; /* sum S, sum i*S (base index), sum V, sum S of the high units */
    const uint64_t MOD = 65521;
    for (size_t i0 = 0; i0 < nvalid; i0 += 65536) { /* reduce a2 often enough to stay far from overflow */
        size_t i1 = nvalid - i0 < 65536 ? nvalid : i0 + 65536;
        if (!reverse) {
            for (size_t i = i0; i < i1; i++) {
                uint8_t b = seq[i];
                U[i] = unit_lo[b];
                U[L + i] = unit_hi[b];
                a1 += Sb[b]; a2 += (uint64_t)i * Sb[b]; a3 += Vb[b]; a4 += Hb[b];
            }
        } else {
            const uint8_t *s = seq + nvalid - 1;
            for (size_t i = i0; i < i1; i++) {
                uint8_t b = *(s - i);
                U[i] = unit_lo[b];
                U[L + i] = unit_hi[b];
                a1 += Sb[b]; a2 += (uint64_t)i * Sb[b]; a3 += Vb[b]; a4 += Hb[b];
            }
        }
        a2 %= MOD;
    }
    if (nvalid < L) {
        memset(U + nvalid, unit_lo[0], L - nvalid);
        memset(U + L + nvalid, unit_hi[0], L - nvalid);
        uint64_t c = L - nvalid, sp = ((uint64_t)nvalid + L - 1) * c / 2 % MOD; /* sum of the padded i */
        a1 += c * Sb[0]; a2 += sp * Sb[0]; a3 += c * Vb[0]; a4 += c * Hb[0];
    }
    memset(U + N, 0xFF, PAD_BYTES);
    uint32_t adler;
    {
        /* unit p = i (low) and p = L + i (high): sum p*S = sum i*(S_lo + S_hi) + L * sum S_hi */
        uint64_t B = (8 * (uint64_t)L) % MOD;
        uint64_t s1 = (1 + a1) % MOD;
        uint64_t sum_pS = (a2 % MOD + (uint64_t)(L % MOD) * (a4 % MOD)) % MOD;
        uint64_t pos = (B + B * (a1 % MOD)) % MOD;
        uint64_t neg = (4 * sum_pS + a3) % MOD;
        uint64_t s2 = (pos + MOD - neg) % MOD;
        adler = (uint32_t)((s2 << 16) | s1);
    }

    /* 3. LZ77 over units */
    memset(head, 0xFF, sizeof(int32_t) * HASH_SIZE);
    const int H = P.hash_units;
    const uint64_t hmask = H >= 8 ? ~0ull : ((1ull << (8 * H)) - 1);
    const int last_hash = N - H; /* positions p <= last_hash can be hashed */
    int ins = 0;                 /* next position to insert */
#define INSERT_UPTO(q)                                          \
    do {                                                        \
        int _q = (q) < last_hash + 1 ? (q) : last_hash + 1;     \
        for (; ins < _q; ins++) {                               \
            uint32_t _h = hash_at(U, ins, hmask);               \
            prev[ins] = head[_h];                               \
            head[_h] = ins;                                     \
        }                                                       \
        if (ins < (q)) ins = (q);                               \
    } while (0)

    /* Tokens, with symbol frequencies counted as they are made. A literal token is a unit id; a match token
     * holds its deflate symbols: bits 0-4 length symbol - 257, 5-9 its extra bits, 10-14 distance symbol,
     * 15-27 its extra bits. Consecutive matches with the same distance are one copy: they are merged and
     * re-cut into 258-byte pieces (the unit matcher stops at 256 bytes), which codes long runs cheaply. */
    uint32_t lf[286], df[30], ulf[256];
    memset(lf, 0, sizeof lf);
    memset(df, 0, sizeof df);
    memset(ulf, 0, sizeof ulf);
    int pend_len = 0, pend_dist = 0; /* bytes */
#define FLUSH_MATCH()                                                                   \
    do {                                                                                \
        int _T = pend_len;                                                              \
        while (_T > 0) {                                                                \
            int _k = _T >= 258 + 3 || _T == 258 ? 258 : _T > 258 ? _T - 3 : _T;         \
            int ls, le, lx, ds, de, dx;                                                 \
            len_code(_k, &ls, &le, &lx);                                                \
            dist_code(pend_dist, &ds, &de, &dx);                                        \
            lf[ls]++;                                                                   \
            df[ds]++;                                                                   \
            tok[ntok++] = TOK_MATCH | (uint32_t)(ls - 257) | ((uint32_t)lx << 5) |      \
                          ((uint32_t)ds << 10) | ((uint32_t)dx << 15);                  \
            _T -= _k;                                                                   \
        }                                                                               \
        pend_len = 0;                                                                   \
    } while (0)
#define LITERAL(u)                                                                      \
    do {                                                                                \
        if (pend_len) FLUSH_MATCH();                                                    \
        ulf[(u)]++;                                                                     \
        tok[ntok++] = (u);                                                              \
    } while (0)

    int p = 0;
    while (p < N) {
        int best = 0, bestd = 0;
        int maxlen = N - p < MAX_MATCH_UNITS ? N - p : MAX_MATCH_UNITS;
        INSERT_UPTO(p);
        if (p <= last_hash && maxlen >= MIN_MATCH_UNITS) {
            uint32_t h = hash_at(U, p, hmask);
            int cand = head[h], chain = P.max_chain;
            best = MIN_MATCH_UNITS - 1;
            while (cand >= 0 && p - cand <= WIN_UNITS && chain-- > 0) {
                if (U[cand + best] == U[p + best]) {
                    int l = match_len(U, cand, p, maxlen);
                    if (l > best) { best = l; bestd = p - cand; if (l >= P.nice || l == maxlen) break; }
                }
                cand = prev[cand];
            }
            prev[p] = head[h];
            head[h] = p;
            ins = p + 1;
            if (best < MIN_MATCH_UNITS) best = 0;
        }
        if (best) {
            if (pend_len && pend_dist != 4 * bestd) FLUSH_MATCH();
            pend_len += 4 * best;
            pend_dist = 4 * bestd;
            if (best <= P.max_insert) INSERT_UPTO(p + best);
            else ins = p + best;
            p += best;
        } else {
            LITERAL(U[p]);
            p += 1;
        }
    }
    if (pend_len) FLUSH_MATCH();
#undef INSERT_UPTO
#undef LITERAL
#undef FLUSH_MATCH
    for (int u = 0; u < n_units; u++)
        for (int k = 0; k < 4; k++) lf[unit_bytes[4 * u + k]] += ulf[u];
    lf[256] = 1;

    /* 4. codes */
    uint8_t ll[286], dl[30];
    uint16_t lc[286], dc[30];
    huff_lengths(lf, 286, 15, ll, 0, 256);
    huff_lengths(df, 30, 15, dl, 0, 1);
    int hlit = 286;
    while (hlit > 257 && !ll[hlit - 1]) hlit--;
    int hdist = 30;
    while (hdist > 1 && !dl[hdist - 1]) hdist--;
    huff_codes(ll, 286, lc);
    huff_codes(dl, 30, dc);

    /* code-length sequence, run-length coded (16: repeat previous 3-6, 17: 3-10 zeros, 18: 11-138 zeros) */
    uint8_t seqlens[316];
    int ns = 0;
    for (int i = 0; i < hlit; i++) seqlens[ns++] = ll[i];
    for (int i = 0; i < hdist; i++) seqlens[ns++] = dl[i];
    uint8_t rle_sym[316], rle_extra[316];
    int nr = 0;
    for (int i = 0; i < ns;) {
        int v = seqlens[i], run = 1;
        while (i + run < ns && seqlens[i + run] == v) run++;
        if (v == 0 && run >= 3) {
            int r = run;
            while (r >= 11) { int k = r > 138 ? 138 : r; rle_sym[nr] = 18; rle_extra[nr++] = (uint8_t)(k - 11); r -= k; }
            if (r >= 3) { rle_sym[nr] = 17; rle_extra[nr++] = (uint8_t)(r - 3); r = 0; }
            while (r-- > 0) { rle_sym[nr] = 0; rle_extra[nr++] = 0; }
        } else if (v != 0 && run >= 4) {
            rle_sym[nr] = (uint8_t)v; rle_extra[nr++] = 0;
            int r = run - 1;
            while (r >= 3) { int k = r > 6 ? 6 : r; rle_sym[nr] = 16; rle_extra[nr++] = (uint8_t)(k - 3); r -= k; }
            while (r-- > 0) { rle_sym[nr] = (uint8_t)v; rle_extra[nr++] = 0; }
        } else {
            for (int k = 0; k < run; k++) { rle_sym[nr] = (uint8_t)v; rle_extra[nr++] = 0; }
        }
        i += run;
    }
    uint32_t cf[19];
    memset(cf, 0, sizeof cf);
    for (int i = 0; i < nr; i++) cf[rle_sym[i]]++;
    uint8_t cl[19];
    uint16_t cc[19];
    huff_lengths(cf, 19, 7, cl, 0, 1);
    huff_codes(cl, 19, cc);
    static const uint8_t CL_ORDER[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    int hclen = 19;
    while (hclen > 4 && !cl[CL_ORDER[hclen - 1]]) hclen--;

    /* 5. exact size of the dynamic block; fall back to stored blocks if that is not smaller */
    uint64_t bits = 3 + 5 + 5 + 4 + 3 * (uint64_t)hclen;
    for (int i = 0; i < nr; i++)
        bits += cl[rle_sym[i]] + (rle_sym[i] == 16 ? 2 : rle_sym[i] == 17 ? 3 : rle_sym[i] == 18 ? 7 : 0);
    for (int s = 0; s < 286; s++) {
        if (!lf[s]) continue;
        int extra = s >= 265 && s < 285 ? (s - 261) / 4 : 0;
        bits += (uint64_t)lf[s] * (ll[s] + extra);
    }
    for (int s = 0; s < 30; s++) {
        if (!df[s]) continue;
        int extra = s >= 4 ? s / 2 - 1 : 0;
        bits += (uint64_t)df[s] * (dl[s] + extra);
    }
    size_t raw = 8 * L;
    size_t stored = raw + 5 * ((raw + 65534) / 65535 + (raw == 0));
    size_t dyn = (size_t)((bits + 7) / 8);
    size_t total = 2 + (dyn < stored ? dyn : stored) + 4 + 8;
    if (total > out_cap) return 0;

    bw_t w = {out, 0, 0, 0};
    /* zlib header: CM 8, CINFO 7 (32 K window); FLEVEL from the level; FCHECK makes it a multiple of 31 */
    int flevel = level <= 1 ? 0 : level <= 5 ? 1 : level == 6 ? 2 : 3;
    uint32_t cmf = 0x78, flg = (uint32_t)flevel << 6;
    flg += 31 - ((cmf * 256 + flg) % 31);
    out[0] = (uint8_t)cmf;
    out[1] = (uint8_t)flg;
    w.pos = 2;

    if (dyn < stored) {
        put(&w, 1, 1);          /* BFINAL */
        put(&w, 2, 2);          /* BTYPE = dynamic */
        put(&w, (uint32_t)(hlit - 257), 5);
        put(&w, (uint32_t)(hdist - 1), 5);
        put(&w, (uint32_t)(hclen - 4), 4);
        for (int i = 0; i < hclen; i++) put(&w, cl[CL_ORDER[i]], 3);
        for (int i = 0; i < nr; i++) {
            int s = rle_sym[i];
            put(&w, cc[s], cl[s]);
            if (s == 16) put(&w, rle_extra[i], 2);
            else if (s == 17) put(&w, rle_extra[i], 3);
            else if (s == 18) put(&w, rle_extra[i], 7);
        }
        /* each literal unit is one or two puts of its 4 bytes' codes */
        uint32_t ub0[256], ub1[256];
        int un0[256], un1[256];
        for (int u = 0; u < n_units; u++) {
            const uint8_t *q = unit_bytes + 4 * u;
            ub0[u] = lc[q[0]] | ((uint32_t)lc[q[1]] << ll[q[0]]);
            un0[u] = ll[q[0]] + ll[q[1]];
            ub1[u] = lc[q[2]] | ((uint32_t)lc[q[3]] << ll[q[2]]);
            un1[u] = ll[q[2]] + ll[q[3]];
        }
        static const uint8_t LEXTRA[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2,
                                           3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
        for (int t = 0; t < ntok; t++) {
            uint32_t v = tok[t];
            if (v & TOK_MATCH) {
                int ls = 257 + (int)(v & 31), lx = (int)((v >> 5) & 31);
                int ds = (int)((v >> 10) & 31), dx = (int)((v >> 15) & 0x1FFF);
                int de = ds >= 4 ? ds / 2 - 1 : 0;
                put(&w, lc[ls] | ((uint32_t)lx << ll[ls]), ll[ls] + LEXTRA[ls - 257]);
                put(&w, dc[ds] | ((uint32_t)dx << dl[ds]), dl[ds] + de);
            } else {
                put(&w, ub0[v], un0[v]);
                put(&w, ub1[v], un1[v]);
            }
        }
        put(&w, lc[256], ll[256]);
        flush_bytes(&w);
    } else {
        /* stored blocks of the expanded bytes */
        size_t done = 0;
        do {
            size_t k = raw - done < 65535 ? raw - done : 65535;
            out[w.pos++] = done + k == raw ? 1 : 0;
            out[w.pos++] = (uint8_t)k;
            out[w.pos++] = (uint8_t)(k >> 8);
            out[w.pos++] = (uint8_t)~k;
            out[w.pos++] = (uint8_t)(~k >> 8);
            for (size_t i = 0; i < k; i++) {
                size_t b = done + i;
                out[w.pos++] = unit_bytes[4 * U[b >> 2] + (b & 3)];
            }
            done += k;
        } while (done < raw);
    }
    out[w.pos++] = (uint8_t)(adler >> 24);
    out[w.pos++] = (uint8_t)(adler >> 16);
    out[w.pos++] = (uint8_t)(adler >> 8);
    out[w.pos++] = (uint8_t)adler;
    return w.pos;
}
