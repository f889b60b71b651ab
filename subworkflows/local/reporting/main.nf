/*
 * REPORTING: the end of every mode's workflow (workflows/chromaflow.nf, workflows/train.nf).
 *
 *   every task's metrics JSON, annotated from its meta ── metrics.jsonl ─┐
 *   versions.yml of the mode's tasks ── software_versions.yml ───────────┼─ BENCHMARK (+ this run's trace) ── MULTIQC
 *   every versions.yml, the two report stages' included ── <outdir>/pipeline_info/software_versions.yml
 *
 * take: ch_versions  versions.yml of the mode's tasks
 *       ch_metrics   [meta, metrics JSON or a list of them]: meta.id is the assembly; meta's shard/shards and
 *                    chunk/chunks (where present) say which part of it the task did
 * emit: versions     the published software_versions.yml
 * MultiQC's content is the benchmark's (it finds no results in the versions alone and fails), so --skip_benchmark
 * also skips it.
 */
include { BENCHMARK } from '../../../modules/local/benchmark'
include { MULTIQC   } from '../../../modules/local/multiqc'
include { isUrl     } from '../utils_chromaflow/schema'

/*
 * This run's trace file, for the benchmark stage, or null (with a warning saying why) where there is none to
 * read: tracing disabled, no file name known, or a file that does not exist on this machine while the run goes
 * (e.g. an s3:// outdir, which Nextflow uploads only at the end). nf-test and `-with-trace FILE` replace
 * trace.file; the session's configuration holds the name actually used.
 */
def runTraceFile() {
    def cfg = workflow.session.config.trace ?: [:]
    def why = null
    def trace = null
    if (!cfg.enabled) {
        why = 'tracing is disabled (trace.enabled = false)'
    } else if (!cfg.file) {
        why = 'the trace file name is not known (set trace.file)'
    } else if (isUrl(cfg.file)) {
        why = "the trace ${cfg.file} is remote and written only at the end of the run"
    } else {
        trace = file(cfg.file.toString())
        if (!trace.exists()) {
            why = "the trace ${trace} does not exist"
            trace = null
        }
    }
    if (why) {
        log.warn("chromaflow: ${why}: the benchmark report will have empty trace columns (realtime, %cpu, peak_rss, attempts)")
    }
    return trace
}

// The meta keys that say which part of an assembly a task did, copied into its metrics for the report.
List<String> partKeys() { ['shard', 'shards', 'chunk', 'chunks'] }

/*
 * One metrics JSON as one line of metrics.jsonl: annotated with the assembly (meta.id) and the part (partKeys() of
 * meta); per-epoch detail (TRAIN) stays in the stage's own file, the report wants one line per task.
 */
def annotateMetrics(meta, json) {
    def m = new groovy.json.JsonSlurper().parse(json.toFile())
    m.assembly = meta.id
    partKeys().findAll { k -> meta[k] != null }.each { k -> m[k] = meta[k] }
    m.remove('epochs')
    return groovy.json.JsonOutput.toJson(m)
}

// Every versions.yml once (equal texts deduplicated), sorted by text, as one file; `options` go to collectFile.
def collectVersions(ch_versions, Map options = [:]) {
    return ch_versions
        .unique { it.text }
        .collectFile([name: 'software_versions.yml', sort: { it.text }, newLine: false] + options)
}

workflow REPORTING {
    take:
    ch_versions
    ch_metrics

    main:
    ch_versions_file = collectVersions(ch_versions)
    ch_multiqc_files = Channel.empty()
    if (!params.skip_benchmark) {
        def trace = runTraceFile()
        ch_metrics_file = ch_metrics
            .flatMap { meta, js -> (js instanceof List ? js : [js]).collect { j -> annotateMetrics(meta, j) } }
            .collectFile(name: 'metrics.jsonl', newLine: true, sort: true)
        // the trace is a staged input, [] where there is none
        BENCHMARK(ch_metrics_file, ch_versions_file, trace ?: [])
        ch_versions = ch_versions.mix(BENCHMARK.out.versions)
        ch_multiqc_files = BENCHMARK.out.multiqc
    }
    if (!params.skip_multiqc && !params.skip_benchmark) {
        MULTIQC(
            ch_multiqc_files.collect().ifEmpty([]),
            ch_versions_file,
            file("${projectDir}/assets/multiqc_config.yml", checkIfExists: true)
        )
        ch_versions = ch_versions.mix(MULTIQC.out.versions)
    }
    // every process's versions (the report stages included) in pipeline_info/
    ch_versions_published = collectVersions(ch_versions, [storeDir: "${params.outdir}/pipeline_info"])

    emit:
    versions = ch_versions_published
}
