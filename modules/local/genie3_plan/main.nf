/*
 * Reads one expression matrix with the same reader GENIE3 uses (TSV/CSV, optionally gzip) and writes the
 * chunk plan: number of genes and of target chunks of ext.args' --chunk-size. The workflow fans GENIE3 out
 * from it; a bad matrix or regulators file stops the run here with one line, before any GENIE3 task.
 */
process GENIE3_PLAN {
    tag "${meta.id}"
    label 'process_single'

    input:
    tuple val(meta), path(expression), path(regulators)

    output:
    tuple(val(meta), path("${prefix}.genie3_plan.json")  , emit: plan)
    path("versions.yml"                                  , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    def regs = regulators ? "--regulators ${regulators}" : ''
    """
    chromaflow genie3-plan \\
        --expression ${expression} \\
        --layout ${meta.expression_layout} \\
        ${regs} \\
        --out ${prefix}.genie3_plan.json \\
        ${args}

    chromaflow versions "${task.process}" >| versions.yml
    """

    stub:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    def m    = args =~ /--chunk-size[ =](\d+)/
    def size = m.find() ? m.group(1) : '500'
    // genes counted roughly from the text (data lines, or header fields for samples-x-genes), so a -stub run
    // fans out into as many GENIE3 chunks as a real one would for a well-formed matrix
    """
    genes=\$(gzip -cdf ${expression} | awk -v layout=${meta.expression_layout} '
        NR == 1 { n = split(\$0, f, /[\\t,]/); if (layout == "samples-x-genes") { genes = n - (f[1] == "" ? 1 : 0); exit } next }
        NF { genes++ }
        END { print genes + 0 }')
    chunks=\$(( (genes + ${size} - 1) / ${size} )); [ "\$chunks" -ge 1 ] || chunks=1
    echo "{\\"stub\\": true, \\"genes\\": \$genes, \\"chunk_size\\": ${size}, \\"chunks\\": \$chunks}" >| ${prefix}.genie3_plan.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
