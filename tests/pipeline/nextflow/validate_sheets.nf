/*
 * Test driver: runs the pipeline's own samplesheet validation (subworkflows/local/samplesheet.nf) on every
 * sheet given in --sheets (comma-separated) in one JVM, printing one line each:
 *   RESULT<TAB><sheet><TAB>OK<TAB><rows as JSON>   or   RESULT<TAB><sheet><TAB>ERROR<TAB><message>
 * Used by tests/pipeline/test_samplesheet.py; the real pipeline calls the same function.
 */
params.sheets = ''

include { parseSamplesheet } from '../../../subworkflows/local/samplesheet'

def rootCause(Throwable e) {
    return (e.cause != null && e.cause != e) ? rootCause(e.cause) : e
}

workflow {
    def options = [default_species: null, default_layout: 'genes-x-samples', layouts: ['genes-x-samples', 'samples-x-genes']]
    params.sheets.tokenize(',').each { s ->
        try {
            def rows = parseSamplesheet(s, options)
            def name = { p -> p == null ? null : (p.toUri().scheme == 'file' ? p.toString() : p.toUriString()) }
            def plain = rows.collect { r -> [r[0], name.call(r[1]), name.call(r[2]), name.call(r[3])] }
            println("RESULT\t${s}\tOK\t" + groovy.json.JsonOutput.toJson(plain))
        } catch (Throwable e) {
            def root = rootCause(e)
            println("RESULT\t${s}\tERROR\t${(root.message ?: root.class.name).replace('\n', '\\n')}")
        }
    }
}
