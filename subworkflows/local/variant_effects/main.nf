/*
 * VARIANT_EFFECTS: the predicted effect of each variant of an assembly's VCF (REF against ALT windows, with the
 * prediction model), sharded by variant count as VARIANT_PLAN lists the shards (--variant_shard_size) and joined by
 * VARIANT_MERGE, like prediction.
 *
 *   vcf ── VARIANT_PLAN ── VARIANT_EFFECT × n (GPU label, as PREDICT) ── n > 1: VARIANT_MERGE ── <id>/variants/
 *
 * take: ch_vcf     [meta, vcf, fasta] per assembly with a vcf
 *       ch_model   the checkpoint (a value channel)
 * emit: tracks     [id, bigWigs]: the final top-variant bigWigs of each assembly with a vcf ([] where none were
 *                  written, e.g. every variant skipped), the unsharded task's or the merge's; TRACKS adds them to the
 *                  assembly's browser files (VARIANT_BROWSER)
 *       effects    [id, effects table] of each assembly with a vcf: the unsharded task's or the merge's
 *       versions, metrics
 */
include { VARIANT_PLAN   } from '../../../modules/local/variant_plan'
include { VARIANT_EFFECT } from '../../../modules/local/variant_effect'
include { VARIANT_MERGE  } from '../../../modules/local/variant_merge'
include { gatherParts; readJson } from '../utils_chromaflow/parts'

workflow VARIANT_EFFECTS {
    take:
    ch_vcf
    ch_model

    main:
    ch_versions = Channel.empty()
    ch_metrics  = Channel.empty()

    VARIANT_PLAN(ch_vcf.map { meta, vcf, fasta -> [meta, vcf] })
    ch_versions = ch_versions.mix(VARIANT_PLAN.out.versions)
    ch_variant_shards = ch_vcf
        .join(VARIANT_PLAN.out.plan)
        .flatMap { meta, vcf, fasta, plan ->
            readJson(plan).shards.collect { s -> [meta + [shard: s.index, shards: s.count], vcf, fasta] }
        }
    VARIANT_EFFECT(ch_variant_shards, ch_model)
    ch_versions = ch_versions.mix(VARIANT_EFFECT.out.versions)
    ch_metrics  = ch_metrics.mix(VARIANT_EFFECT.out.metrics)

    // a shard's [table, candidate files] in shard order → [meta, tables, all candidate files]
    VARIANT_MERGE(
        gatherParts(VARIANT_EFFECT.out.part.filter { meta, t, c -> meta.shards > 1 }.map { meta, t, c -> [meta, [t, c]] },
                    'shard', 'shards')
            .map { meta, parts -> [meta, parts.collect { it[0] }, parts.collect { it[1] }.flatten()] }
    )
    ch_versions = ch_versions.mix(VARIANT_MERGE.out.versions)
    ch_metrics  = ch_metrics.mix(VARIANT_MERGE.out.metrics)

    // (join with remainder: an assembly without bigWigs comes out as [id, true, null])
    ch_tracks = VARIANT_EFFECT.out.effects.filter { meta, e -> meta.shards == 1 }.map { meta, e -> [meta.id, true] }
        .mix(VARIANT_MERGE.out.effects.map { meta, e -> [meta.id, true] })
        .join(VARIANT_EFFECT.out.tracks.filter { meta, t -> meta.shards == 1 }.map { meta, t -> [meta.id, t] }
                .mix(VARIANT_MERGE.out.tracks.map { meta, t -> [meta.id, t] }), remainder: true)
        .map { id, scored, t -> [id, t ?: []] }

    ch_effects = VARIANT_EFFECT.out.effects.filter { meta, e -> meta.shards == 1 }.map { meta, e -> [meta.id, e] }
        .mix(VARIANT_MERGE.out.effects.map { meta, e -> [meta.id, e] })

    emit:
    tracks   = ch_tracks
    effects  = ch_effects
    versions = ch_versions
    metrics  = ch_metrics
}
