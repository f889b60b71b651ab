/*
 * Parameter validation against nextflow_schema.json and the --help text built from it (used by
 * PIPELINE_INITIALISATION, main.nf in this folder).
 *
 * nextflow_schema.json is the single source of truth for every parameter rule: type, enum, pattern, minimum,
 * exclusiveMinimum, maximum, required, and `format: file-path` with `exists: true`. The schema is plain JSON,
 * read here with Groovy's JSON parser (no nf-schema / nf-validation plugin: the plugin registry is not
 * reachable on offline clusters). Only rules that JSON Schema cannot state about one value live in
 * validateParameters() itself, each with its message: --input/--genomes (not in --mode train), --train_sheet
 * (only in --mode train), and --model unless --skip_predict or --test_model.
 */

// Every property of every group of the schema: name -> spec (with the group's `required` list folded in).
def schemaParams(schemaPath) {
    def schema = new groovy.json.JsonSlurper().parse(file(schemaPath.toString()).toFile())
    def props = [:]
    (schema['$defs'] ?: [:]).each { group, spec ->
        def required = spec.required ?: []
        (spec.properties ?: [:]).each { name, p ->
            props[name] = p + [required_: name in required]
        }
    }
    return props
}

def isUrl(value) {
    return value.toString() ==~ /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/.*/
}

def typeNames(spec) {
    def t = spec.type
    return t instanceof List ? t : (t ? [t] : [])
}

// The value converted to the first of the schema's types it has, or null when it has none of them.
def coerceTo(value, String t) {
    if (t == 'boolean') {
        return value instanceof Boolean ? value : null
    }
    if (t == 'integer') {
        if (value instanceof Integer || value instanceof Long || value instanceof BigInteger) {
            return value
        }
        return (value instanceof CharSequence && value.toString() ==~ /^[+-]?\d+$/) ? value.toString().toBigInteger() : null
    }
    if (t == 'number') {
        if (value instanceof Number) {
            return value
        }
        return (value instanceof CharSequence && value.toString() ==~ /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/) ? value.toString().toBigDecimal() : null
    }
    // a number given for a string parameter (--slurm_account 1234) is that string; a bare flag is not a string
    return (t == 'string' && !(value instanceof Boolean)) ? value.toString() : null
}

def coerce(value, List types) {
    return types.findResult { t -> coerceTo(value, t) }
}

def typeWord(List types) {
    def words = types.collect { t -> t == 'integer' ? 'an integer' : (t == 'number' ? 'a number' : (t == 'boolean' ? 'true or false' : 'a string')) }
    return words.join(' or ')
}

/*
 * Problems with one parameter value against its schema entry: a list of one-line messages (empty when valid).
 */
def paramProblems(String name, value, Map spec) {
    def where = "--${name}"
    if (value == null) {
        return spec.required_ ? ["${where} is required${spec.description ? ': ' + spec.description : ''}"] : []
    }
    def types = typeNames(spec)
    def v = types ? coerce(value, types) : value
    if (v == null) {
        if (value instanceof Boolean && !('boolean' in types)) {
            return ["${where} needs a value (${typeWord(types)})"]
        }
        return ["${where} must be ${typeWord(types)} (got '${value}')"]
    }
    def problems = []
    if (spec['enum'] != null && !(spec['enum'].any { e -> e.toString() == v.toString() })) {
        problems << "${where} must be one of ${spec['enum'].join(', ')} (got '${v}')"
    }
    if (spec.pattern && !(v instanceof Boolean) && !(v.toString() ==~ spec.pattern)) {
        problems << "${where} '${v}' does not match ${spec.pattern}${spec.pattern_help ? ' (' + spec.pattern_help + ')' : ''}"
    }
    if (v instanceof Number) {
        if (spec.minimum != null && v < spec.minimum) {
            problems << "${where} must be >= ${spec.minimum} (got ${v})"
        }
        if (spec.maximum != null && v > spec.maximum) {
            problems << "${where} must be <= ${spec.maximum} (got ${v})"
        }
        if (spec.exclusiveMinimum != null && v <= spec.exclusiveMinimum) {
            problems << "${where} must be > ${spec.exclusiveMinimum} (got ${v})"
        }
    }
    // existence only of a well-formed value (one message per parameter)
    if (!problems && spec.format == 'file-path' && spec.exists && !isUrl(v)) {
        def f = file(v.toString())
        if (!f.exists()) {
            problems << "${where}: file not found: ${v}"
        } else if (f.isDirectory()) {
            problems << "${where}: is a directory, expected a file: ${v}"
        }
    }
    return problems
}

// kebab-case and camelCase spellings of a snake_case name (Nextflow stores --foo-bar as foo-bar and fooBar)
def snakeName(String name) {
    return name.replace('-', '_').replaceAll(/([a-z0-9])([A-Z])/, '$1_$2').toLowerCase()
}

/*
 * Validates `values` (normally `params`) against the schema. Returns [errors, warnings]; the caller stops the
 * run on errors. Unknown parameters are warnings (a typo such as --skip_predicts is shown, not fatal).
 */
def checkParams(Map values, schemaPath) {
    def props = schemaParams(schemaPath)
    def errors = []
    props.each { name, spec ->
        errors.addAll(paramProblems(name, values[name], spec))
    }
    // rules across parameters (JSON Schema cannot say these about one value)
    def input = values.input
    def genomes = values.genomes
    if (values.mode == 'train' && !values.help && values.train_sheet == null) {
        errors << "--train_sheet is required with --mode train: a CSV with columns id,split,fasta,species,dataset,file,library,shift (see docs/training.md)"
    }
    if (values.mode != 'train' && !values.help && input == null && genomes == null) {
        errors << "--input (or its synonym --genomes) is required: a CSV samplesheet with columns id,fasta (see docs/usage.md)"
    }
    if (input instanceof CharSequence && genomes instanceof CharSequence && input.toString() != genomes.toString()) {
        errors << "--input and --genomes are the same parameter; they name different files ('${input}' and '${genomes}'): give one"
    }
    if (values.mode == 'predict' && !values.skip_predict && !values.test_model && !values.model) {
        errors << "--model is required (a Predmoter .ckpt path or https URL), or use --skip_predict"
    }
    def warnings = []
    values.keySet().each { k ->
        def key = k.toString()
        if (!props.containsKey(key) && !props.containsKey(snakeName(key))) {
            warnings << "unknown parameter --${key} (not in nextflow_schema.json; ignored)"
        }
    }
    return [errors, warnings]
}

def validateParameters(schemaPath) {
    def result = checkParams(params, schemaPath)
    result[1].each { w -> log.warn(w) }
    if (result[0]) {
        error("chromaflow: invalid parameters (nextflow_schema.json):\n  " + result[0].join('\n  '))
    }
}

// The samplesheet: --input (nf-core's name) or --genomes (ours), the same thing.
def samplesheetParam() {
    return params.input ?: params.genomes
}

// How the samplesheet parser fills in defaults (its rules are assets/schema_input.json's).
def samplesheetOptions() {
    return [default_species: params.default_species, default_layout: params.genie3_layout]
}

/*
 * --help text, built from the schema (groups, names, types, defaults, descriptions; hidden ones left out).
 */
def paramsHelp(schemaPath) {
    def schema = new groovy.json.JsonSlurper().parse(file(schemaPath.toString()).toFile())
    def lines = [
        "Usage: nextflow run main.nf -profile <profiles> --input sheet.csv --outdir DIR [--model M.ckpt] [options]",
        "",
        "Profiles: local, test, docker, podman, singularity, apptainer, gpu, slurm, slurm_gpu (combine with commas).",
    ]
    (schema['$defs'] ?: [:]).each { group, spec ->
        def shown = (spec.properties ?: [:]).findAll { name, p -> !p.hidden }
        if (!shown) {
            return
        }
        lines << ""
        lines << "${spec.title ?: group}:"
        shown.each { name, p ->
            def type = typeNames(p).join('|')
            def dflt = p.containsKey('default') ? " [default: ${p.default}]" : ((name in (spec.required ?: [])) ? ' [required]' : '')
            def choices = p['enum'] ? " (${p['enum'].join(' | ')})" : ''
            lines << "  --${name.padRight(24)} ${type.padRight(14)} ${p.description ?: ''}${choices}${dflt}"
        }
    }
    lines << ""
    lines << "All parameters: docs/usage.md and nextflow_schema.json."
    return lines.join('\n')
}
