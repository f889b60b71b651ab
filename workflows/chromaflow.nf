/*
 * The chromaflow workflow: FASTA → h5 → (sharded) prediction → tracks → peaks; expression → GENIE3 plan → chunked
 * GENIE3 → merge; REPORTING (benchmark report, MultiQC, versions). PREDICT_PLAN counts each assembly's rows from
 * its FASTA and lists the prediction shards; PREDICT fans out from that list on both routes. With
 * --predict_from fasta, PREDICT reads the FASTA itself and FASTA2H5 runs only when --save_h5 asks for the genome h5.
 *
 * Where the samplesheet gives an annotation, GENE_ACCESSIBILITY tabulates each gene's predicted promoter coverage
 * (after prediction), and with motifs MOTIF_PRIOR builds the (TF, target) prior (hits weighted by the predicted
 * accessibility when prediction runs); GENIE3 waits for that prior only when --genie3_prior_alpha > 0.
 *
 * take: ch_samplesheet  channel of [meta, fasta, expression|[], regulators|[], annotation|[], motifs|[], tf_motifs|[],
 *                       vcf|[]],
 *                       meta = [id, species, expression_layout] (+ motifs_db)
 * Where it gives a vcf, VARIANT_EFFECT scores the variants with the prediction model, sharded as VARIANT_PLAN lists
 * the shards (--variant_shard_size variants each) and joined by VARIANT_MERGE, like prediction.
 */
include { FASTA2H5        } from '../modules/local/fasta2h5'
include { PREDICT_PLAN    } from '../modules/local/predict_plan'
include { MAKE_TEST_MODEL } from '../modules/local/make_test_model'
include { PREDICT         } from '../modules/local/predict'
include { PREDICT_GROUP   } from '../modules/local/predict_group'
include { PREDICT_MERGE   } from '../modules/local/predict_merge'
include { PREDICT_VIEW    } from '../modules/local/predict_view'
include { BIGWIG          } from '../modules/local/bigwig'
include { PEAKS           } from '../modules/local/peaks'
include { VARIANT_PLAN    } from '../modules/local/variant_plan'
include { VARIANT_EFFECT  } from '../modules/local/variant_effect'
include { VARIANT_MERGE   } from '../modules/local/variant_merge'
include { VARIANT_BROWSER } from '../modules/local/variant_browser'
include { GENIE3_PLAN     } from '../modules/local/genie3_plan'
include { GENIE3          } from '../modules/local/genie3'
include { GENIE3_MERGE    } from '../modules/local/genie3_merge'
include { GENE_ACCESSIBILITY } from '../modules/local/gene_accessibility'
include { MOTIF_PRIOR     } from '../modules/local/motif_prior'
include { REPORTING       } from '../subworkflows/local/reporting'
include { gatherParts; baseMeta; groupBins; byAssembly } from '../subworkflows/local/utils_chromaflow'

def readJson(path) {
    return new groovy.json.JsonSlurper().parse(path.toFile())
}

workflow CHROMAFLOW {
    take:
    ch_samplesheet

    main:
    ch_versions = Channel.empty()
    ch_metrics  = Channel.empty()   // [meta, metrics JSON] of every task, annotated by REPORTING

    //
    // FASTA → HDF5
    //
    ch_fasta = ch_samplesheet.map { meta, fasta, expr, regs, annot, motifs, tfm, vcf -> [meta, fasta] }
    ch_predictions = Channel.empty()
    def from_fasta = params.predict_from == 'fasta' && !params.skip_predict
    if (!from_fasta || params.save_h5) {
        FASTA2H5(ch_fasta)
        ch_versions = ch_versions.mix(FASTA2H5.out.versions)
        ch_metrics  = ch_metrics.mix(FASTA2H5.out.metrics)
    }

    //
    // Prediction, sharded over tasks (GPUs/nodes) as PREDICT_PLAN lists the shards, merged per assembly
    //
    if (!params.skip_predict) {
        if (params.test_model) {
            MAKE_TEST_MODEL(Channel.value(0))
            ch_model = MAKE_TEST_MODEL.out.ckpt
            ch_versions = ch_versions.mix(MAKE_TEST_MODEL.out.versions)
        } else {
            ch_model = Channel.value(file(params.model, checkIfExists: true))
        }

        //
        // Variant effects of the samplesheet's vcf column, with the same model (GPU label, as PREDICT), sharded by
        // variant count as VARIANT_PLAN lists the shards; a sharded assembly's parts are joined by VARIANT_MERGE
        //
        ch_variant_tracks = Channel.empty()
        if (!params.skip_variant_effect) {
            ch_vcf = ch_samplesheet
                .filter { meta, fasta, expr, regs, annot, motifs, tfm, vcf -> vcf }
                .map { meta, fasta, expr, regs, annot, motifs, tfm, vcf -> [meta, vcf, fasta] }
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

            // the final top-variant bigWigs of each assembly with a vcf: [id, bigWigs] ([] where none were
            // written, e.g. every variant skipped): the unsharded task's or the merge's
            // (join with remainder: an assembly without bigWigs comes out as [id, true, null])
            ch_variant_tracks = VARIANT_EFFECT.out.effects.filter { meta, e -> meta.shards == 1 }.map { meta, e -> [meta.id, true] }
                .mix(VARIANT_MERGE.out.effects.map { meta, e -> [meta.id, true] })
                .join(VARIANT_EFFECT.out.tracks.filter { meta, t -> meta.shards == 1 }.map { meta, t -> [meta.id, t] }
                        .mix(VARIANT_MERGE.out.tracks.map { meta, t -> [meta.id, t] }), remainder: true)
                .map { id, scored, t -> [id, t ?: []] }
        }

        PREDICT_PLAN(ch_fasta)
        ch_versions = ch_versions.mix(PREDICT_PLAN.out.versions)
        // what PREDICT reads (meta.predict_input): the genome h5 of FASTA2H5, or the FASTA itself with the index
        // PREDICT_PLAN made of it (none where it could not: [] then, and the shard scans the FASTA)
        def predict_input = from_fasta ? 'fasta' : 'h5'
        // [meta, genome, index, plan]; an assembly of one shard and at most --predict_group_mbp is grouped with others
        // like it into one PREDICT_GROUP task (one start-up for many small assemblies), the rest fan out to PREDICT
        def group_bp = ((params.predict_group_mbp ?: 0) as double) * 1e6
        ch_planned = (from_fasta ? ch_fasta : FASTA2H5.out.h5)
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

        //
        // Tracks for genome browsers
        //
        if (!params.skip_tracks) {
            ch_blacklist = params.track_blacklist ? Channel.value(file(params.track_blacklist, checkIfExists: true)) : Channel.value([])
            // an assembly with an annotation gets GENE_ACCESSIBILITY's promoter BED in its IGV session and the same
            // windows as bigBed in its UCSC hub
            // an assembly with variant tracks gets them added by VARIANT_BROWSER (meta.variant_browser: BIGWIG's
            // and PEAKS' browser files are then not the final ones, and not published)
            def variant_browser = !params.skip_variant_effect && (params.variant_tracks as int) > 0
            ch_promoter_bed = ch_samplesheet.map { meta, fasta, expr, regs, annot, motifs, tfm, vcf -> [meta.id, annot ? true : false, variant_browser && vcf ? true : false] }
            ch_bigwig = ch_predictions
                .map { meta, p -> [meta.id, meta, p] }
                .join(ch_promoter_bed)
                .map { id, meta, p, annotated, variants ->
                    def promoters = annotated ? [promoter_bed: "../genes/${meta.id}.promoters.bed",
                                                 promoter_bb: "../genes/${meta.id}.promoters.bb"] : [:]
                    [meta + promoters + (variants ? [variant_browser: true] : [:]), p]
                }
            BIGWIG(ch_bigwig, ch_blacklist)
            ch_versions = ch_versions.mix(BIGWIG.out.versions)
            ch_metrics  = ch_metrics.mix(BIGWIG.out.metrics)

            //
            // Peaks on the predicted tracks, added to BIGWIG's IGV session and hub
            //
            if (!params.skip_peaks) {
                // joined by id: BIGWIG's meta may carry the promoter BED of its IGV session (annotated assemblies)
                PEAKS(
                    ch_predictions.map { meta, p -> [meta.id, p] }
                        .join(BIGWIG.out.tracks.map { meta, t -> [meta.id, meta, t] })
                        .map { id, p, meta, t -> [meta, p, t, []] }
                )
                ch_versions = ch_versions.mix(PEAKS.out.versions)
                ch_metrics  = ch_metrics.mix(PEAKS.out.metrics)
            }

            //
            // The top variants' ref/alt bigWigs added to the final browser files: PEAKS' where peaks run, else
            // BIGWIG's (its igv_session.xml and trackDb.txt)
            //
            ch_browser = params.skip_peaks
                ? BIGWIG.out.tracks.map { meta, t -> [meta, t.findAll { f -> f.name in ['igv_session.xml', 'trackDb.txt'] }] }
                : PEAKS.out.browser
            VARIANT_BROWSER(
                ch_browser.filter { meta, b -> meta.variant_browser }
                    .map { meta, b -> [meta.id, meta, b] }
                    .join(ch_variant_tracks)
                    .map { id, meta, b, t -> [meta, b, t] }
            )
            ch_versions = ch_versions.mix(VARIANT_BROWSER.out.versions)
        }

        //
        // Promoter accessibility per gene, for assemblies with an annotation
        //
        ch_annotated = ch_samplesheet
            .filter { meta, fasta, expr, regs, annot, motifs, tfm, vcf -> annot }
            .map { meta, fasta, expr, regs, annot, motifs, tfm, vcf -> [meta.id, meta, annot] }
        GENE_ACCESSIBILITY(
            ch_annotated.join(ch_predictions.map { meta, p -> [meta.id, p] })
                .map { id, meta, annot, p -> [meta, annot, p] }
        )
        ch_versions = ch_versions.mix(GENE_ACCESSIBILITY.out.versions)
        ch_metrics  = ch_metrics.mix(GENE_ACCESSIBILITY.out.metrics)
    }

    //
    // Networks (not with --skip_genie3). The motif prior of assemblies with motifs: hits weighted by the predicted
    // accessibility where prediction runs. Then GENIE3 for assemblies with an expression matrix: a plan (gene count →
    // chunks, read by the Python reader), one task per chunk of target genes, merged per assembly.
    //
    if (!params.skip_genie3) {
        ch_motifs = ch_samplesheet
            .filter { meta, fasta, expr, regs, annot, motifs, tfm, vcf -> tfm }
            .map { meta, fasta, expr, regs, annot, motifs, tfm, vcf -> [meta.id, meta, fasta, annot, motifs, tfm, regs] }
        ch_motif_input = params.skip_predict
            ? ch_motifs.map { row -> row.drop(1) + [[]] }
            : ch_motifs.join(ch_predictions.map { meta, p -> [meta.id, p] }).map { row -> row.drop(1) }
        MOTIF_PRIOR(ch_motif_input)
        ch_versions = ch_versions.mix(MOTIF_PRIOR.out.versions)
        ch_metrics  = ch_metrics.mix(MOTIF_PRIOR.out.metrics)

        ch_expression = ch_samplesheet
            .filter { meta, fasta, expr, regs, annot, motifs, tfm, vcf -> expr }
            .map { meta, fasta, expr, regs, annot, motifs, tfm, vcf -> [meta, expr, regs] }
        // the prior reaches GENIE3 only when asked for (--genie3_prior_alpha > 0) and the assembly has motifs: then
        // its GENIE3 tasks wait for MOTIF_PRIOR; the others get [] (plain GENIE3)
        def use_prior = (params.genie3_prior_alpha as double) > 0
        ch_wants_prior = ch_samplesheet
            .filter { meta, fasta, expr, regs, annot, motifs, tfm, vcf -> expr }
            .map { meta, fasta, expr, regs, annot, motifs, tfm, vcf -> [meta.id, use_prior && tfm ? true : false] }
        GENIE3_PLAN(ch_expression)
        ch_versions = ch_versions.mix(GENIE3_PLAN.out.versions)

        ch_plans = ch_expression
            .join(GENIE3_PLAN.out.plan)
            .map { meta, expr, regs, plan -> [meta.id, meta, expr, regs, plan] }
            .join(ch_wants_prior)
            .branch { row ->
                prior: row[5]
                plain: true
            }
        ch_genie3 = ch_plans.prior.map { row -> row[0..4] }
            .join(MOTIF_PRIOR.out.prior.map { meta, p -> [meta.id, p] })
            .mix(ch_plans.plain.map { row -> row[0..4] + [[]] })
            .flatMap { id, meta, expr, regs, plan, prior ->
                def n = readJson(plan).chunks as int
                (1..n).collect { i -> [meta + [chunk: i, chunks: n], expr, regs, prior ?: []] }
            }
        GENIE3(ch_genie3)
        ch_versions = ch_versions.mix(GENIE3.out.versions)
        ch_metrics  = ch_metrics.mix(GENIE3.out.metrics)

        GENIE3_MERGE(gatherParts(GENIE3.out.part, 'chunk', 'chunks'))
        ch_versions = ch_versions.mix(GENIE3_MERGE.out.versions)
        ch_metrics  = ch_metrics.mix(GENIE3_MERGE.out.metrics)
    }

    //
    // Benchmark report, MultiQC and the versions of every process
    //
    REPORTING(ch_versions, ch_metrics)

    emit:
    versions = REPORTING.out.versions
}
