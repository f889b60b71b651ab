/*
 * Predmoter's test mode for a checkpoint on genome h5 files with coverage: one TSV row per file (loss and Pearson per
 * dataset) and one plot per file and dataset (observed vs predicted along a region, and a density scatter).
 */
process EVALUATE {
    tag "${meta.id}"
    label 'process_low'

    input:
    tuple val(meta), path(model), path(h5, stageAs: 'eval/*')

    output:
    tuple(val(meta), path("${prefix}.evaluation.tsv")          , emit: tsv)
    tuple(val(meta), path("plots/*.png")                       , emit: plots)
    tuple(val(meta), path("${prefix}.evaluate.metrics.json")   , emit: metrics)
    path("versions.yml"                                        , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    """
    export CHROMAFLOW_TASK_NAME="${task.process} (${task.tag})"   # the trace's task name, recorded in the metrics JSON
    chromaflow evaluate \\
        --model ${model} \\
        --h5 ${h5} \\
        --out ${prefix}.evaluation.tsv \\
        --plots plots \\
        --threads ${task.cpus} \\
        --metrics ${prefix}.evaluate.metrics.json \\
        ${args}

    chromaflow versions "${task.process}" matplotlib >| versions.yml
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}"
    """
    mkdir -p plots
    touch ${prefix}.evaluation.tsv plots/stub.png
    echo '{"stage": "evaluate", "stub": true}' >| ${prefix}.evaluate.metrics.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
