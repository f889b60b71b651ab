/*
 * The chromaflow workflow: FASTA → h5 → (sharded) prediction → tracks; expression → GENIE3; benchmark.
 */
include { FASTA2H5        } from '../modules/local/fasta2h5'
include { MAKE_TEST_MODEL } from '../modules/local/make_test_model'
include { PREDICT         } from '../modules/local/predict'
include { PREDICT_MERGE   } from '../modules/local/predict_merge'
include { BIGWIG          } from '../modules/local/bigwig'
include { GENIE3          } from '../modules/local/genie3'
include { GENIE3_MERGE    } from '../modules/local/genie3_merge'
include { BENCHMARK       } from '../modules/local/benchmark'
include { countGenes      } from '../subworkflows/local/samplesheet'

// Number of prediction shards for an assembly of `rows` subsequences.
def shardCount(rows) {
    def p = params.predict_shards.toString()
    if (p == 'auto') {
        return Math.max(1, Math.ceil(rows / (params.predict_shard_rows as double)) as int)
    }
    return Math.max(1, Math.min(p as int, rows as int))
}

// Annotate one metrics JSON with the assembly/shard it belongs to (for the BENCHMARK stage).
def annotateMetrics(meta, json, extra = [:]) {
    def m = new groovy.json.JsonSlurper().parse(json.toFile())
    m.assembly = meta.id
    extra.each { k, v -> m[k] = v }
    return groovy.json.JsonOutput.toJson(m)
}

workflow CHROMAFLOW {
    take:
    rows   // [meta, fasta, expression|null, regulators|null]

    main:
    ch_versions = Channel.empty()
    ch_metrics  = Channel.empty()

    ch_rows = Channel.fromList(rows)

    //
    // FASTA → HDF5
    //
    FASTA2H5(ch_rows.map { meta, fasta, expr, regs -> [meta, fasta] })
    ch_versions = ch_versions.mix(FASTA2H5.out.versions)
    ch_metrics  = ch_metrics.mix(FASTA2H5.out.metrics.map { meta, j -> annotateMetrics(meta, j) })

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

        ch_shards = FASTA2H5.out.h5
            .join(FASTA2H5.out.metrics)
            .flatMap { meta, h5, json ->
                def rowsN = new groovy.json.JsonSlurper().parse(json.toFile()).subsequences as long
                def n = shardCount(rowsN)
                (1..n).collect { i -> [meta + [shard: i, shards: n], h5] }
            }
        PREDICT(ch_shards, ch_model)
        ch_versions = ch_versions.mix(PREDICT.out.versions)
        ch_metrics  = ch_metrics.mix(PREDICT.out.metrics.map { meta, j -> annotateMetrics(meta, j, [shard: meta.shard, shards: meta.shards]) })

        ch_pred = PREDICT.out.predictions.branch { meta, p ->
            single: meta.shards == 1
            sharded: true
        }
        ch_to_merge = ch_pred.sharded
            .map { meta, p -> [groupKey(meta.subMap(['id', 'species', 'expression_layout']), meta.shards), meta.shard, p] }
            .groupTuple()
            .map { key, idx, files -> [key.getGroupTarget(), [idx, files].transpose().sort { it[0] }.collect { it[1] }] }
        PREDICT_MERGE(ch_to_merge)
        ch_versions = ch_versions.mix(PREDICT_MERGE.out.versions)
        ch_metrics  = ch_metrics.mix(PREDICT_MERGE.out.metrics.map { meta, j -> annotateMetrics(meta, j) })

        ch_predictions = ch_pred.single
            .map { meta, p -> [meta.subMap(['id', 'species', 'expression_layout']), p] }
            .mix(PREDICT_MERGE.out.predictions)

        //
        // Tracks for genome browsers
        //
        if (!params.skip_tracks) {
            BIGWIG(ch_predictions)
            ch_versions = ch_versions.mix(BIGWIG.out.versions)
            ch_metrics  = ch_metrics.mix(BIGWIG.out.metrics.map { meta, j -> annotateMetrics(meta, j) })
        }
    }

    //
    // GENIE3 for assemblies with an expression matrix, split into target chunks
    //
    if (!params.skip_genie3) {
        ch_genie3 = ch_rows
            .filter { meta, fasta, expr, regs -> expr != null }
            .flatMap { meta, fasta, expr, regs ->
                def genes = countGenes(expr, meta.expression_layout)
                def n = Math.max(1, Math.ceil(genes / (params.genie3_chunk_size as double)) as int)
                (1..n).collect { i -> [meta + [chunk: i, chunks: n], expr, regs ?: []] }
            }
        GENIE3(ch_genie3)
        ch_versions = ch_versions.mix(GENIE3.out.versions)
        ch_metrics  = ch_metrics.mix(GENIE3.out.metrics.map { meta, j -> annotateMetrics(meta, j, [chunk: meta.chunk, chunks: meta.chunks]) })

        ch_parts = GENIE3.out.part
            .map { meta, part -> [groupKey(meta.subMap(['id', 'species', 'expression_layout']), meta.chunks), meta.chunk, part] }
            .groupTuple()
            .map { key, idx, files -> [key.getGroupTarget(), [idx, files].transpose().sort { it[0] }.collect { it[1] }] }
        GENIE3_MERGE(ch_parts)
        ch_versions = ch_versions.mix(GENIE3_MERGE.out.versions)
        ch_metrics  = ch_metrics.mix(GENIE3_MERGE.out.metrics.map { meta, j -> annotateMetrics(meta, j) })
    }

    //
    // Versions of every tool, deduplicated, in pipeline_info/
    //
    ch_versions
        .unique { it.text }
        .collectFile(name: 'software_versions.yml', storeDir: "${params.outdir}/pipeline_info", sort: true, newLine: false)
        .set { ch_versions_file }

    //
    // Benchmark report from every task's metrics
    //
    if (!params.skip_benchmark) {
        ch_metrics_file = ch_metrics.collectFile(name: 'metrics.jsonl', newLine: true, sort: true)
        BENCHMARK(ch_metrics_file, ch_versions_file)
    }

    emit:
    versions = ch_versions_file
}
