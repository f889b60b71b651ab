/* add-coverage's BAM counting in C (sources.count_bam_window's rules, FORMATS.md §7.1), compiled against the htslib
 * that pysam ships (its headers, its shared library): the same reader pysam's fetch() uses, without a Python object
 * and a Python loop turn per read, which were most of the counting time.
 *
 * Per window [lo, hi) of one sequence: every read the index returns for it (sam_itr_queryi, as pysam's fetch),
 * skipped by flag and MAPQ, its strand flipped by the strand mode's table, then its CIGAR walked: M, =, X runs add
 * 1 to the coverage of their strand, N and D runs to the spliced coverage (--shift: the read's aligned span, trimmed
 * at its 5' end, to the coverage only). Counts go into difference arrays, summed into coverage at the end. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "htslib/hts.h"
#include "htslib/sam.h"

typedef struct {
    htsFile *fp;
    sam_hdr_t *hdr;
    hts_idx_t *idx;
    bam1_t *b;
} cf_bam;

void cf_bam_close(cf_bam *h) {
    if (!h) return;
    if (h->b) bam_destroy1(h->b);
    if (h->idx) hts_idx_destroy(h->idx);
    if (h->hdr) sam_hdr_destroy(h->hdr);
    if (h->fp) hts_close(h->fp);
    free(h);
}

/* The BAM at `path` with its index (`index`, or NULL: <path>.bai / .csi beside it), or NULL when any part cannot be
 * read (the Python side checked the file before: check_bam). */
cf_bam *cf_bam_open(const char *path, const char *index) {
    cf_bam *h = calloc(1, sizeof(cf_bam));
    if (!h) return NULL;
    h->fp = hts_open(path, "r");
    if (h->fp) h->hdr = sam_hdr_read(h->fp);
    if (h->hdr) h->idx = index ? sam_index_load2(h->fp, path, index) : sam_index_load(h->fp, path);
    if (h->idx) h->b = bam_init1();
    if (!h->b) {
        cf_bam_close(h);
        return NULL;
    }
    return h;
}

static inline void add(int64_t *d, int64_t n, int64_t lo, int64_t s, int64_t e) {
    s -= lo;
    e -= lo;
    s = s < 0 ? 0 : (s > n ? n : s);
    e = e < 0 ? 0 : (e > n ? n : e);
    if (s < n) d[s] += 1;
    if (e < n) d[e] -= 1;
}

enum { CF_OK = 0, CF_UNSORTED = 1, CF_MATE = 2, CF_READ = 3, CF_QUERY = 4 };

/* Count the reads of sequence `seqid` over [lo, hi) into out: 4 rows of n = hi - lo int64, zeroed by the caller
 * (cov+, cov-, spliced+, spliced-), summed into coverage before returning. flips[flag & 0xC1]: 0 keep the strand,
 * 1 flip it, -1 an error (a paired read marked neither mate); NULL: unstranded. shift: --shift's 5' trims (4, 5)
 * and the record's length. *counted: reads counted that start in the window. Returns CF_OK, or an error code with
 * the read's name in name[0, 256) and info = {its start, the previous start, its flag}. */
int cf_bam_count(cf_bam *h, const char *seqid, int64_t lo, int64_t hi, int64_t record_len, const int8_t *flips,
                 int shift, int min_mapq, int skip_flags, int64_t *out, int64_t *counted, char *name, int64_t *info) {
    int64_t n = hi - lo, prev = -1, c = 0;
    int tid = sam_hdr_name2tid(h->hdr, seqid);
    hts_itr_t *itr = tid < 0 ? NULL : sam_itr_queryi(h->idx, tid, lo, hi);
    if (!itr) return CF_QUERY;
    bam1_t *b = h->b;
    int r, status = CF_OK;
    enum htsLogLevel level = hts_get_log_level();
    hts_set_log_level(HTS_LOG_OFF); /* a corrupt block is reported once, by the caller, naming the file */
    while ((r = sam_itr_next(h->fp, itr, b)) >= 0) {
        int64_t start = b->core.pos;
        uint16_t f = b->core.flag;
        if (start < prev) {
            status = CF_UNSORTED;
            break;
        }
        prev = start;
        if ((f & skip_flags) || (min_mapq && b->core.qual < min_mapq)) continue;
        int minus = (f & 0x10) != 0;
        if (flips) {
            int8_t fl = flips[f & 0xC1];
            if (fl < 0) {
                status = CF_MATE;
                break;
            }
            minus ^= fl;
        }
        if (start >= lo) c++;
        uint32_t nc = b->core.n_cigar;
        if (nc == 0) continue; /* no CIGAR: no aligned block (pysam: get_blocks() empty, reference_end None) */
        const uint32_t *cig = bam_get_cigar(b);
        int64_t *cov = out + (minus ? n : 0), *spl = out + (minus ? 3 : 2) * n;
        if (shift) {
            int64_t end = bam_endpos(b);
            if (minus)
                end -= 5;
            else
                start += 4;
            if (start < 0) start = 0;
            if (end > record_len) end = record_len;
            if (end > start) add(cov, n, lo, start, end);
            continue;
        }
        int64_t pos = start;
        for (uint32_t k = 0; k < nc; k++) {
            int op = bam_cigar_op(cig[k]);
            int64_t len = bam_cigar_oplen(cig[k]);
            if (op == BAM_CMATCH || op == BAM_CEQUAL || op == BAM_CDIFF) {
                add(cov, n, lo, pos, pos + len);
                pos += len;
            } else if (op == BAM_CDEL || op == BAM_CREF_SKIP) {
                add(spl, n, lo, pos, pos + len);
                pos += len;
            }
        }
    }
    hts_set_log_level(level);
    if (status == CF_OK && r < -1) status = CF_READ;
    if (status != CF_OK) { /* the read's fields only where one was read whole (CF_READ: maybe none yet) */
        name[0] = 0;
        if (status != CF_READ && b->data) strncpy(name, bam_get_qname(b), 255);
        name[255] = 0;
        info[0] = b->core.pos;
        info[1] = prev;
        info[2] = b->core.flag;
    }
    hts_itr_destroy(itr);
    *counted = c;
    if (status != CF_OK) return status;
    for (int k = 0; k < 4; k++) {
        int64_t *d = out + k * n, s = 0;
        for (int64_t i = 0; i < n; i++) d[i] = s += d[i];
    }
    return CF_OK;
}
