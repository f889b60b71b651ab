/*
 * Joins the prediction shards of one assembly (given in shard order) into <id>_predictions.h5, identical to
 * an unsharded run.
 */
process PREDICT_MERGE {
    tag "${meta.id}"
    label 'process_single'

    input:
    tuple val(meta), path(shards, stageAs: 'shards/*')

    output:
    tuple(val(meta), path("${prefix}_predictions.h5")             , emit: predictions)
    tuple(val(meta), path("${prefix}.predict_merge.metrics.json") , emit: metrics)
    path("versions.yml"                                           , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    """
    export CHROMAFLOW_TASK_NAME="${task.process} (${task.tag})"   # the trace's task name, recorded in the metrics JSON
    chromaflow predict-merge \\
        --out ${prefix}_predictions.h5 \\
        --metrics ${prefix}.predict_merge.metrics.json \\
        --force \\
        ${args} \\
        ${shards}

    chromaflow versions "${task.process}" h5py >| versions.yml
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}"
    """
    touch ${prefix}_predictions.h5
    echo '{"stage": "predict-merge", "stub": true}' >| ${prefix}.predict_merge.metrics.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
