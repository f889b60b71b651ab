/*
 * CHROMAFLOW (predict mode): genome assemblies → chromatin predictions → browser tracks and peaks; genes, motifs and
 * variants read through the predictions; expression → GENIE3 networks; every stage measured (REPORTING).
 *
 *   fasta ── FASTA2H5 ── genome h5 ─┐ (--predict_from fasta: PREDICT reads the FASTA; FASTA2H5 only with --save_h5)
 *                                   ├─ PREDICT_ASSEMBLIES ── predictions ─┬─ TRACKS (bigWig, peaks, browser files)
 *   vcf ── VARIANT_EFFECTS (the same model) ── top-variant bigWigs ───────┘  │
 *                                                                        ├─ GENES_AND_MOTIFS ── motif prior ─┐
 *   expression (+ regulators) ──────────────────────────────────────────────────────────── NETWORK (GENIE3) ─┘
 *   tracks + peaks + variant effects + promoter accessibility ── REVIEW (one HTML page per assembly) ── REPORTING
 *   peaks + FASTA + the model ── INTERPRET (--interpret: contribution scores, the motifs the model learned) ──┘
 *                                  └─ learned motifs → GENES_AND_MOTIFS' prior (rows with tf_families)
 *
 * take: ch_samplesheet  [meta, files] per assembly: meta = [id, species, expression_layout] (+ motifs_db),
 *                       files = [fasta:, expression:, regulators:, annotation:, motifs:, tf_motifs:, tf_families:,
 *                       vcf:] ([] where the sheet's column is empty)
 */
include { FASTA2H5           } from '../modules/local/fasta2h5'
include { PREDICT_ASSEMBLIES } from '../subworkflows/local/predict_assemblies'
include { VARIANT_EFFECTS    } from '../subworkflows/local/variant_effects'
include { TRACKS; trackMeta  } from '../subworkflows/local/tracks'
include { GENES_AND_MOTIFS   } from '../subworkflows/local/genes_and_motifs'
include { NETWORK            } from '../subworkflows/local/network'
include { REPORTING          } from '../subworkflows/local/reporting'
include { REVIEW             } from '../subworkflows/local/review'
include { INTERPRET          } from '../subworkflows/local/interpret'
include { interpretRuns      } from '../subworkflows/local/utils_chromaflow/rules'

workflow CHROMAFLOW {
    take:
    ch_samplesheet

    main:
    ch_versions    = Channel.empty()
    ch_metrics     = Channel.empty()   // [meta, metrics JSON] of every task, annotated by REPORTING
    ch_predictions = Channel.empty()
    ch_review      = Channel.empty()   // [meta, review page] per assembly (REVIEW_PAGE)
    ch_motifs      = Channel.empty()   // [meta, motifs report] per assembly (INTERPRET)
    ch_learned     = Channel.empty()   // [meta, motifs.meme, matches.tsv] per assembly (INTERPRET): a motif prior
    ch_fasta       = ch_samplesheet.map { meta, files -> [meta, files.fasta] }

    // FASTA → genome h5 in Helixer's layout: what PREDICT reads, unless it reads the FASTA itself
    def from_fasta = params.predict_from == 'fasta' && !params.skip_predict
    if (!from_fasta || params.save_h5) {
        FASTA2H5(ch_fasta)
        ch_versions = ch_versions.mix(FASTA2H5.out.versions)
        ch_metrics  = ch_metrics.mix(FASTA2H5.out.metrics)
    }

    if (!params.skip_predict) {
        // chromatin predictions of every assembly, sharded over tasks (GPUs/nodes)
        PREDICT_ASSEMBLIES(ch_fasta, from_fasta ? ch_fasta : FASTA2H5.out.h5)
        ch_predictions = PREDICT_ASSEMBLIES.out.predictions
        ch_versions    = ch_versions.mix(PREDICT_ASSEMBLIES.out.versions)
        ch_metrics     = ch_metrics.mix(PREDICT_ASSEMBLIES.out.metrics)

        // the effects of the sheet's variants, with the same model
        ch_variant_tracks = Channel.empty()
        ch_effects        = Channel.empty()
        if (!params.skip_variant_effect) {
            VARIANT_EFFECTS(
                ch_samplesheet.filter { meta, files -> files.vcf }.map { meta, files -> [meta, files.vcf, files.fasta] },
                PREDICT_ASSEMBLIES.out.model
            )
            ch_variant_tracks = VARIANT_EFFECTS.out.tracks
            ch_effects        = VARIANT_EFFECTS.out.effects
            ch_versions       = ch_versions.mix(VARIANT_EFFECTS.out.versions)
            ch_metrics        = ch_metrics.mix(VARIANT_EFFECTS.out.metrics)
        }

        // tracks, peaks and browser files (promoter windows and top variants where the sheet gives them); the
        // sheet's FASTA gives the genome files and a single-file hub, so the tracks folder opens unedited in IGV
        if (!params.skip_tracks) {
            TRACKS(
                ch_predictions.map { meta, p -> [meta.id, meta, p] }
                    .join(ch_samplesheet.map { meta, files -> [meta.id, files] })
                    .map { id, meta, p, files -> [trackMeta(meta, files), p, [], files.fasta] },
                ch_variant_tracks
            )
            ch_versions = ch_versions.mix(TRACKS.out.versions)
            ch_metrics  = ch_metrics.mix(TRACKS.out.metrics)

            // why the peaks are open: contribution scores and the motifs the model learned (--interpret)
            if (interpretRuns()) {
                INTERPRET(TRACKS.out.peaks, ch_fasta, PREDICT_ASSEMBLIES.out.model)
                ch_motifs   = INTERPRET.out.report
                ch_learned  = INTERPRET.out.motifs
                ch_versions = ch_versions.mix(INTERPRET.out.versions)
                ch_metrics  = ch_metrics.mix(INTERPRET.out.metrics)
            }
        }
    }

    // per-gene promoter accessibility and the motif prior, then the networks
    GENES_AND_MOTIFS(ch_samplesheet, ch_predictions, ch_learned)
    ch_versions = ch_versions.mix(GENES_AND_MOTIFS.out.versions)
    ch_metrics  = ch_metrics.mix(GENES_AND_MOTIFS.out.metrics)
    // a review page per assembly with tracks: its strongest variant effects, peaks and extreme promoters
    if (!params.skip_predict && !params.skip_tracks) {
        REVIEW(TRACKS.out.tracks, TRACKS.out.peaks, ch_effects, ch_variant_tracks, GENES_AND_MOTIFS.out.accessibility)
        ch_review   = REVIEW.out.html
        ch_versions = ch_versions.mix(REVIEW.out.versions)
    }
    if (!params.skip_genie3) {
        NETWORK(ch_samplesheet, GENES_AND_MOTIFS.out.prior)
        ch_versions = ch_versions.mix(NETWORK.out.versions)
        ch_metrics  = ch_metrics.mix(NETWORK.out.metrics)
    }

    // benchmark report, MultiQC (with a link to each review page and motifs report) and the versions of every process
    REPORTING(ch_versions, ch_metrics, ch_review, ch_motifs)

    emit:
    versions = REPORTING.out.versions
}
