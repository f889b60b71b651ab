/*
 * Variant effects of one assembly's VCF (samplesheet column `vcf`) with the model PREDICT uses: one row per
 * (variant, ALT) in <id>.effects.tsv.gz (docs/variants.md), and ref/alt bigWigs of the strongest variants'
 * windows in variant_tracks/ for the browser (ext.args --tracks N; none with --tracks 0).
 * Labelled process_gpu like PREDICT: profiles route it to a GPU; with --device auto it runs on the CPU where no GPU
 * is visible.
 *
 * Sharded like PREDICT: meta.shard/meta.shards (from VARIANT_PLAN's shard list) make it score only its share of the
 * (variant, ALT) rows (--shard i/n); a shard's table <id>.shard<i>of<n>.effects.tsv.gz and its track candidates
 * (variant_tracks/: bigWigs and shard<i>of<n>.candidates.json) go to VARIANT_MERGE (emit part), which writes the
 * unsharded run's files. An unsharded assembly (one shard) is scored as before, under its final names.
 */
process VARIANT_EFFECT {
    tag "${(meta.shards ?: 1) > 1 ? "${meta.id} ${meta.shard}/${meta.shards}" : meta.id}"
    label 'process_medium'
    label 'process_gpu'

    input:
    tuple val(meta), path(vcf), path(fasta)
    path model

    output:
    tuple(val(meta), path("${prefix}.effects.tsv.gz")               , emit: effects)
    tuple(val(meta), path("variant_tracks/*.bw")                    , emit: tracks, optional: true)
    tuple(val(meta), path("${prefix}.variant_effect.metrics.json")  , emit: metrics)
    // a shard's table with its candidates (the candidates JSON is always written with --shard)
    tuple(val(meta), path("${prefix}.effects.tsv.gz"), path("variant_tracks/*"), emit: part, optional: true)
    path("versions.yml"                                             , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args   = task.ext.args ?: ''
    def shards = meta.shards ?: 1
    def shard  = shards > 1 ? "--shard ${meta.shard}/${shards}" : ''
    prefix     = task.ext.prefix ?: (shards > 1 ? "${meta.id}.shard${meta.shard}of${shards}" : "${meta.id}")
    """
    export CHROMAFLOW_TASK_NAME="${task.process} (${task.tag})"   # the trace's task name, recorded in the metrics JSON
    chromaflow variant-effect \\
        --vcf ${vcf} \\
        --fasta ${fasta} \\
        --model ${model} \\
        --out ${prefix}.effects.tsv.gz \\
        --tracks-dir variant_tracks \\
        --threads ${task.cpus} \\
        --metrics ${prefix}.variant_effect.metrics.json \\
        --force \\
        ${shard} \\
        ${args}

    chromaflow versions "${task.process}" torch pysam >| versions.yml
    """

    stub:
    def shards = meta.shards ?: 1
    prefix     = task.ext.prefix ?: (shards > 1 ? "${meta.id}.shard${meta.shard}of${shards}" : "${meta.id}")
    def cands  = shards > 1 ? "mkdir -p variant_tracks && echo '{\"stub\": true}' >| variant_tracks/shard${meta.shard}of${shards}.candidates.json" : ''
    """
    ${cands}
    echo "" | gzip -n >| ${prefix}.effects.tsv.gz
    echo '{"stage": "variant-effect", "stub": true}' >| ${prefix}.variant_effect.metrics.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
