/*
 * TRACKS: predicted tracks for genome browsers, in both modes: bigWig (or bedGraph) per dataset and strand with
 * chrom.sizes, an IGV session and a UCSC hub (BIGWIG); peaks on the predicted tracks, added to the session and hub
 * (PEAKS); the top variants' ref/alt bigWigs added to the final browser files (VARIANT_BROWSER).
 *
 *   predictions ── BIGWIG ── <id>/tracks/ ── PEAKS (unless --skip_peaks) ── VARIANT_BROWSER (assemblies with variant
 *                                                                             tracks: meta.variant_browser)
 *
 * take: ch_predictions     [meta, predictions, observed, fasta]: predictions as PREDICT_ASSEMBLIES emits them; meta
 *                          may carry the browser files' extras (trackMeta: the promoter windows, variant_browser);
 *                          observed: [] or the assembly's h5 with measured coverage (train mode: PEAKS then picks
 *                          its cutoff against it, --cutoff auto); fasta: the assembly's FASTA as the sheet gives it
 *                          (BIGWIG writes the genome files and a single-file hub.txt from it; [] for none)
 *       ch_variant_tracks  [id, bigWigs] from VARIANT_EFFECTS (an empty channel: none)
 * emit: tracks             [meta, files] BIGWIG's tracks folder (bigWigs, genome files, browser files)
 *       peaks              [meta, files] PEAKS' narrowPeak and bigBed files (none with --skip_peaks)
 *       versions, metrics
 */
include { BIGWIG          } from '../../../modules/local/bigwig'
include { PEAKS           } from '../../../modules/local/peaks'
include { VARIANT_BROWSER } from '../../../modules/local/variant_browser'

/*
 * An assembly's meta for its browser files, from its samplesheet files: an annotation puts GENE_ACCESSIBILITY's
 * promoter BED in its IGV session and the same windows as bigBed in its UCSC hub; variant tracks to come
 * (VARIANT_BROWSER: a vcf, --variant_tracks > 0) mark BIGWIG's and PEAKS' browser files as not the final ones (not
 * published).
 */
def trackMeta(meta, files) {
    def variant_browser = !params.skip_variant_effect && (params.variant_tracks as int) > 0
    def promoters = files.annotation ? [promoter_bed: "../genes/${meta.id}.promoters.bed",
                                        promoter_bb: "../genes/${meta.id}.promoters.bb"] : [:]
    return meta + promoters + (variant_browser && files.vcf ? [variant_browser: true] : [:])
}

workflow TRACKS {
    take:
    ch_predictions
    ch_variant_tracks

    main:
    ch_versions = Channel.empty()
    ch_metrics  = Channel.empty()
    ch_peaks    = Channel.empty()

    ch_blacklist = params.track_blacklist ? Channel.value(file(params.track_blacklist, checkIfExists: true)) : Channel.value([])
    BIGWIG(ch_predictions.map { meta, p, observed, fasta -> [meta, p, fasta] }, ch_blacklist)
    ch_versions = ch_versions.mix(BIGWIG.out.versions)
    ch_metrics  = ch_metrics.mix(BIGWIG.out.metrics)

    if (!params.skip_peaks) {
        // joined by id: BIGWIG's meta carries the browser extras; with measured coverage the cutoff is the F1-best
        // against its peaks (meta.observed: --cutoff auto)
        PEAKS(
            ch_predictions.map { meta, p, observed, fasta -> [meta.id, p, observed] }
                .join(BIGWIG.out.tracks.map { meta, t -> [meta.id, meta, t] })
                .map { id, p, observed, meta, t -> [meta + (observed ? [observed: true] : [:]), p, t, observed] }
        )
        ch_versions = ch_versions.mix(PEAKS.out.versions)
        ch_metrics  = ch_metrics.mix(PEAKS.out.metrics)
        ch_peaks    = PEAKS.out.peaks
    }

    // the browser files VARIANT_BROWSER completes: PEAKS' where peaks run, else BIGWIG's (the hub's track stanzas
    // are in hub.txt when BIGWIG had the FASTA, in trackDb.txt without it)
    ch_browser = params.skip_peaks
        ? BIGWIG.out.tracks.map { meta, t -> [meta, t.findAll { f -> f.name in ['igv_session.xml', 'hub.txt', 'trackDb.txt'] }] }
        : PEAKS.out.browser

    VARIANT_BROWSER(
        ch_browser.filter { meta, b -> meta.variant_browser }
            .map { meta, b -> [meta.id, meta, b] }
            .join(ch_variant_tracks)
            .map { id, meta, b, t -> [meta, b, t] }
    )
    ch_versions = ch_versions.mix(VARIANT_BROWSER.out.versions)

    emit:
    tracks   = BIGWIG.out.tracks
    peaks    = ch_peaks
    versions = ch_versions
    metrics  = ch_metrics
}
