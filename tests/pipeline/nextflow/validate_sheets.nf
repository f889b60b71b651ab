/*
 * Test driver: runs the pipeline's own sheet validation (subworkflows/local/utils_chromaflow/samplesheet.nf) on every samplesheet
 * given in --sheets and every train sheet in --train_sheets (comma-separated) in one JVM, printing one line each:
 *   RESULT<TAB><sheet><TAB>OK<TAB><rows as JSON>   or   RESULT<TAB><sheet><TAB>ERROR<TAB><message>
 * (train sheet rows: [meta, fasta, [dataset, kind, library, shift, files, indexes] per dataset]).
 * Used by tests/pipeline/test_samplesheet.py; the real pipeline calls the same functions.
 */
params.sheets = ''
params.train_sheets = ''
params.sheet_schema = null   // a schema file instead of assets/schema_input.json (and schema_train.json, unless:)
params.train_sheet_schema = null   // a schema file instead of assets/schema_train.json

include { parseSamplesheet; parseTrainSheet } from '../../../subworkflows/local/utils_chromaflow/samplesheet'

def rootCause(Throwable e) {
    return (e.cause != null && e.cause != e) ? rootCause(e.cause) : e
}

// One RESULT line: the rows `parse` returns for sheet `s`, or the root cause's message
def report(String s, Closure parse) {
    try {
        println("RESULT\t${s}\tOK\t" + groovy.json.JsonOutput.toJson(parse.call(s)))
    } catch (Throwable e) {
        def root = rootCause(e)
        println("RESULT\t${s}\tERROR\t${(root.message ?: root.class.name).replace('\n', '\\n')}")
    }
}

workflow {
    def options = [default_species: null, default_layout: 'genes-x-samples', schema: params.sheet_schema]
    def name = { p -> p == null ? null : (p.toUri().scheme == 'file' ? p.toString() : p.toUriString()) }
    params.sheets.tokenize(',').each { s ->
        report(s, { parseSamplesheet(it, options).collect { meta, f -> [meta, name.call(f.fasta), name.call(f.expression), name.call(f.regulators)] } })
    }
    params.train_sheets.tokenize(',').each { s ->
        report(s, { parseTrainSheet(it, [schema: params.train_sheet_schema ?: params.sheet_schema]).collect { meta, fasta, specs ->
            [meta, name.call(fasta), specs.collect { sp -> sp + [files: sp.files.collect { name.call(it) }, indexes: sp.indexes.collect { name.call(it) }] }]
        } })
    }
}
