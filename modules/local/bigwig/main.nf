/*
 * Predictions h5 → bigWig/bedGraph tracks (Predmoter semantics) plus chrom.sizes, an IGV session and a UCSC hub.
 * With the assembly's FASTA (plain or gzip, as the samplesheet gives it; [] for none) the genome files
 * <prefix>.fa/.fa.fai/.2bit are written beside the tracks, the session's genome is that FASTA and the hub is one
 * single-file assembly hub (hub.txt, no genomes.txt/trackDb.txt): the folder opens unedited in IGV and igv.js.
 * The optional blacklist (seqids to leave out) is a staged input ([] for none), so it reaches containers and
 * remote executors like any other file; format, strand and window come through ext.args.
 */
process BIGWIG {
    tag "${meta.id}"
    label 'process_low'

    input:
    // a predictions h5, or a view and its shards (PREDICT_VIEW); the assembly's FASTA, or [] for none
    tuple val(meta), path(predictions, arity: '1..*'), path(fasta)
    path blacklist

    output:
    tuple(val(meta), path("tracks/*")                       , emit: tracks)
    tuple(val(meta), path("${prefix}.bigwig.metrics.json")  , emit: metrics)
    path("versions.yml"                                     , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    def bl   = blacklist ? "--blacklist ${blacklist}" : ''
    def fa   = fasta ? "--fasta ${fasta}" : ''
    """
    export CHROMAFLOW_TASK_NAME="${task.process} (${task.tag})"   # the trace's task name, recorded in the metrics JSON
    mkdir -p tracks
    chromaflow bigwig \\
        --predictions ${predictions[0]} \\
        --outdir tracks \\
        --basename ${prefix} \\
        --threads ${task.cpus} \\
        --metrics ${prefix}.bigwig.metrics.json \\
        ${bl} \\
        ${fa} \\
        --force \\
        ${args}

    chromaflow versions "${task.process}" pyBigWig >| versions.yml
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}"
    // the names of a real run: the genome files and the single-file hub with a FASTA, else the three-file hub
    def browser = fasta ? "${prefix}.fa ${prefix}.fa.fai ${prefix}.2bit hub.txt" : 'hub.txt genomes.txt trackDb.txt'
    """
    mkdir -p tracks
    touch tracks/${prefix}_stub_avg_strand.bw tracks/chrom.sizes tracks/igv_session.xml
    for f in ${browser}; do touch tracks/\$f; done
    echo '{"stage": "bigwig", "stub": true}' >| ${prefix}.bigwig.metrics.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
