/*
 * Motif prior for GENIE3: every promoter window scanned for the motifs of each TF (MOODS, both strands), hits
 * weighted by the predicted accessibility where a predictions h5 is staged ([] for none). `motifs` is a staged
 * JASPAR/MEME file, or [] with meta.motifs_db naming pyjaspar's bundled database (jaspar:CORE/plants).
 * Which TF has which motif: `tf_motifs` (TF<TAB>motif id), or, for the motifs the model learned (INTERPRET's
 * motifs.meme as `motifs`), `tf_families` (TF<TAB>JASPAR family) with discover-motifs' `matches` table: a TF gets
 * every learned motif matched to its family. `matches` given: the families; [] : tf_motifs.
 */
process MOTIF_PRIOR {
    tag "${meta.id}"
    label 'process_single'

    input:
    tuple val(meta), path(fasta), path(annotation), path(motifs), path(tf_motifs), path(tf_families), path(matches), path(regulators), path(predictions, arity: '0..*')

    output:
    tuple(val(meta), path("${prefix}.prior.tsv.gz")               , emit: prior)
    tuple(val(meta), path("${prefix}.motif_prior.metrics.json")   , emit: metrics)
    path("versions.yml"                                           , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args  = task.ext.args ?: ''
    prefix    = task.ext.prefix ?: "${meta.id}"
    def mot   = motifs ?: meta.motifs_db
    def tfmap = matches ? "--tf-families ${tf_families} --matches ${matches}" : "--tf-motifs ${tf_motifs}"
    def regs  = regulators ? "--regulators ${regulators}" : ''
    def pred  = predictions ? "--predictions ${predictions[0]}" : ''
    """
    export CHROMAFLOW_TASK_NAME="${task.process} (${task.tag})"   # the trace's task name, recorded in the metrics JSON
    chromaflow motif-prior \\
        --fasta ${fasta} \\
        --annotation ${annotation} \\
        --motifs ${mot} \\
        ${tfmap} \\
        ${regs} \\
        ${pred} \\
        --out ${prefix}.prior.tsv.gz \\
        --metrics ${prefix}.motif_prior.metrics.json \\
        --force \\
        ${args}

    chromaflow versions "${task.process}" MOODS-python pyjaspar >| versions.yml
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}"
    // which motifs and TF map the task was given (the subworkflow specs check the wiring with it)
    def given = matches ? "tf_families ${tf_families.name}, matches ${matches.name}" : "tf_motifs ${tf_motifs.name}"
    """
    printf 'regulator\\ttarget\\tprior\\thits\\taccessibility\\n' | gzip -n >| ${prefix}.prior.tsv.gz
    echo '{"stage": "motif_prior", "stub": true, "motifs": "${motifs ? motifs.name : meta.motifs_db}", "map": "${given}"}' >| ${prefix}.motif_prior.metrics.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
