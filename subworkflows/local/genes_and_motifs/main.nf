/*
 * GENES_AND_MOTIFS: what the predictions say about genes. With an annotation, GENE_ACCESSIBILITY tabulates each
 * gene's predicted promoter coverage (when prediction runs); with motifs, MOTIF_PRIOR scans the promoters and builds
 * the (TF, target) prior for GENIE3, its hits weighted by the predicted accessibility when prediction runs (not
 * with --skip_genie3: the prior is GENIE3's).
 *
 *   annotation + predictions ── GENE_ACCESSIBILITY ── <id>/genes/ (per-gene table, promoter BED/bigBed)
 *   fasta + annotation + motifs + tf_motifs (+ predictions) ── MOTIF_PRIOR ── <id>/network/<id>.prior.tsv.gz
 *   fasta + annotation + learned motifs + matches + tf_families (+ predictions) ──┘  (--interpret, tf_families)
 *
 * Where the prior's motifs come from (priorSource, in utils_chromaflow/rules.nf): a row with tf_families when
 * INTERPRET runs (--interpret, with predictions, tracks and peaks): the motifs the model learned in the assembly's
 * peaks (INTERPRET's motifs.meme and matches.tsv), a TF getting those matched to its family; else a row with
 * tf_motifs: the sheet's motifs.
 *
 * take: ch_samplesheet  [meta, files] per assembly (PIPELINE_INITIALISATION)
 *       ch_predictions  [meta, predictions] (PREDICT_ASSEMBLIES; an empty channel with --skip_predict)
 *       ch_learned      [meta, motifs.meme, matches.tsv] per assembly (INTERPRET; an empty channel without it)
 * emit: prior           [meta, prior] per assembly with motifs
 *       accessibility   [meta, table, promoters BED] per assembly with an annotation (GENE_ACCESSIBILITY)
 *       versions, metrics
 */
include { GENE_ACCESSIBILITY } from '../../../modules/local/gene_accessibility'
include { MOTIF_PRIOR        } from '../../../modules/local/motif_prior'
include { priorSource        } from '../utils_chromaflow/rules'

workflow GENES_AND_MOTIFS {
    take:
    ch_samplesheet
    ch_predictions
    ch_learned

    main:
    ch_versions = Channel.empty()
    ch_metrics  = Channel.empty()
    ch_prior    = Channel.empty()
    ch_access   = Channel.empty()
    ch_by_id    = ch_predictions.map { meta, p -> [meta.id, p] }

    if (!params.skip_predict) {
        GENE_ACCESSIBILITY(
            ch_samplesheet.filter { meta, files -> files.annotation }
                .map { meta, files -> [meta.id, meta, files.annotation] }
                .join(ch_by_id)
                .map { id, meta, annot, p -> [meta, annot, p] }
        )
        ch_versions = ch_versions.mix(GENE_ACCESSIBILITY.out.versions)
        ch_metrics  = ch_metrics.mix(GENE_ACCESSIBILITY.out.metrics)
        ch_access   = GENE_ACCESSIBILITY.out.table.join(GENE_ACCESSIBILITY.out.bed)
    }

    if (!params.skip_genie3) {
        ch_source = ch_samplesheet.branch { meta, files ->
            learned: priorSource(files) == 'learned'
            sheet: priorSource(files) == 'sheet'
        }
        // an assembly whose peaks gave INTERPRET nothing to learn from has no learned motifs: no prior (NETWORK
        // runs its plain GENIE3)
        ch_motifs = ch_source.sheet
            .map { meta, f -> [meta.id, meta, f.fasta, f.annotation, f.motifs, f.tf_motifs, [], [], f.regulators] }
            .mix(ch_source.learned.map { meta, f -> [meta.id, meta, f] }
                .join(ch_learned.map { meta, meme, matches -> [meta.id, meme, matches] })
                .map { id, meta, f, meme, matches -> [id, meta, f.fasta, f.annotation, meme, [], f.tf_families, matches, f.regulators] })
        MOTIF_PRIOR(
            params.skip_predict
                ? ch_motifs.map { row -> row.drop(1) + [[]] }
                : ch_motifs.join(ch_by_id).map { row -> row.drop(1) }
        )
        ch_versions = ch_versions.mix(MOTIF_PRIOR.out.versions)
        ch_metrics  = ch_metrics.mix(MOTIF_PRIOR.out.metrics)
        ch_prior    = MOTIF_PRIOR.out.prior
    }

    emit:
    prior         = ch_prior
    accessibility = ch_access
    versions      = ch_versions
    metrics       = ch_metrics
}
