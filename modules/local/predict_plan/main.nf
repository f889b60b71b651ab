/*
 * The prediction shards of one assembly (chromaflow predict-plan): its rows counted from the FASTA by the reader
 * FASTA2H5 and PREDICT --fasta use, split into ext.args' --shards (a count, or auto: one per --shard-rows rows).
 * The workflow fans PREDICT out from the plan's shard list on both routes (h5 and --predict_from fasta); a bad
 * FASTA stops the run here with the reader's one line (file, record, line).
 *
 * With --predict_from fasta the plan also makes the FASTA's index in the task directory (<fasta>.fai, and
 * <fasta>.gzi for bgzip; verified against the reader, docs/predict.md) and emits it as `index`, so that each PREDICT
 * shard reads only its own rows; a FASTA that cannot be indexed (plain gzip, lines htslib refuses) emits none and
 * its shards scan (the plan JSON says "index": "scan" and why). On the h5 route conf/modules.config passes
 * --index none (ext.args): the rows are counted by the scan and no index is made.
 *
 * The stub runs the same command: it reads only the FASTA (no model, no h5), so a -stub run fans out into exactly
 * the shards of a real one, with the same index.
 */
process PREDICT_PLAN {
    tag "${meta.id}"
    label 'process_single'

    input:
    tuple val(meta), path(fasta)

    output:
    tuple(val(meta), path("${prefix}.predict_plan.json")  , emit: plan)
    tuple(val(meta), path("*.{fai,gzi}")                  , emit: index, optional: true)
    path("versions.yml"                                   , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    """
    chromaflow predict-plan --fasta ${fasta} --out ${prefix}.predict_plan.json ${args}

    chromaflow versions "${task.process}" >| versions.yml
    """

    stub:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    """
    chromaflow predict-plan --fasta ${fasta} --out ${prefix}.predict_plan.json ${args}
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
