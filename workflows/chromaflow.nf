/*
 * The chromaflow workflow: FASTA → h5 → (sharded) prediction → tracks; expression → GENIE3 plan → chunked
 * GENIE3 → merge; REPORTING (benchmark report, MultiQC, versions). PREDICT_PLAN counts each assembly's rows from
 * its FASTA and lists the prediction shards; PREDICT fans out from that list on both routes. With
 * --predict_from fasta, PREDICT reads the FASTA itself and FASTA2H5 runs only when --save_h5 asks for the genome h5.
 *
 * take: ch_samplesheet  channel of [meta, fasta, expression|[], regulators|[], vcf|[]], meta = [id, species, expression_layout]
 */
include { FASTA2H5        } from '../modules/local/fasta2h5'
include { PREDICT_PLAN    } from '../modules/local/predict_plan'
include { MAKE_TEST_MODEL } from '../modules/local/make_test_model'
include { PREDICT         } from '../modules/local/predict'
include { PREDICT_MERGE   } from '../modules/local/predict_merge'
include { BIGWIG          } from '../modules/local/bigwig'
include { VARIANT_EFFECT  } from '../modules/local/variant_effect'
include { GENIE3_PLAN     } from '../modules/local/genie3_plan'
include { GENIE3          } from '../modules/local/genie3'
include { GENIE3_MERGE    } from '../modules/local/genie3_merge'
include { REPORTING       } from '../subworkflows/local/reporting'
include { gatherParts; baseMeta } from '../subworkflows/local/utils_chromaflow'

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
    ch_fasta = ch_samplesheet.map { meta, fasta, expr, regs, vcf -> [meta, fasta] }
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
        // Variant effects of the samplesheet's vcf column, with the same model (GPU label, as PREDICT)
        //
        if (!params.skip_variant_effect) {
            ch_vcf = ch_samplesheet
                .filter { meta, fasta, expr, regs, vcf -> vcf }
                .map { meta, fasta, expr, regs, vcf -> [meta, vcf, fasta] }
            VARIANT_EFFECT(ch_vcf, ch_model)
            ch_versions = ch_versions.mix(VARIANT_EFFECT.out.versions)
            ch_metrics  = ch_metrics.mix(VARIANT_EFFECT.out.metrics)
        }

        PREDICT_PLAN(ch_fasta)
        ch_versions = ch_versions.mix(PREDICT_PLAN.out.versions)
        // what PREDICT reads (meta.predict_input): the genome h5 of FASTA2H5, or the FASTA itself
        def predict_input = from_fasta ? 'fasta' : 'h5'
        ch_shards = (from_fasta ? ch_fasta : FASTA2H5.out.h5)
            .join(PREDICT_PLAN.out.plan)
            .flatMap { meta, genome, plan ->
                readJson(plan).shards.collect { s -> [meta + [predict_input: predict_input, shard: s.index, shards: s.count], genome] }
            }
        PREDICT(ch_shards, ch_model)
        ch_versions = ch_versions.mix(PREDICT.out.versions)
        ch_metrics  = ch_metrics.mix(PREDICT.out.metrics)

        ch_pred = PREDICT.out.predictions.branch { meta, p ->
            single: meta.shards == 1
            sharded: true
        }
        PREDICT_MERGE(gatherParts(ch_pred.sharded, 'shard', 'shards'))
        ch_versions = ch_versions.mix(PREDICT_MERGE.out.versions)
        ch_metrics  = ch_metrics.mix(PREDICT_MERGE.out.metrics)

        // an unsharded prediction and a merged one carry the same name (<id>_predictions.h5) and meta
        ch_predictions = ch_pred.single
            .map { meta, p -> [baseMeta(meta), p] }
            .mix(PREDICT_MERGE.out.predictions)

        //
        // Tracks for genome browsers
        //
        if (!params.skip_tracks) {
            ch_blacklist = params.track_blacklist ? Channel.value(file(params.track_blacklist, checkIfExists: true)) : Channel.value([])
            BIGWIG(ch_predictions, ch_blacklist)
            ch_versions = ch_versions.mix(BIGWIG.out.versions)
            ch_metrics  = ch_metrics.mix(BIGWIG.out.metrics)
        }
    }

    //
    // GENIE3 for assemblies with an expression matrix: a plan (gene count → chunks, read by the Python reader),
    // then one task per chunk of target genes, merged per assembly
    //
    if (!params.skip_genie3) {
        ch_expression = ch_samplesheet
            .filter { meta, fasta, expr, regs, vcf -> expr }
            .map { meta, fasta, expr, regs, vcf -> [meta, expr, regs] }
        GENIE3_PLAN(ch_expression)
        ch_versions = ch_versions.mix(GENIE3_PLAN.out.versions)

        ch_genie3 = ch_expression
            .join(GENIE3_PLAN.out.plan)
            .flatMap { meta, expr, regs, plan ->
                def n = readJson(plan).chunks as int
                (1..n).collect { i -> [meta + [chunk: i, chunks: n], expr, regs] }
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
