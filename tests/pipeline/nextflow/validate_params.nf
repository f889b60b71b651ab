/*
 * Test driver: checks many parameter sets with the pipeline's own validation (checkParams in
 * subworkflows/local/utils_chromaflow/schema.nf, the function main.nf calls) against nextflow_schema.json, in one JVM.
 * Run with `-c <repo>/nextflow.config` so the defaults are the pipeline's. --cases FILE is JSON
 * {case: {param: value}}: each case is the defaults with these values (null = unset). Prints one line per case:
 *   RESULT<TAB>case<TAB>{"errors": [...], "warnings": [...]}
 * Used by tests/pipeline/test_params.py.
 */
params.cases = ''

include { checkParams } from '../../../subworkflows/local/utils_chromaflow/schema'

workflow {
    def cases = new groovy.json.JsonSlurper().parse(file(params.cases).toFile())
    def defaults = params.findAll { k, v -> k != 'cases' }
    cases.each { name, overrides ->
        def values = defaults + overrides
        def res = checkParams(values, "${projectDir}/../../../nextflow_schema.json")
        println("RESULT\t${name}\t" + groovy.json.JsonOutput.toJson([errors: res[0], warnings: res[1]]))
    }
}
