/*
 * NETWORK: a GENIE3 gene-regulatory network per assembly with an expression matrix: a plan (gene count → chunks of
 * target genes), one task per chunk, merged per assembly. With --genie3_prior_alpha > 0 an assembly with motifs
 * waits for its MOTIF_PRIOR and runs the prior-weighted GENIE3; the others run plain GENIE3.
 *
 *   expression (+ regulators) ── GENIE3_PLAN ── GENIE3 × chunks (+ prior) ── GENIE3_MERGE ── <id>/network/
 *                                                                                (links, weights, summary, plot)
 * take: ch_samplesheet  [meta, files] per assembly (PIPELINE_INITIALISATION)
 *       ch_prior        [meta, prior] (GENES_AND_MOTIFS; an empty channel: none)
 * emit: versions, metrics
 */
include { GENIE3_PLAN  } from '../../../modules/local/genie3_plan'
include { GENIE3       } from '../../../modules/local/genie3'
include { GENIE3_MERGE } from '../../../modules/local/genie3_merge'
include { gatherParts; readJson } from '../utils_chromaflow/parts'
include { priorSource } from '../utils_chromaflow/rules'

workflow NETWORK {
    take:
    ch_samplesheet
    ch_prior

    main:
    ch_versions = Channel.empty()
    ch_metrics  = Channel.empty()

    ch_expressed = ch_samplesheet.filter { meta, files -> files.expression }
    ch_expression = ch_expressed.map { meta, files -> [meta, files.expression, files.regulators] }
    GENIE3_PLAN(ch_expression)
    ch_versions = ch_versions.mix(GENIE3_PLAN.out.versions)

    // the prior reaches GENIE3 only when asked for (--genie3_prior_alpha > 0) and the assembly has motifs (the sheet's,
    // or learned ones: priorSource): then its GENIE3 tasks wait for MOTIF_PRIOR; the others get [] (plain GENIE3), as
    // does an assembly whose prior never comes (learned motifs of an assembly without peaks)
    def use_prior = (params.genie3_prior_alpha as double) > 0
    ch_plans = ch_expression
        .join(GENIE3_PLAN.out.plan)
        .map { meta, expr, regs, plan -> [meta.id, meta, expr, regs, plan] }
        .join(ch_expressed.map { meta, files -> [meta.id, use_prior && priorSource(files) != null] })
        .branch { row ->
            prior: row[5]
            plain: true
        }
    ch_chunks = ch_plans.prior.map { row -> row[0..4] }
        .join(ch_prior.map { meta, p -> [meta.id, p] }, remainder: true)
        .filter { row -> row[1] != null }   // remainder: a prior of an assembly without expression
        .mix(ch_plans.plain.map { row -> row[0..4] + [[]] })
        .flatMap { id, meta, expr, regs, plan, prior ->
            def n = readJson(plan).chunks as int
            (1..n).collect { i -> [meta + [chunk: i, chunks: n], expr, regs, prior ?: []] }
        }
    GENIE3(ch_chunks)
    ch_versions = ch_versions.mix(GENIE3.out.versions)
    ch_metrics  = ch_metrics.mix(GENIE3.out.metrics)

    GENIE3_MERGE(gatherParts(GENIE3.out.part, 'chunk', 'chunks'))
    ch_versions = ch_versions.mix(GENIE3_MERGE.out.versions)
    ch_metrics  = ch_metrics.mix(GENIE3_MERGE.out.metrics)

    emit:
    versions = ch_versions
    metrics  = ch_metrics
}
