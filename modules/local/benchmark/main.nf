/*
 * Collects every task's metrics JSON (one JSON object per line, annotated with assembly/shard) plus the
 * Nextflow trace file written so far, and writes <outdir>/benchmark/: benchmark.json/.tsv, report.html,
 * MultiQC custom-content files.
 */
process BENCHMARK {
    label 'process_single'

    input:
    path metrics
    path versions

    output:
    path "benchmark.json"   , emit: json
    path "benchmark.tsv"    , emit: tsv
    path "report.html"      , emit: html
    path "*_mqc.*"          , emit: multiqc

    script:
    def args  = task.ext.args ?: ''
    def trace = "${params.outdir}/pipeline_info/execution_trace_${params.run_stamp}.txt"
    def traceAbs = file(trace).toAbsolutePath()
    """
    chromaflow benchmark-report \\
        --metrics ${metrics} \\
        --versions ${versions} \\
        --trace ${traceAbs} \\
        --outdir . \\
        ${args}
    """

    stub:
    """
    echo '{}' > benchmark.json; touch benchmark.tsv report.html chromaflow_benchmark_mqc.tsv
    """
}
