/*
 * Per-gene promoter accessibility: each gene's strand-aware TSS window (ext.args: --upstream/--downstream from
 * --promoter_upstream/--promoter_downstream) and the mean, max and percentile of the predicted coverage there,
 * plus the windows as a BED6 (the IGV session's) and a bigBed 6 (the UCSC hub's) for genome browsers.
 */
process GENE_ACCESSIBILITY {
    tag "${meta.id}"
    label 'process_single'

    input:
    tuple val(meta), path(annotation), path(predictions, arity: '1..*')

    output:
    tuple(val(meta), path("${prefix}.gene_accessibility.tsv")          , emit: table)
    tuple(val(meta), path("${prefix}.promoters.bed")                    , emit: bed)
    tuple(val(meta), path("${prefix}.promoters.bb")                     , emit: bigbed)
    tuple(val(meta), path("${prefix}.gene_accessibility.metrics.json")  , emit: metrics)
    path("versions.yml"                                                 , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    """
    export CHROMAFLOW_TASK_NAME="${task.process} (${task.tag})"   # the trace's task name, recorded in the metrics JSON
    chromaflow gene-accessibility \\
        --annotation ${annotation} \\
        --predictions ${predictions[0]} \\
        --out ${prefix}.gene_accessibility.tsv \\
        --bed ${prefix}.promoters.bed \\
        --bigbed ${prefix}.promoters.bb \\
        --metrics ${prefix}.gene_accessibility.metrics.json \\
        --force \\
        ${args}

    chromaflow versions "${task.process}" >| versions.yml
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}"
    """
    printf 'gene_id\\tseqid\\tstrand\\ttss\\twindow_start\\twindow_end\\n' >| ${prefix}.gene_accessibility.tsv
    touch ${prefix}.promoters.bed ${prefix}.promoters.bb
    echo '{"stage": "gene_accessibility", "stub": true}' >| ${prefix}.gene_accessibility.metrics.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
