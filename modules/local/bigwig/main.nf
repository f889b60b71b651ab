/*
 * Predictions h5 → bigWig/bedGraph tracks (Predmoter semantics) plus chrom.sizes, an IGV session and a UCSC hub.
 * The optional blacklist (seqids to leave out) is a staged input ([] for none), so it reaches containers and
 * remote executors like any other file; format, strand and window come through ext.args.
 */
process BIGWIG {
    tag "${meta.id}"
    label 'process_low'

    input:
    tuple val(meta), path(predictions, arity: '1..*')   // a predictions h5, or a view and its shards (PREDICT_VIEW)
    path blacklist

    output:
    tuple val(meta), path("tracks/*")                       , emit: tracks
    tuple val(meta), path("${prefix}.bigwig.metrics.json")  , emit: metrics
    path "versions.yml"                                     , emit: versions

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    def bl   = blacklist ? "--blacklist ${blacklist}" : ''
    """
    export CHROMAFLOW_TASK_NAME="${task.process} (${task.tag})"   # the trace's task name, recorded in the metrics JSON
    mkdir -p tracks
    chromaflow bigwig \\
        --predictions ${predictions[0]} \\
        --outdir tracks \\
        --basename ${prefix} \\
        --threads ${task.cpus} \\
        --metrics ${prefix}.bigwig.metrics.json \\
        ${bl} \\
        --force \\
        ${args}

    chromaflow versions "${task.process}" pyBigWig >| versions.yml
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}"
    """
    mkdir -p tracks
    touch tracks/${prefix}_stub_avg_strand.bw tracks/chrom.sizes tracks/igv_session.xml tracks/hub.txt
    echo '{"stage": "bigwig", "stub": true}' >| ${prefix}.bigwig.metrics.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
