/*
 * The motifs the model learned in one assembly's peaks (docs/interpret.md): `chromaflow discover-motifs` on
 * ATTRIBUTE's contributions: TF-MoDISco-lite, then TOMTOM against JASPAR (--jaspar and the TF-MoDISco settings come
 * through ext.args). motifs/ holds motifs.meme, matches.tsv, report.html and modisco.h5.
 */
process DISCOVER_MOTIFS {
    tag "${meta.id}"
    label 'process_medium'

    input:
    tuple val(meta), path(contributions)

    output:
    tuple(val(meta), path("motifs/report.html")                         , emit: report)
    tuple(val(meta), path("motifs/motifs.meme"), path("motifs/matches.tsv"), emit: motifs)
    tuple(val(meta), path("motifs/*")                                   , emit: files)
    tuple(val(meta), path("${prefix}.discover_motifs.metrics.json")     , emit: metrics)
    path("versions.yml"                                                 , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    """
    export CHROMAFLOW_TASK_NAME="${task.process} (${task.tag})"   # the trace's task name, recorded in the metrics JSON
    chromaflow discover-motifs \\
        --contributions ${contributions} \\
        --outdir motifs \\
        --threads ${task.cpus} \\
        --metrics ${prefix}.discover_motifs.metrics.json \\
        --force \\
        ${args}

    chromaflow versions "${task.process}" modisco-lite memelite numba >| versions.yml
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}"
    """
    mkdir -p motifs
    touch motifs/report.html motifs/motifs.meme motifs/matches.tsv motifs/modisco.h5
    echo '{"stage": "discover-motifs", "stub": true}' >| ${prefix}.discover_motifs.metrics.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
