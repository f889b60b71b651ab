/*
 * REVIEW: one self-contained HTML page per assembly with tracks (REVIEW_PAGE, igv-reports; docs/review.md): its
 * strongest variant effects (with their ref/alt tracks), strongest peaks and the promoters of the genes with the
 * highest and lowest predicted accessibility, the predicted tracks around each. An assembly without peaks, variants
 * or genes gets a page with fewer sections; one whose tracks folder holds no genome files (<id>.fa + .fai) none.
 *
 *   tracks (genome files, bigWigs) + peaks + variant effects (+ their tracks) + promoter accessibility ── REVIEW_PAGE
 *
 * take: ch_tracks          [meta, files of <id>/tracks/] (TRACKS)
 *       ch_peaks           [meta, peak files] (TRACKS; empty: none)
 *       ch_effects         [id, effects table] (VARIANT_EFFECTS; empty: none)
 *       ch_variant_tracks  [id, ref/alt bigWigs] (VARIANT_EFFECTS; empty: none)
 *       ch_accessibility   [meta, table, promoters BED] (GENES_AND_MOTIFS; empty: none)
 * emit: html      [meta, page] per assembly
 *       versions
 */
include { REVIEW_PAGE } from '../../../modules/local/review_page'

// a task's outputs as a list: one matched file comes alone, none as null
List asList(x) {
    return x == null ? [] : (x instanceof List ? x : [x])
}

/*
 * REVIEW_PAGE's input of an assembly from its tracks folder (BIGWIG's: the genome files and the strand averages, or
 * every bigWig where no average was written) and what the other stages gave ([] for none)
 */
List reviewInput(meta, tracks, peaks, effects, variant_tracks, genes) {
    def bw  = asList(tracks).findAll { f -> f.name.endsWith('.bw') }
    def avg = bw.findAll { f -> f.name.endsWith('_avg_strand.bw') }
    return [meta, asList(tracks).find { f -> f.name == "${meta.id}.fa" },
            asList(tracks).find { f -> f.name == "${meta.id}.fa.fai" }, avg ?: bw,
            asList(peaks).findAll { f -> f.name.endsWith('.narrowPeak') }, effects ?: [], asList(variant_tracks),
            genes ? genes[0] : [], genes ? genes[1] : []]
}

workflow REVIEW {
    take:
    ch_tracks
    ch_peaks
    ch_effects
    ch_variant_tracks
    ch_accessibility

    main:
    REVIEW_PAGE(
        ch_tracks.map { meta, t -> [meta.id, meta, t] }
            .join(ch_peaks.map { meta, p -> [meta.id, p] }, remainder: true)
            .join(ch_effects, remainder: true)
            .join(ch_variant_tracks, remainder: true)
            .join(ch_accessibility.map { meta, table, bed -> [meta.id, [table, bed]] }, remainder: true)
            .filter { id, meta, t, p, e, v, g -> meta != null && asList(t).any { f -> f.name == "${id}.fa.fai" } }
            .map { id, meta, t, p, e, v, g -> reviewInput(meta, t, p, e, v, g) }
    )

    emit:
    html     = REVIEW_PAGE.out.html
    versions = REVIEW_PAGE.out.versions
}
