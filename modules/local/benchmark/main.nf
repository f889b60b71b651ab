/*
 * Collects every task's metrics JSON (one JSON object per line, annotated with assembly/shard), the software
 * versions and the Nextflow trace of this run, and writes benchmark.json/.tsv, report.html and MultiQC
 * custom-content files. The trace is staged as an input; the workflow hands over the file this run writes (whatever
 * -with-trace or trace.file named it), or [] where there is none -- the report then leaves the trace columns
 * empty and says why, and the workflow logs a warning. Extrapolation settings come through ext.args.
 */
process BENCHMARK {
    label 'process_single'

    input:
    path metrics
    path versions
    path trace

    output:
    path("benchmark.json"   , emit: json)
    path("benchmark.tsv"    , emit: tsv)
    path("report.html"      , emit: html)
    path("*_mqc.*"          , emit: multiqc)
    path("versions.yml"     , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    def tr   = trace ? "--trace ${trace}" : ''
    """
    chromaflow benchmark-report \\
        --metrics ${metrics} \\
        --versions ${versions} \\
        ${tr} \\
        --outdir . \\
        ${args}

    chromaflow versions "${task.process}" matplotlib >| versions.yml
    """

    stub:
    """
    echo '{}' >| benchmark.json
    touch benchmark.tsv report.html chromaflow_benchmark_mqc.tsv chromaflow_throughput_mqc.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
