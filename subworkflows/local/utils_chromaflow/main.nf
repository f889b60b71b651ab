/*
 * Pipeline utilities (nf-core's utils_nfcore_<pipeline>_pipeline in shape): PIPELINE_INITIALISATION (--help,
 * parameter validation against nextflow_schema.json, the mode's sheet read into a channel of [meta, files]) and
 * PIPELINE_COMPLETION (the end-of-run line). Beside this file: schema.nf (the validator and --help),
 * samplesheet.nf (both sheets: one CSV reader, one set of id/species rules), outdir.nf (one run per --outdir: the
 * lock and the sample folders' stamps), parts.nf (fan-out and gathering of an assembly's parts, used by the stage
 * subworkflows).
 */

include { parseSamplesheet; parseTrainSheet } from './samplesheet'
include { validateParameters; paramsHelp; samplesheetParam; samplesheetOptions } from './schema'
include { claimOutdir } from './outdir'

// The end-of-run line (a function, so `workflow` is the run's metadata, as in nf-core's completionSummary()).
def completionMessage(outdir) {
    if (workflow.success) {
        def mqc = (params.skip_multiqc || params.skip_benchmark) ? '' : ", ${outdir}/multiqc"
        log.info("chromaflow: done in ${workflow.duration}. Results: ${outdir}  (reports: ${outdir}/pipeline_info${mqc})")
    } else {
        log.error("chromaflow: failed. See ${outdir}/pipeline_info and .nextflow.log")
    }
}

// "1 assembly", "3 assemblies"
def assemblies(List rows) {
    return "${rows.size()} assembl${rows.size() == 1 ? 'y' : 'ies'}"
}

/*
 * --help (then nothing else runs: main.nf checks params.help), parameter validation, and the mode's sheet parsed
 * before any task starts (samplesheet.nf: one CSV reader, one set of id/species rules), split once into named keys;
 * then --outdir taken for this run (outdir.nf: its lock, and every sheet id's <outdir>/<id>/ stamped with this run,
 * or the run stops with one line when another run holds either).
 * emit: samplesheet  predict mode: [meta, files] per assembly, files = [fasta:, expression:, regulators:,
 *                    annotation:, motifs:, tf_motifs:, tf_families:, vcf:] (an empty column is [], the nf-core
 *                    convention for an absent path input); train mode: [meta, [fasta:, datasets:]] per assembly, datasets = one spec
 *                    per dataset with its reads files and indexes (parseTrainSheet)
 */
workflow PIPELINE_INITIALISATION {
    main:
    def schema = "${projectDir}/nextflow_schema.json"
    def rows = []
    if (params.help) {
        log.info(paramsHelp(schema))
    } else {
        validateParameters(schema)
        if (params.mode == 'train') {
            rows = parseTrainSheet(params.train_sheet).collect { meta, fasta, specs -> [meta, [fasta: fasta, datasets: specs]] }
            log.info("chromaflow ${workflow.manifest.version} (--mode train): training '${params.train_name}' on ${assemblies(rows)} from ${params.train_sheet} → ${params.outdir}")
        } else {
            def sheet = samplesheetParam()
            rows = parseSamplesheet(sheet, samplesheetOptions()).collect { meta, files -> [meta, files.collectEntries { k, f -> [(k): f ?: []] }] }
            log.info("chromaflow ${workflow.manifest.version} (--mode ${params.mode}): ${assemblies(rows)} from ${sheet} → ${params.outdir}")
        }
        // --outdir is this run's until it ends, and no sample folder of the sheet holds another run's files (outdir.nf)
        claimOutdir(params.outdir as String, rows.collect { row -> row[0].id as String }, params.replace_results.toString() == 'true')
    }

    emit:
    samplesheet = Channel.fromList(rows)
}

/*
 * Registers the end-of-run message (nf-core's PIPELINE_COMPLETION pattern: inside a workflow, not at the top
 * level of main.nf).
 */
workflow PIPELINE_COMPLETION {
    take:
    outdir

    main:
    workflow.onComplete {
        completionMessage(outdir)
    }
}
