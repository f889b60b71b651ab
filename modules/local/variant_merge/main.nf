/*
 * Joins the VARIANT_EFFECT shards of one assembly (tables given in shard order) into <id>.effects.tsv.gz, the
 * bytes of an unsharded run, and picks the assembly's --tracks strongest variants from the shards' candidates
 * (staged flat under candidates/: each shard's bigWigs, named by the variant's row, and its candidates JSON) into
 * variant_tracks/, under the unsharded run's names.
 */
process VARIANT_MERGE {
    tag "${meta.id}"
    label 'process_single'

    input:
    tuple val(meta), path(parts, stageAs: 'shards/*'), path(candidates, stageAs: 'candidates/*')

    output:
    tuple(val(meta), path("${prefix}.effects.tsv.gz")               , emit: effects)
    tuple(val(meta), path("variant_tracks/*.bw")                    , emit: tracks, optional: true)
    tuple(val(meta), path("${prefix}.variant_merge.metrics.json")   , emit: metrics)
    path("versions.yml"                                             , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    """
    export CHROMAFLOW_TASK_NAME="${task.process} (${task.tag})"   # the trace's task name, recorded in the metrics JSON
    chromaflow variant-merge \\
        ${parts} \\
        --out ${prefix}.effects.tsv.gz \\
        --tracks-dir variant_tracks \\
        --metrics ${prefix}.variant_merge.metrics.json \\
        --force \\
        ${args} \\
        --candidates candidates/*.candidates.json

    chromaflow versions "${task.process}" >| versions.yml
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}"
    """
    echo "" | gzip -n >| ${prefix}.effects.tsv.gz
    echo '{"stage": "variant-merge", "stub": true}' >| ${prefix}.variant_merge.metrics.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
