/*
 * REPORTING: the end of every mode's workflow (workflows/chromaflow.nf, workflows/train.nf).
 *
 *   every task's metrics JSON, annotated from its meta ── metrics.jsonl ─┐
 *   versions.yml of the mode's tasks ── software_versions.yml ───────────┴─ BENCHMARK (+ this run's trace) ─┐
 *   parameters ≠ schema defaults ── workflow_summary_mqc.yaml ───────────────────────────────────────────────┤
 *   assets/methods_description_template.yml ── chromaflow_methods_description_mqc.yaml ─────────────────────┼─ MULTIQC
 *   review pages ── chromaflow_review_mqc.html (a link per assembly) ─────────────────────────────────────────┤
 *   motifs reports (--interpret) ── chromaflow_motifs_mqc.html (a link per assembly) ─────────────────────────┘
 *   every versions.yml, the two report stages' included ── <outdir>/pipeline_info/software_versions.yml
 *
 * take: ch_versions  versions.yml of the mode's tasks
 *       ch_metrics   [meta, metrics JSON or a list of them]: meta.id is the assembly; meta's shard/shards and
 *                    chunk/chunks (where present) say which part of it the task did
 *       ch_review    [meta, review page] (REVIEW_PAGE; an empty channel: none), linked from the MultiQC report
 *       ch_motifs    [meta, motifs report.html] (INTERPRET; an empty channel: none), linked from the MultiQC report
 * emit: versions     the published software_versions.yml
 * MultiQC runs unless --skip_multiqc, with or without the benchmark (--skip_benchmark): the workflow summary and the
 * methods description are always content of its own.
 */
include { BENCHMARK } from '../../../modules/local/benchmark'
include { MULTIQC   } from '../../../modules/local/multiqc'
include { isUrl; schemaParams } from '../utils_chromaflow/schema'

/*
 * This run's trace file, for the benchmark stage, or null (with a warning saying why) where there is none to
 * read: tracing disabled, no file name known, or a file that does not exist on this machine while the run goes
 * (e.g. an s3:// outdir, which Nextflow uploads only at the end). nf-test and `-with-trace FILE` replace
 * trace.file; the session's configuration holds the name actually used.
 */
def runTraceFile() {
    def cfg = workflow.session.config.trace ?: [:]
    def why = null
    def trace = null
    if (!cfg.enabled) {
        why = 'tracing is disabled (trace.enabled = false)'
    } else if (!cfg.file) {
        why = 'the trace file name is not known (set trace.file)'
    } else if (isUrl(cfg.file)) {
        why = "the trace ${cfg.file} is remote and written only at the end of the run"
    } else {
        trace = file(cfg.file.toString())
        if (!trace.exists()) {
            why = "the trace ${trace} does not exist"
            trace = null
        }
    }
    if (why) {
        log.warn("chromaflow: ${why}: the benchmark report will have empty trace columns (realtime, %cpu, peak_rss, attempts)")
    }
    return trace
}

// The meta keys that say which part of an assembly a task did, copied into its metrics for the report.
List<String> partKeys() { ['shard', 'shards', 'chunk', 'chunks'] }

/*
 * One metrics JSON as one line of metrics.jsonl: annotated with the assembly (meta.id) and the part (partKeys() of
 * meta); per-epoch detail (TRAIN) stays in the stage's own file, the report wants one line per task.
 */
def annotateMetrics(meta, json) {
    def m = new groovy.json.JsonSlurper().parse(json.toFile())
    m.assembly = meta.id
    partKeys().findAll { k -> meta[k] != null }.each { k -> m[k] = meta[k] }
    m.remove('epochs')
    return groovy.json.JsonOutput.toJson(m)
}

// Every versions.yml once (equal texts deduplicated), sorted by text, as one file; `options` go to collectFile.
def collectVersions(ch_versions, Map options = [:]) {
    return ch_versions
        .unique { it.text }
        .collectFile([name: 'software_versions.yml', sort: { it.text }, newLine: false] + options)
}

// HTML-escaped text of a value (&, <, >, ")
String escapeHtml(value) {
    return value.toString().replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;').replace('"', '&quot;')
}

// Whether a parameter's value is its schema default (numbers compared as numbers: 2 and 2.0 are equal)
boolean isDefault(value, dflt) {
    if (value == null || value == '') {
        return dflt == null || dflt == ''
    }
    if (value instanceof Number && dflt instanceof Number) {
        return (value as BigDecimal) <=> (dflt as BigDecimal) == 0
    }
    return dflt != null && value.toString() == dflt.toString()
}

/*
 * The parameters of this run that differ from nextflow_schema.json's defaults, per schema group (its title), and the
 * core Nextflow settings: nf-core's paramsSummaryMap, from this pipeline's own schema reader.
 */
Map paramsSummaryMap() {
    def schema = new groovy.json.JsonSlurper().parse(file("${projectDir}/nextflow_schema.json").toFile())
    def specs = schemaParams("${projectDir}/nextflow_schema.json")
    def summary = [:]
    (schema['$defs'] ?: [:]).each { key, group ->
        def rows = (group.properties ?: [:]).keySet()
            .findAll { name -> !isDefault(params[name], specs[name].default) }
            .collectEntries { name -> [(name): params[name]] }
        if (rows) {
            summary[group.title ?: key] = rows
        }
    }
    summary['Core Nextflow options'] = [
        runName: workflow.runName, profile: workflow.profile, launchDir: workflow.launchDir,
        workDir: workflow.workDir, projectDir: workflow.projectDir, userName: workflow.userName,
        configFiles: workflow.configFiles.join(', '), containerEngine: workflow.containerEngine ?: 'none',
    ]
    return summary
}

// The summary as MultiQC custom content (nf-core's paramsSummaryMultiqc): an HTML section of its own
String paramsSummaryMultiqc(Map summary) {
    def groups = summary.collect { group, rows ->
        def items = rows.collect { k, v -> "        <dt>${escapeHtml(k)}</dt><dd><samp>${escapeHtml(v ?: '<none>')}</samp></dd>" }
        "    <p style=\"font-size:110%\"><b>${escapeHtml(group)}</b></p>\n    <dl class=\"dl-horizontal\">\n${items.join('\n')}\n    </dl>"
    }
    return """id: 'chromaflow-summary'
description: ' - the parameters of this run that differ from the defaults, collected when the pipeline started.'
section_name: 'chromaflow Workflow Summary'
section_href: 'https://github.com/chromaflow/chromaflow'
plot_type: 'html'
data: |
${groups.join('\n')}
"""
}

// The methods description (nf-core's methodsDescriptionText): assets/methods_description_template.yml filled in
String methodsDescriptionText(template) {
    def binding = [
        workflow: workflow, manifest_version: workflow.manifest.version, run_name: escapeHtml(workflow.runName),
        command_line: escapeHtml(workflow.commandLine),
    ]
    return new groovy.text.SimpleTemplateEngine().createTemplate(template.text).make(binding).toString()
}

/*
 * The review pages as MultiQC custom content: a link per assembly, relative to the report
 * (<outdir>/multiqc/multiqc_report.html → <outdir>/<id>/review/<id>.review.html, conf/modules.config REVIEW_PAGE)
 */
def reviewLinks(ch_review) {
    def header = """<!--
id: 'chromaflow_review'
section_name: 'Review pages'
description: 'Per assembly: a self-contained page (igv-reports) of the strongest variant effects, the strongest peaks and the promoters of the most and least accessible genes, with the predicted tracks around each (docs/review.md).'
-->"""
    return ch_review
        .map { meta, page -> "<p><a href=\"../${meta.id}/review/${page.name}\">${escapeHtml(meta.id)}</a>: ${page.name}</p>" }
        .collectFile(name: 'chromaflow_review_mqc.html', seed: header, newLine: true, sort: true)
}

/*
 * The motifs reports as MultiQC custom content: a link per assembly, relative to the report
 * (<outdir>/multiqc/multiqc_report.html → <outdir>/<id>/motifs/report.html, conf/modules.config DISCOVER_MOTIFS)
 */
def motifLinks(ch_motifs) {
    def header = """<!--
id: 'chromaflow_motifs'
section_name: 'Motifs learned by the model'
description: 'Per assembly (--interpret): the motifs TF-MoDISco found in the contribution scores of its strongest peaks, with their logos and JASPAR matches (docs/interpret.md).'
-->"""
    return ch_motifs
        .map { meta, page -> "<p><a href=\"../${meta.id}/motifs/${page.name}\">${escapeHtml(meta.id)}</a>: motifs/${page.name}</p>" }
        .collectFile(name: 'chromaflow_motifs_mqc.html', seed: header, newLine: true, sort: true)
}

workflow REPORTING {
    take:
    ch_versions
    ch_metrics
    ch_review
    ch_motifs

    main:
    ch_versions_file = collectVersions(ch_versions)
    ch_multiqc_files = Channel.empty()
    if (!params.skip_benchmark) {
        def trace = runTraceFile()
        ch_metrics_file = ch_metrics
            .flatMap { meta, js -> (js instanceof List ? js : [js]).collect { j -> annotateMetrics(meta, j) } }
            .collectFile(name: 'metrics.jsonl', newLine: true, sort: true)
        // the trace is a staged input, [] where there is none
        BENCHMARK(ch_metrics_file, ch_versions_file, trace ?: [])
        ch_versions = ch_versions.mix(BENCHMARK.out.versions)
        ch_multiqc_files = BENCHMARK.out.multiqc
    }
    if (!params.skip_multiqc) {
        def methods = file("${projectDir}/assets/methods_description_template.yml", checkIfExists: true)
        ch_multiqc_files = ch_multiqc_files
            .mix(Channel.value(paramsSummaryMultiqc(paramsSummaryMap())).collectFile(name: 'workflow_summary_mqc.yaml'))
            .mix(Channel.value(methodsDescriptionText(methods)).collectFile(name: 'chromaflow_methods_description_mqc.yaml'))
            .mix(reviewLinks(ch_review))
            .mix(motifLinks(ch_motifs))
        MULTIQC(
            ch_multiqc_files.collect().ifEmpty([]),
            ch_versions_file,
            file("${projectDir}/assets/multiqc_config.yml", checkIfExists: true)
        )
        ch_versions = ch_versions.mix(MULTIQC.out.versions)
    }
    // every process's versions (the report stages included) in pipeline_info/
    ch_versions_published = collectVersions(ch_versions, [storeDir: "${params.outdir}/pipeline_info"])

    emit:
    versions = ch_versions_published
}
