/*
 * Read coverage (BAM or bigWig) of every dataset of one assembly -> evaluation/<dataset>_coverage in a copy of its
 * genome h5 (chromaflow add-coverage, Helixer add_ngs_coverage-compatible). The input h5 is never modified: the
 * first dataset writes <prefix>.h5 with --out, the next ones update that file (each update is atomic).
 *
 * specs: one map per dataset: [dataset: 'atacseq', kind: 'bam'|'bigwig', library: 'unstranded'|'first'|'second',
 *        shift: true|false, n: number of files]; `reads` holds the files of all datasets in spec order, `indexes`
 *        the BAM indexes in the same order (none for bigWigs). Staged in numbered folders so equal names never clash.
 */
process ADD_COVERAGE {
    tag "${meta.id}"
    label 'process_low'

    input:
    tuple val(meta), path(h5, stageAs: 'input/*'), val(specs), path(reads, stageAs: 'reads*/*'), path(indexes, stageAs: 'index*/*')

    output:
    tuple val(meta), path("${prefix}.h5")                       , emit: h5
    tuple val(meta), path("*.add_coverage.metrics.json")        , emit: metrics
    path "versions.yml"                                         , emit: versions

    when:
    task.ext.when == null || task.ext.when

    script:
    def args   = task.ext.args ?: ''
    prefix     = task.ext.prefix ?: "${meta.id}.coverage"
    def readList  = reads instanceof List ? reads : [reads]
    def indexList = indexes instanceof List ? indexes : (indexes ? [indexes] : [])
    def strand = [unstranded: '--unstranded', first: '--first-read-is-sense-strand', second: '--second-read-is-sense-strand']
    // one command per dataset; joined with the script's own indentation so that the heredoc below stays intact
    def cmds = []
    int r = 0
    int x = 0
    specs.eachWithIndex { s, k ->
        def files = readList[r..<(r + s.n)]
        r += s.n
        def src = s.kind == 'bam' ? "--bam ${files.join(' ')}" : "--bigwig ${files.join(' ')}"
        if (s.kind == 'bam') {
            src += " --bam-index ${indexList[x..<(x + s.n)].join(' ')}"
            x += s.n
        }
        def target = k == 0 ? "--h5 ${h5} --out ${prefix}.h5 --force" : "--h5 ${prefix}.h5"
        cmds << "chromaflow add-coverage ${target} --prefix ${s.dataset} ${src} ${strand[s.library]}${s.shift ? ' --shift' : ''} --threads ${task.cpus} --metrics ${prefix}.${s.dataset}.add_coverage.metrics.json ${args}"
    }
    """
    export CHROMAFLOW_TASK_NAME="${task.process} (${task.tag})"   # the trace's task name, recorded in the metrics JSON
    ${cmds.join('\n    ')}

    cat <<-END_VERSIONS >| versions.yml
    "${task.process}":
        chromaflow: \$(chromaflow --version | sed 's/chromaflow //')
        pysam: \$(python3 -c 'import pysam; print(pysam.__version__)')
        pyBigWig: \$(python3 -c 'import pyBigWig; print(pyBigWig.__version__)' 2>/dev/null || echo unknown)
    END_VERSIONS
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}.coverage"
    """
    touch ${prefix}.h5
    echo '{"stage": "add_coverage", "stub": true}' >| ${prefix}.stub.add_coverage.metrics.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
