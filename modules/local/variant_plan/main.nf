/*
 * The variant-effect shards of one assembly's VCF (chromaflow variant-plan): its (variant, ALT) rows counted by the
 * reader VARIANT_EFFECT uses, split into shards of at most ext.args' --shard-size rows (--variant_shard_size). The
 * workflow fans VARIANT_EFFECT out from the plan's shard list, as PREDICT from PREDICT_PLAN's; a bad VCF stops the
 * run here with the reader's one line (file, record).
 *
 * The stub runs the same command: it reads only the VCF (no model), so a -stub run fans out into exactly the shards
 * of a real one.
 */
process VARIANT_PLAN {
    tag "${meta.id}"
    label 'process_single'

    input:
    tuple val(meta), path(vcf)

    output:
    tuple(val(meta), path("${prefix}.variant_plan.json")  , emit: plan)
    path("versions.yml"                                   , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    """
    chromaflow variant-plan --vcf ${vcf} --out ${prefix}.variant_plan.json ${args}

    chromaflow versions "${task.process}" pysam >| versions.yml
    """

    stub:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    """
    chromaflow variant-plan --vcf ${vcf} --out ${prefix}.variant_plan.json ${args}
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
