/*
 * Samplesheet parsing and validation, done in the pipeline itself before any task starts
 * (no nf-schema / nf-validation plugin: the plugin registry is not reachable on offline clusters).
 *
 * Columns: id,fasta            required
 *          species             optional (≤ 25 ASCII bytes; default: --default_species, else the id)
 *          expression          optional expression matrix (TSV/CSV) → GENIE3 run for this assembly
 *          regulators          optional list of candidate regulators (needs expression)
 *          expression_layout   optional genes-x-samples | samples-x-genes (default: --genie3_layout)
 * Relative paths are resolved against the samplesheet's own folder. Every problem stops the run with one
 * line naming the sheet, the line number and the column.
 */

// Stops the run with one line and exit status 1 (catchable by the test driver tests/pipeline/nextflow/validate_sheets.nf).
def sheetError(String message) {
    error(message)
}

List<String> samplesheetColumns() { ['id', 'fasta', 'species', 'expression', 'regulators', 'expression_layout'] }

// Splits one CSV line; supports double-quoted fields with commas and "" escapes.
List<String> splitCsvLine(String line, String where) {
    def fields = []
    def cur = new StringBuilder()
    def state = [quoted: false, skip: false]
    def chars = line.toList()
    chars.eachWithIndex { String c, int i ->
        if (state.skip) {
            state.skip = false
        } else if (state.quoted) {
            if (c == '"' && i + 1 < chars.size() && chars[i + 1] == '"') {
                cur.append('"')
                state.skip = true
            } else if (c == '"') {
                state.quoted = false
            } else {
                cur.append(c)
            }
        } else if (c == '"') {
            state.quoted = true
        } else if (c == ',') {
            fields << cur.toString().trim()
            cur.setLength(0)
        } else {
            cur.append(c)
        }
    }
    if (state.quoted) sheetError("${where}: unterminated quoted field")
    fields << cur.toString().trim()
    return fields
}

/*
 * An http(s) URL must answer before any task starts (a HEAD request, or a GET where the server refuses HEAD),
 * so an unreachable file stops the run with one line naming the sheet line instead of failing a task later.
 * Other schemes (s3://, gs://, ...) need credentials the driver may not have: Nextflow checks them when staging.
 */
def checkUrl(String value, String where, String column) {
    if (!(value ==~ /^(?i)https?:\/\/.*/)) {
        return
    }
    def problem = null
    try {
        def res = [code: 0]
        // a server that refuses HEAD (405/501) gets a GET, whose body is not read
        ['HEAD', 'GET'].find { method ->
            def conn = new URL(value).openConnection()
            conn.setRequestMethod(method)
            conn.setConnectTimeout(20000)
            conn.setReadTimeout(20000)
            conn.setInstanceFollowRedirects(true)
            res.code = conn.getResponseCode()
            conn.disconnect()
            return !(res.code in [405, 501])
        }
        if (res.code < 200 || res.code >= 400) {
            problem = "HTTP ${res.code}"
        }
    } catch (Exception e) {
        problem = "${e.getClass().getSimpleName()}: ${e.message}"
    }
    if (problem) {
        sheetError("${where}: column '${column}': cannot fetch ${value} (${problem})")
    }
}

def resolveSheetPath(String value, sheetDir, String where, String column, boolean mustExist = true) {
    if (value ==~ /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/.*/) {
        checkUrl(value, where, column)
        return file(value)   // remote: Nextflow stages it into the task
    }
    // glob: false -- a name with '*', '?' or '[' is a file name here, not a pattern
    def p = value.startsWith('/') ? file(value, glob: false) : sheetDir.resolve(value).normalize()
    if (mustExist) {
        if (!p.exists()) sheetError("${where}: column '${column}': file not found: ${p}")
        if (!p.isFile()) sheetError("${where}: column '${column}': not a regular file: ${p}")
        if (!p.canRead()) sheetError("${where}: column '${column}': file not readable: ${p}")
    }
    return p
}

/*
 * Returns a list of [meta, fasta, expression|null, regulators|null] rows, meta = [id, species, expression_layout].
 * options: default_species (else the id), default_layout (for rows without expression_layout) and layouts (the
 * allowed values: the genie3_layout enum of nextflow_schema.json).
 */
def parseSamplesheet(sheetPath, Map options = [:]) {
    def layouts = options.layouts ?: ['genes-x-samples', 'samples-x-genes']
    if (!sheetPath) sheetError("--input (or --genomes) is required: a CSV samplesheet with columns id,fasta (see docs/usage.md)")
    def sheet = file(sheetPath.toString(), glob: false)
    def name = sheetPath.toString()
    if (!sheet.exists()) sheetError("samplesheet ${name}: file not found")
    if (sheet.isDirectory()) sheetError("samplesheet ${name}: is a directory, expected a CSV file")
    if (!sheet.canRead()) sheetError("samplesheet ${name}: file not readable")
    def text
    try {
        text = new String(sheet.bytes, 'UTF-8')
    } catch (Exception e) {
        sheetError("samplesheet ${name}: cannot read: ${e.message}")
    }
    if (text.startsWith('\uFEFF')) text = text.substring(1)        // UTF-8 byte-order mark (Excel)
    def lines = text.split(/\r?\n|\r/, -1) as List
    // drop trailing empty lines only (an empty line between records is an error below)
    def last = lines.findLastIndexOf { l -> l.trim() != '' }
    lines = last >= 0 ? lines[0..last] : []
    if (!lines) sheetError("samplesheet ${name}: file is empty (expected a header line 'id,fasta,...')")
    def header = splitCsvLine(lines[0], "samplesheet ${name} line 1").collect { it.toLowerCase() }
    def dup = header.findAll { h -> header.count(h) > 1 }.unique()
    if (dup) sheetError("samplesheet ${name} line 1: duplicate column(s): ${dup.join(', ')}")
    def missing = ['id', 'fasta'].findAll { !(it in header) }
    if (missing) sheetError("samplesheet ${name} line 1: missing required column(s): ${missing.join(', ')} (header is '${lines[0].trim()}')")
    def extra = header.findAll { !(it in samplesheetColumns()) }
    if (extra) sheetError("samplesheet ${name} line 1: unknown column(s): ${extra.join(', ')} (allowed: ${samplesheetColumns().join(', ')})")

    def sheetDir = sheet.toAbsolutePath().getParent()
    def rows = []
    def seen = [:]
    lines.eachWithIndex { String line, int idx ->
        if (idx == 0) return
        int lineNo = idx + 1
        def where = "samplesheet ${name} line ${lineNo}"
        if (line.trim() == '') sheetError("${where}: empty line")
        def fields = splitCsvLine(line, where)
        if (fields.size() != header.size()) sheetError("${where}: ${fields.size()} fields, but the header has ${header.size()}")
        def rec = [header, fields].transpose().collectEntries { [(it[0]): it[1]] }
        def id = rec.id
        if (!id) sheetError("${where}: column 'id' is empty")
        if (!(id ==~ /^[A-Za-z0-9][A-Za-z0-9._-]*$/)) sheetError("${where}: id '${id}' may only contain letters, digits, '.', '_' and '-' (no spaces or path characters)")
        if (seen.containsKey(id)) sheetError("${where}: duplicate id '${id}' (first on line ${seen[id]})")
        seen[id] = lineNo
        if (!rec.fasta) sheetError("${where}: column 'fasta' is empty")
        def fasta = resolveSheetPath(rec.fasta, sheetDir, where, 'fasta')
        def species = rec.species ?: (options.default_species ?: id)
        if (!(species ==~ /^[\x21-\x7E]+$/)) sheetError("${where}: species '${species}' must be printable ASCII without spaces")
        if (species.length() > 25) sheetError("${where}: species '${species}' is ${species.length()} bytes; the Helixer layout stores at most 25 (set a shorter 'species' column)")
        def expression = rec.expression ? resolveSheetPath(rec.expression, sheetDir, where, 'expression') : null
        def regulators = rec.regulators ? resolveSheetPath(rec.regulators, sheetDir, where, 'regulators') : null
        if (regulators && !expression) sheetError("${where}: column 'regulators' is set but 'expression' is empty")
        def layout = rec.expression_layout ?: (options.default_layout ?: layouts[0])
        if (!(layout in layouts)) sheetError("${where}: expression_layout '${layout}' must be ${layouts.join(' or ')}")
        rows << [[id: id, species: species, expression_layout: layout], fasta, expression, regulators]
    }
    if (!rows) sheetError("samplesheet ${name}: no assemblies (only a header line)")
    return rows
}
