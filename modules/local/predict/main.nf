/*
 * Predmoter-compatible prediction of one shard (a contiguous range of subsequences) of one assembly.
 * Labelled process_gpu: profiles route it to a GPU (SLURM --gres, container GPU flags); with
 * --device auto it falls back to the CPU where no GPU is visible.
 *
 * meta.predict_input says what `genome` is: 'h5' (or absent) the assembly's genome h5; 'fasta' the FASTA itself,
 * whose rows are cut as FASTA2H5 would cut them, no h5 written; --species comes from meta, the chunk length from
 * ext.args (--subsequence-length). workflows/chromaflow.nf sets it from --predict_from on every shard; shards of
 * either input merge with PREDICT_MERGE unchanged. meta.shard/meta.shards come from PREDICT_PLAN's shard list.
 * `index`: the FASTA's index files from PREDICT_PLAN (<fasta>.fai, and .gzi for bgzip), staged beside it under
 * their own names, or [] (the h5 route, a FASTA without one): a FASTA shard with an index reads only its own rows
 * (the metrics' "index": "fai"), one without scans the whole FASTA ("scan").
 *
 * Output name: <id>_predictions.h5 for an unsharded assembly -- the same name PREDICT_MERGE gives a merged
 * one, so both are published alike -- and <id>.shard<i>of<n>_predictions.h5 for a shard (ext.prefix overrides).
 */
process PREDICT {
    tag "${meta.id} ${meta.shard ?: 1}/${meta.shards ?: 1}"
    label 'process_medium'
    label 'process_gpu'

    input:
    tuple val(meta), path(genome), path(index)  // genome h5, or the FASTA when meta.predict_input == 'fasta'; index: [] or its .fai/.gzi
    path model

    output:
    tuple(val(meta), path("${prefix}_predictions.h5")        , emit: predictions)
    tuple(val(meta), path("${prefix}.predict.metrics.json")  , emit: metrics)
    path("versions.yml"                                      , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args   = task.ext.args ?: ''
    def shards = meta.shards ?: 1
    prefix     = task.ext.prefix ?: (shards > 1 ? "${meta.id}.shard${meta.shard}of${shards}" : "${meta.id}")
    def shard  = shards > 1 ? "--shard ${meta.shard}/${shards}" : ''
    def src    = meta.predict_input == 'fasta' ? "--fasta ${genome} --species '${meta.species}'" : "--h5 ${genome}"
    """
    export CHROMAFLOW_TASK_NAME="${task.process} (${task.tag})"   # the trace's task name, recorded in the metrics JSON
    chromaflow predict \\
        ${src} \\
        --model ${model} \\
        --out ${prefix}_predictions.h5 \\
        --threads ${task.cpus} \\
        --metrics ${prefix}.predict.metrics.json \\
        ${shard} \\
        --force \\
        ${args}

    chromaflow versions "${task.process}" torch >| versions.yml
    """

    stub:
    def shards = meta.shards ?: 1
    prefix     = task.ext.prefix ?: (shards > 1 ? "${meta.id}.shard${meta.shard}of${shards}" : "${meta.id}")
    """
    touch ${prefix}_predictions.h5
    echo '{"stage": "predict", "stub": true}' >| ${prefix}.predict.metrics.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
