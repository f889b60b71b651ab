/*
 * Contribution scores of the model PREDICT used for one assembly's peaks (docs/interpret.md): `chromaflow attribute`
 * on the sheet's FASTA and PEAKS' narrowPeak of one dataset (the summit is each region's centre); --top, --window,
 * --method, --steps and the dataset come through ext.args. Labelled process_gpu like PREDICT: profiles route it to
 * a GPU; with --device auto it runs on the CPU where no GPU is visible.
 */
process ATTRIBUTE {
    tag "${meta.id}"
    label 'process_medium'
    label 'process_gpu'

    input:
    tuple val(meta), path(peaks), path(fasta)
    path model

    output:
    tuple(val(meta), path("${prefix}.contributions.h5")         , emit: contributions)
    tuple(val(meta), path("${prefix}.contributions.bw")         , emit: bigwig)
    tuple(val(meta), path("${prefix}.attribute.metrics.json")   , emit: metrics)
    path("versions.yml"                                         , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    """
    export CHROMAFLOW_TASK_NAME="${task.process} (${task.tag})"   # the trace's task name, recorded in the metrics JSON
    chromaflow attribute \\
        --fasta ${fasta} \\
        --regions ${peaks} \\
        --model ${model} \\
        --out ${prefix}.contributions.h5 \\
        --bigwig ${prefix}.contributions.bw \\
        --threads ${task.cpus} \\
        --metrics ${prefix}.attribute.metrics.json \\
        --force \\
        ${args}

    chromaflow versions "${task.process}" torch captum h5py >| versions.yml
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}"
    """
    touch ${prefix}.contributions.h5 ${prefix}.contributions.bw
    echo '{"stage": "attribute", "stub": true}' >| ${prefix}.attribute.metrics.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
