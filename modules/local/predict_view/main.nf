/*
 * A view of one assembly's prediction shards (given in shard order) as <id>_predictions.h5: HDF5 virtual datasets
 * over the shards, no copy of the predictions. What the tasks that read predictions get for a sharded assembly,
 * staged with its shards beside it ([view, shard, ...]: modules that read predictions declare arity '1..*' and
 * open the first); PREDICT_MERGE writes the merged file that is published.
 */
process PREDICT_VIEW {
    tag "${meta.id}"
    label 'process_single'

    input:
    tuple val(meta), path(shards)

    output:
    tuple(val(meta), path("${prefix}_predictions.h5")            , emit: view)
    tuple(val(meta), path("${prefix}.predict_view.metrics.json") , emit: metrics)
    path("versions.yml"                                          , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    """
    export CHROMAFLOW_TASK_NAME="${task.process} (${task.tag})"   # the trace's task name, recorded in the metrics JSON
    chromaflow predict-merge \\
        --view \\
        --out ${prefix}_predictions.h5 \\
        --metrics ${prefix}.predict_view.metrics.json \\
        --force \\
        ${args} \\
        ${shards}

    chromaflow versions "${task.process}" h5py >| versions.yml
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}"
    """
    touch ${prefix}_predictions.h5
    echo '{"stage": "predict-view", "stub": true}' >| ${prefix}.predict_view.metrics.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
