/*
 * Collects every task's metrics JSON (one JSON object per line, annotated with assembly/shard) plus the
 * Nextflow trace file written so far, and writes <outdir>/benchmark/: benchmark.json/.tsv, report.html,
 * MultiQC custom-content files. The trace may be absent or partly written (the run is still going): the
 * report then leaves the trace columns empty and says so.
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
        --extrapolate-genome-gbp ${params.benchmark_genome_gbp} \\
        --extrapolate-genomes ${params.benchmark_genomes} \\
        --extrapolate-workers ${params.benchmark_workers} \\
        ${args}
    """

    stub:
    """
    echo '{}' > benchmark.json; touch benchmark.tsv report.html chromaflow_benchmark_mqc.tsv chromaflow_throughput_mqc.json
    """
}
