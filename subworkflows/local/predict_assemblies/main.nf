/*
 * PREDICT_ASSEMBLIES: every assembly's chromatin predictions from the model, sharded over tasks (GPUs/nodes) as
 * PREDICT_PLAN lists the shards, and one predictions file (or view) per assembly.
 *
 *   fasta ── PREDICT_PLAN (rows → shards 1..n; the FASTA's index) ─┐
 *   genome (h5, or the FASTA with --predict_from fasta) ───────────┴─ PREDICT × n ─ n > 1: PREDICT_MERGE (published)
 *                                                                        │              + PREDICT_VIEW (what is read)
 *             one shard and ≤ --predict_group_mbp: PREDICT_GROUP (several assemblies, one task)
 *
 * take: ch_fasta       [meta, fasta] per assembly
 *       ch_genome      [meta, genome] per assembly: what PREDICT reads (FASTA2H5's h5, or the FASTA itself)
 * emit: predictions    [meta, predictions]: an h5, or PREDICT_VIEW's view with its shards ([view, shard, ...]); both
 *                      named <id>_predictions.h5, meta without the shard keys
 *       model          the checkpoint (--model, or MAKE_TEST_MODEL's with --test_model): a value channel
 *       versions, metrics
 */
include { MAKE_TEST_MODEL } from '../../../modules/local/make_test_model'
include { PREDICT_PLAN    } from '../../../modules/local/predict_plan'
include { PREDICT         } from '../../../modules/local/predict'
include { PREDICT_GROUP   } from '../../../modules/local/predict_group'
include { PREDICT_MERGE   } from '../../../modules/local/predict_merge'
include { PREDICT_VIEW    } from '../../../modules/local/predict_view'
include { gatherParts; baseMeta; groupBins; byAssembly; readJson } from '../utils_chromaflow/parts'

workflow PREDICT_ASSEMBLIES {
    take:
    ch_fasta
    ch_genome

    main:
    ch_versions = Channel.empty()
    ch_metrics  = Channel.empty()

    if (params.test_model) {
        MAKE_TEST_MODEL(Channel.value(0))
        ch_model = MAKE_TEST_MODEL.out.ckpt
        ch_versions = ch_versions.mix(MAKE_TEST_MODEL.out.versions)
    } else {
        ch_model = Channel.value(file(params.model, checkIfExists: true))
    }

    PREDICT_PLAN(ch_fasta)
    ch_versions = ch_versions.mix(PREDICT_PLAN.out.versions)
    // what PREDICT reads (meta.predict_input): the genome h5, or the FASTA itself with the index PREDICT_PLAN made of
    // it (none where it could not: [] then, and the shard scans the FASTA)
    def from_fasta = params.predict_from == 'fasta'
    def predict_input = from_fasta ? 'fasta' : 'h5'
    // [meta, genome, index, plan]; an assembly of one shard and at most --predict_group_mbp is grouped with others
    // like it into one PREDICT_GROUP task (one start-up for many small assemblies), the rest fan out to PREDICT
    def group_bp = ((params.predict_group_mbp ?: 0) as double) * 1e6
    ch_planned = ch_genome
        .join(PREDICT_PLAN.out.plan)
        .join(PREDICT_PLAN.out.index, remainder: true)
        .map { meta, genome, plan, index -> [meta + [predict_input: predict_input], genome, (from_fasta && index) ? index : [], readJson(plan)] }
        .branch { meta, genome, index, plan ->
            groupable: group_bp > 0 && plan.shard_count == 1 && (plan.bp as long) <= group_bp
            other: true
        }
    ch_groups = ch_planned.groupable
        .map { meta, genome, index, plan -> [meta + [shard: 1, shards: 1], genome, index, plan.bp as long] }
        .toSortedList { a, b -> a[0].id <=> b[0].id }
        .flatMap { items -> groupBins(items, group_bp) }
        .branch { members ->
            alone: members.size() == 1
            grouped: true
        }
    ch_shards = ch_planned.other
        .flatMap { meta, genome, index, plan ->
            plan.shards.collect { s -> [meta + [shard: s.index, shards: s.count], genome, index] }
        }
        .mix(ch_groups.alone.map { members -> members[0][0..2] })
    PREDICT(ch_shards, ch_model)
    ch_versions = ch_versions.mix(PREDICT.out.versions)
    ch_metrics  = ch_metrics.mix(PREDICT.out.metrics)

    PREDICT_GROUP(ch_groups.grouped.map { members -> [members.collect { it[0] }, members.collect { it[1] }] }, ch_model)
    ch_versions = ch_versions.mix(PREDICT_GROUP.out.versions)
    // back to one [meta, file] per assembly, by the names PREDICT_GROUP gives them
    ch_metrics  = ch_metrics.mix(PREDICT_GROUP.out.metrics.flatMap { metas, files -> byAssembly(metas, files, '.predict.metrics.json') })

    ch_pred = PREDICT.out.predictions
        .mix(PREDICT_GROUP.out.predictions.flatMap { metas, files -> byAssembly(metas, files, '_predictions.h5') })
        .branch { meta, p ->
            single: meta.shards == 1
            sharded: true
        }
    // A sharded assembly: PREDICT_MERGE writes the merged <id>_predictions.h5, which is only published (moved to
    // --outdir where files are copied: work/ then holds the predictions once, as the shards); the tasks that read
    // predictions get PREDICT_VIEW's view over the shards, staged with them ([view, shard, ...])
    ch_parts = gatherParts(ch_pred.sharded, 'shard', 'shards')
    PREDICT_MERGE(ch_parts)
    ch_versions = ch_versions.mix(PREDICT_MERGE.out.versions)
    ch_metrics  = ch_metrics.mix(PREDICT_MERGE.out.metrics)
    PREDICT_VIEW(ch_parts)
    ch_versions = ch_versions.mix(PREDICT_VIEW.out.versions)
    ch_metrics  = ch_metrics.mix(PREDICT_VIEW.out.metrics)

    // an unsharded prediction (a file) and a view with its shards (a list, the view first) carry the same name
    // (<id>_predictions.h5) and meta
    ch_predictions = ch_pred.single
        .map { meta, p -> [baseMeta(meta), p] }
        .mix(PREDICT_VIEW.out.view.map { meta, v -> [meta.id, meta, v] }
                .join(ch_parts.map { meta, parts -> [meta.id, parts] })
                .map { id, meta, v, parts -> [meta, [v] + parts] })

    emit:
    predictions = ch_predictions
    model       = ch_model
    versions    = ch_versions
    metrics     = ch_metrics
}
