/*
 * INTERPRET (--interpret): why the model calls a region open, and which TF families read it (docs/interpret.md).
 *
 *   peaks of one dataset (the strongest --interpret_top) + FASTA + the model ── ATTRIBUTE ── contributions ─┐
 *                                                                                     DISCOVER_MOTIFS ─────┘
 *   ── <id>/motifs/: contributions (h5, bigWig), motifs.meme, matches.tsv, report.html, modisco.h5
 *
 * take: ch_peaks   [meta, peak files] (TRACKS); an assembly without a narrowPeak of --interpret_dataset, or with an
 *                  empty one (no peak called), is left out
 *       ch_fasta   [meta, fasta] the sheet's FASTA per assembly
 *       model      the checkpoint PREDICT used (a value channel)
 * emit: report        [meta, report.html] per assembly (linked from the MultiQC report)
 *       motifs        [meta, motifs.meme, matches.tsv]
 *       contributions [meta, contributions h5]
 *       versions, metrics
 */
include { ATTRIBUTE       } from '../../../modules/local/attribute'
include { DISCOVER_MOTIFS } from '../../../modules/local/discover_motifs'

// the narrowPeak of `dataset` among an assembly's peak files (PEAKS: tracks/<id>_<dataset>.narrowPeak), or null
def datasetPeaks(meta, files, String dataset) {
    def all = files instanceof List ? files : [files]
    return all.find { f -> f.name == "${meta.id}_${dataset}.narrowPeak" }
}

workflow INTERPRET {
    take:
    ch_peaks
    ch_fasta
    model

    main:
    ch_regions = ch_peaks
        .map { meta, files -> [meta.id, meta, datasetPeaks(meta, files, params.interpret_dataset)] }
        .filter { id, meta, peaks -> peaks != null && peaks.size() > 0 }
        .join(ch_fasta.map { meta, fasta -> [meta.id, fasta] })
        .map { id, meta, peaks, fasta -> [meta, peaks, fasta] }
    ATTRIBUTE(ch_regions, model)
    DISCOVER_MOTIFS(ATTRIBUTE.out.contributions)

    emit:
    report        = DISCOVER_MOTIFS.out.report
    motifs        = DISCOVER_MOTIFS.out.motifs
    contributions = ATTRIBUTE.out.contributions
    versions      = ATTRIBUTE.out.versions.mix(DISCOVER_MOTIFS.out.versions)
    metrics       = ATTRIBUTE.out.metrics.mix(DISCOVER_MOTIFS.out.metrics)
}
