/*
 * GENIE3 for one contiguous chunk of target genes of one expression matrix. Each target's random stream
 * derives from (seed, target), so the merged result equals a single-task run. With a motif prior (MOTIF_PRIOR's
 * table, staged only when --genie3_prior_alpha > 0) the split candidates are drawn by its weights.
 */
process GENIE3 {
    tag "${meta.id} ${meta.chunk}/${meta.chunks}"
    label 'process_medium'

    input:
    tuple val(meta), path(expression), path(regulators), path(prior)

    output:
    tuple(val(meta), path("${prefix}.genie3.part.npz")         , emit: part)
    tuple(val(meta), path("${prefix}.genie3.metrics.json")     , emit: metrics)
    path("versions.yml"                                        , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}.chunk${meta.chunk}of${meta.chunks}"
    def regs = regulators ? "--regulators ${regulators}" : ''
    // the motif prior ([] for none); --prior-alpha (and --repeats) come through ext.args when --genie3_prior_alpha > 0
    def pri  = prior ? "--prior ${prior}" : ''
    """
    export CHROMAFLOW_TASK_NAME="${task.process} (${task.tag})"   # the trace's task name, recorded in the metrics JSON
    chromaflow genie3 \\
        --expression ${expression} \\
        --layout ${meta.expression_layout} \\
        ${regs} \\
        ${pri} \\
        --targets-chunk ${meta.chunk}/${meta.chunks} \\
        --threads ${task.cpus} \\
        --out ${prefix}.genie3.part.npz \\
        --metrics ${prefix}.genie3.metrics.json \\
        ${args}

    chromaflow versions "${task.process}" scikit-learn >| versions.yml
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}.chunk${meta.chunk}of${meta.chunks}"
    """
    touch ${prefix}.genie3.part.npz
    echo '{"stage": "genie3", "stub": true}' >| ${prefix}.genie3.metrics.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
