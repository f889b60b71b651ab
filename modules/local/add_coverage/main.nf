/*
 * Read coverage (BAM or bigWig) of every dataset of one assembly -> evaluation/<dataset>_coverage in a copy of its
 * genome h5 (chromaflow add-coverage, Helixer add_ngs_coverage-compatible). The input h5 is never modified: the
 * first dataset writes <prefix>.h5 with --out, the next ones update that file (each update is atomic).
 *
 * specs: one map per dataset: [dataset: 'atacseq', kind: 'bam'|'bigwig', library: 'unstranded'|'first'|'second',
 *        shift: true|false, files: [its reads files], indexes: [their BAM indexes; none for bigWigs]].
 * reads, indexes: every spec's files and its indexes, in spec order (coverageInput below builds the tuple), staged in
 *        numbered folders so equal names never clash; the script finds each spec's files by the file they stage.
 */
// ADD_COVERAGE's input for one assembly: meta, its genome h5 and dataset specs, and the specs' files and indexes to stage
def coverageInput(meta, h5, specs) {
    return [meta, h5, specs, specs.collectMany { it.files }, specs.collectMany { it.indexes }]
}

// sheet file -> its staged name, for the files the specs name; `staged` holds them in the same order (coverageInput)
def stagedNames(meta, List sources, staged) {
    def names = staged instanceof List ? staged : (staged ? [staged] : [])
    def base = { f -> new File(f.toString()).name }   // a staged path's name is its folder/name
    if (names.collect(base) != sources.collect(base)) {
        error("ADD_COVERAGE ${meta.id}: staged ${names.collect(base)} are not the specs' files ${sources.collect(base)} (build the input with coverageInput)")
    }
    return [sources*.toString(), names].transpose().collectEntries()
}

process ADD_COVERAGE {
    tag "${meta.id}"
    label 'process_low'

    input:
    tuple val(meta), path(h5, stageAs: 'input/*'), val(specs), path(reads, stageAs: 'reads*/*'), path(indexes, stageAs: 'index*/*')

    output:
    tuple(val(meta), path("${prefix}.h5")                       , emit: h5)
    tuple(val(meta), path("*.add_coverage.metrics.json")        , emit: metrics)
    path("versions.yml"                                         , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args   = task.ext.args ?: ''
    prefix     = task.ext.prefix ?: "${meta.id}.coverage"
    def strand = [unstranded: '--unstranded', first: '--first-read-is-sense-strand', second: '--second-read-is-sense-strand']
    def readOf  = stagedNames(meta, specs.collectMany { it.files }, reads)
    def indexOf = stagedNames(meta, specs.collectMany { it.indexes }, indexes)
    // one command per dataset; joined with the script's own indentation so that the heredoc below stays intact
    def cmds = specs.withIndex().collect { s, k ->
        def files = s.files.collect { readOf[it.toString()] }.join(' ')
        def src = s.kind == 'bam' ? "--bam ${files} --bam-index ${s.indexes.collect { indexOf[it.toString()] }.join(' ')}" : "--bigwig ${files}"
        def target = k == 0 ? "--h5 ${h5} --out ${prefix}.h5 --force" : "--h5 ${prefix}.h5"
        "chromaflow add-coverage ${target} --prefix ${s.dataset} ${src} ${strand[s.library]}${s.shift ? ' --shift' : ''} --threads ${task.cpus} --metrics ${prefix}.${s.dataset}.add_coverage.metrics.json ${args}"
    }
    """
    export CHROMAFLOW_TASK_NAME="${task.process} (${task.tag})"   # the trace's task name, recorded in the metrics JSON
    ${cmds.join('\n    ')}

    chromaflow versions "${task.process}" pysam pyBigWig >| versions.yml
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}.coverage"
    """
    touch ${prefix}.h5
    echo '{"stage": "add_coverage", "stub": true}' >| ${prefix}.stub.add_coverage.metrics.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
