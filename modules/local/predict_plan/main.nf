/*
 * The rows (subsequences) one assembly's FASTA gives at the pipeline's chunk length, read with the reader
 * PREDICT --fasta uses, nothing written but a small JSON: with --predict_from fasta the workflow plans the
 * prediction shards from it (as it does from FASTA2H5's metrics on the h5 route), so no genome h5 is needed.
 * A bad FASTA stops the run here with the reader's one line (file, record, line).
 */
process FASTA_LAYOUT {
    tag "${meta.id}"
    label 'process_single'

    input:
    tuple val(meta), path(fasta)

    output:
    tuple val(meta), path("${prefix}.layout.json")  , emit: layout
    path "versions.yml"                             , emit: versions

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    """
    chromaflow fasta-layout \\
        --fasta ${fasta} \\
        --out ${prefix}.layout.json \\
        ${args}

    cat <<-END_VERSIONS >| versions.yml
    "${task.process}":
        chromaflow: \$(chromaflow --version | sed 's/chromaflow //')
    END_VERSIONS
    """

    stub:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    def m    = args =~ /--subsequence-length[ =](\d+)/
    def L    = m.find() ? m.group(1) : '21384'
    // rows counted from the text (both strands, ceil(record length / L) each), so a -stub run fans out into as
    // many PREDICT shards as a real one would for a well-formed FASTA
    """
    rows=\$(gzip -cdf ${fasta} | awk -v L=${L} '
        /^>/ { if (n) rows += 2 * int((n + L - 1) / L); n = 0; next }
        { gsub(/[ \\t\\r]/, ""); n += length(\$0) }
        END { if (n) rows += 2 * int((n + L - 1) / L); print rows + 0 }')
    echo "{\\"stub\\": true, \\"subsequence_length\\": ${L}, \\"subsequences\\": \$rows}" >| ${prefix}.layout.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
