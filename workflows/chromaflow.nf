/*
 * The chromaflow workflow: FASTA → h5 → (sharded) prediction → tracks; expression → GENIE3 plan → chunked
 * GENIE3 → merge; benchmark report; MultiQC. With --predict_from fasta, PREDICT reads the FASTA itself (shards
 * planned from FASTA_LAYOUT's row count) and FASTA2H5 runs only when --save_h5 asks for the genome h5.
 *
 * take: ch_samplesheet  channel of [meta, fasta, expression|[], regulators|[]], meta = [id, species, expression_layout]
 */
include { FASTA2H5        } from '../modules/local/fasta2h5'
include { FASTA_LAYOUT    } from '../modules/local/fasta_layout'
include { MAKE_TEST_MODEL } from '../modules/local/make_test_model'
include { PREDICT         } from '../modules/local/predict'
include { PREDICT_MERGE   } from '../modules/local/predict_merge'
include { BIGWIG          } from '../modules/local/bigwig'
include { GENIE3_PLAN     } from '../modules/local/genie3_plan'
include { GENIE3          } from '../modules/local/genie3'
include { GENIE3_MERGE    } from '../modules/local/genie3_merge'
include { BENCHMARK       } from '../modules/local/benchmark'
include { MULTIQC         } from '../modules/local/multiqc'
include { runTraceFile    } from '../subworkflows/local/utils_chromaflow'

// Number of prediction shards for an assembly of `rows` subsequences: `shards` is an integer or 'auto'
// (one shard per `shardRows` subsequences).
def shardCount(rows, shards, shardRows) {
    def p = shards.toString()
    if (p == 'auto') {
        return Math.max(1, Math.ceil(rows / (shardRows as double)) as int)
    }
    return Math.max(1, Math.min(p as int, rows as int))
}

def readJson(path) {
    return new groovy.json.JsonSlurper().parse(path.toFile())
}

// Annotate one metrics JSON with the assembly/shard it belongs to (for the BENCHMARK stage).
def annotateMetrics(meta, json, extra = [:]) {
    def m = readJson(json)
    m.assembly = meta.id
    extra.each { k, v -> m[k] = v }
    return groovy.json.JsonOutput.toJson(m)
}

// meta without the keys of one shard / chunk (and of PREDICT's input kind)
def baseMeta(meta) {
    return meta.findAll { k, v -> !(k in ['shard', 'shards', 'chunk', 'chunks', 'predict_input']) }
}

// [meta, input] of every prediction shard of an assembly of `rows` subsequences
def shardsOf(meta, input, rows, extra = [:]) {
    def n = shardCount(rows as long, params.predict_shards, params.predict_shard_rows)
    return (1..n).collect { i -> [meta + extra + [shard: i, shards: n], input] }
}

workflow CHROMAFLOW {
    take:
    ch_samplesheet

    main:
    ch_versions = Channel.empty()
    ch_metrics  = Channel.empty()

    //
    // FASTA → HDF5
    //
    ch_fasta = ch_samplesheet.map { meta, fasta, expr, regs -> [meta, fasta] }
    def from_fasta = params.predict_from == 'fasta' && !params.skip_predict
    if (!from_fasta || params.save_h5) {
        FASTA2H5(ch_fasta)
        ch_versions = ch_versions.mix(FASTA2H5.out.versions)
        ch_metrics  = ch_metrics.mix(FASTA2H5.out.metrics.map { meta, j -> annotateMetrics(meta, j) })
    }

    //
    // Prediction, sharded over tasks (GPUs/nodes), merged per assembly
    //
    if (!params.skip_predict) {
        if (params.test_model) {
            MAKE_TEST_MODEL(Channel.value(0))
            ch_model = MAKE_TEST_MODEL.out.ckpt
            ch_versions = ch_versions.mix(MAKE_TEST_MODEL.out.versions)
        } else {
            ch_model = Channel.value(file(params.model, checkIfExists: true))
        }

        if (from_fasta) {
            FASTA_LAYOUT(ch_fasta)
            ch_versions = ch_versions.mix(FASTA_LAYOUT.out.versions)
            ch_shards = ch_fasta
                .join(FASTA_LAYOUT.out.layout)
                .flatMap { meta, fasta, json -> shardsOf(meta, fasta, readJson(json).subsequences, [predict_input: 'fasta']) }
        } else {
            ch_shards = FASTA2H5.out.h5
                .join(FASTA2H5.out.metrics)
                .flatMap { meta, h5, json -> shardsOf(meta, h5, readJson(json).subsequences) }
        }
        PREDICT(ch_shards, ch_model)
        ch_versions = ch_versions.mix(PREDICT.out.versions)
        ch_metrics  = ch_metrics.mix(PREDICT.out.metrics.map { meta, j -> annotateMetrics(meta, j, [shard: meta.shard, shards: meta.shards]) })

        ch_pred = PREDICT.out.predictions.branch { meta, p ->
            single: meta.shards == 1
            sharded: true
        }
        ch_to_merge = ch_pred.sharded
            .map { meta, p -> [groupKey(baseMeta(meta), meta.shards), meta.shard, p] }
            .groupTuple()
            .map { key, idx, files -> [key.getGroupTarget(), [idx, files].transpose().sort { it[0] }.collect { it[1] }] }
        PREDICT_MERGE(ch_to_merge)
        ch_versions = ch_versions.mix(PREDICT_MERGE.out.versions)
        ch_metrics  = ch_metrics.mix(PREDICT_MERGE.out.metrics.map { meta, j -> annotateMetrics(meta, j) })

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
            ch_metrics  = ch_metrics.mix(BIGWIG.out.metrics.map { meta, j -> annotateMetrics(meta, j) })
        }
    }

    //
    // GENIE3 for assemblies with an expression matrix: a plan (gene count → chunks, read by the Python reader),
    // then one task per chunk of target genes, merged per assembly
    //
    if (!params.skip_genie3) {
        ch_expression = ch_samplesheet
            .filter { meta, fasta, expr, regs -> expr }
            .map { meta, fasta, expr, regs -> [meta, expr, regs] }
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
        ch_metrics  = ch_metrics.mix(GENIE3.out.metrics.map { meta, j -> annotateMetrics(meta, j, [chunk: meta.chunk, chunks: meta.chunks]) })

        ch_parts = GENIE3.out.part
            .map { meta, part -> [groupKey(baseMeta(meta), meta.chunks), meta.chunk, part] }
            .groupTuple()
            .map { key, idx, files -> [key.getGroupTarget(), [idx, files].transpose().sort { it[0] }.collect { it[1] }] }
        GENIE3_MERGE(ch_parts)
        ch_versions = ch_versions.mix(GENIE3_MERGE.out.versions)
        ch_metrics  = ch_metrics.mix(GENIE3_MERGE.out.metrics.map { meta, j -> annotateMetrics(meta, j) })
    }

    //
    // Versions of the tools that made the results (one file, deduplicated), for the reports
    //
    ch_versions_file = ch_versions
        .unique { it.text }
        .collectFile(name: 'software_versions.yml', sort: { it.text }, newLine: false)

    //
    // Benchmark report from every task's metrics and this run's trace (a staged input, [] where there is none)
    //
    ch_multiqc_files = Channel.empty()
    if (!params.skip_benchmark) {
        def trace = runTraceFile()
        ch_metrics_file = ch_metrics.collectFile(name: 'metrics.jsonl', newLine: true, sort: true)
        BENCHMARK(ch_metrics_file, ch_versions_file, trace ?: [])
        ch_versions = ch_versions.mix(BENCHMARK.out.versions)
        ch_multiqc_files = BENCHMARK.out.multiqc
    }

    //
    // MultiQC: benchmark custom content + software versions. Its content is the benchmark's: MultiQC finds no
    // results in the versions alone and fails, so --skip_benchmark also skips it.
    //
    if (!params.skip_multiqc && !params.skip_benchmark) {
        MULTIQC(
            ch_multiqc_files.collect().ifEmpty([]),
            ch_versions_file,
            file("${projectDir}/assets/multiqc_config.yml", checkIfExists: true)
        )
        ch_versions = ch_versions.mix(MULTIQC.out.versions)
    }

    //
    // Every process's versions (the report stages included) in pipeline_info/
    //
    ch_versions
        .unique { it.text }
        .collectFile(name: 'software_versions.yml', storeDir: "${params.outdir}/pipeline_info", sort: { it.text }, newLine: false)
        .set { ch_versions_published }

    emit:
    versions = ch_versions_published
}
