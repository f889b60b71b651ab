/*
 * Merges the GENIE3 target chunks of one assembly: ranked links (gzip TSV), summary, weight plot.
 */
process GENIE3_MERGE {
    tag "${meta.id}"
    label 'process_low'

    input:
    tuple val(meta), path(parts, stageAs: 'parts/*')

    output:
    tuple(val(meta), path("${prefix}.genie3_links.tsv.gz")         , emit: links)
    tuple(val(meta), path("${prefix}.genie3_summary.json")         , emit: summary)
    tuple(val(meta), path("${prefix}.genie3_weights.png")          , emit: plot)
    tuple(val(meta), path("${prefix}.genie3_merge.metrics.json")   , emit: metrics)
    path("versions.yml"                                            , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    """
    export CHROMAFLOW_TASK_NAME="${task.process} (${task.tag})"   # the trace's task name, recorded in the metrics JSON
    chromaflow genie3-merge \\
        --out ${prefix}.genie3_links.tsv.gz \\
        --summary ${prefix}.genie3_summary.json \\
        --plot ${prefix}.genie3_weights.png \\
        --metrics ${prefix}.genie3_merge.metrics.json \\
        --threads ${task.cpus} \\
        ${args} \\
        ${parts}

    chromaflow versions "${task.process}" >| versions.yml
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}"
    """
    echo | gzip >| ${prefix}.genie3_links.tsv.gz
    echo '{}' >| ${prefix}.genie3_summary.json
    touch ${prefix}.genie3_weights.png
    echo '{"stage": "genie3-merge", "stub": true}' >| ${prefix}.genie3_merge.metrics.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
