/*
 * Test driver: runs the pipeline's own samplesheet validation (subworkflows/local/samplesheet.nf) on every
 * sheet given in --sheets (comma-separated) in one JVM, printing one "RESULT <sheet> OK|ERROR <message>" line
 * each. Used by tests/test_samplesheet.py; the real pipeline calls the same function.
 */
params.sheets = ''
params.default_species = null
params.genie3_layout = 'genes-x-samples'

include { parseSamplesheet } from '../../subworkflows/local/samplesheet'

workflow {
    params.sheets.tokenize(',').each { s ->
        try {
            def rows = parseSamplesheet(s)
            println "RESULT ${s} OK ${rows.size()}"
        } catch (Throwable e) {
            def root = e
            while (root.cause != null && root.cause != root) root = root.cause
            println "RESULT ${s} ERROR ${root.message ?: root.class.name}"
        }
    }
}
