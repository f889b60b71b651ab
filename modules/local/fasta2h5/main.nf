/*
 * FASTA (plain or gzip) → Helixer-layout genome h5 (one-hot data/X, both strands, chunked by --subsequence-length).
 * Settings come through ext.args (conf/modules.config); --force makes a rerun in the same work directory
 * (Nextflow's -resume after a killed run) overwrite what an orphaned earlier attempt left there.
 */
process FASTA2H5 {
    tag "${meta.id}"
    label 'process_medium'

    input:
    tuple val(meta), path(fasta)

    output:
    tuple(val(meta), path("${prefix}.h5")                     , emit: h5)
    tuple(val(meta), path("${prefix}.fasta2h5.metrics.json")  , emit: metrics)
    path("versions.yml"                                       , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    """
    export CHROMAFLOW_TASK_NAME="${task.process} (${task.tag})"   # the trace's task name, recorded in the metrics JSON
    chromaflow fasta2h5 \\
        --fasta ${fasta} \\
        --species '${meta.species}' \\
        --out ${prefix}.h5 \\
        --threads ${task.cpus} \\
        --metrics ${prefix}.fasta2h5.metrics.json \\
        --force \\
        ${args}

    chromaflow versions "${task.process}" h5py hdf5 >| versions.yml
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}"
    """
    touch ${prefix}.h5
    echo '{"stage": "fasta2h5", "stub": true}' >| ${prefix}.fasta2h5.metrics.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
