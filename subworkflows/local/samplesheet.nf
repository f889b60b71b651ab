/*
 * Samplesheet parsing and validation, done in the pipeline itself before any task starts
 * (no nf-schema / nf-validation plugin: the plugin registry is not reachable on offline clusters).
 *
 * Columns: id,fasta            required
 *          species             optional (≤ 25 ASCII bytes; default: params.default_species, else the id)
 *          expression          optional expression matrix (TSV/CSV) → GENIE3 run for this assembly
 *          regulators          optional list of candidate regulators (needs expression)
 *          expression_layout   optional genes-x-samples | samples-x-genes (default: params.genie3_layout)
 * Relative paths are resolved against the samplesheet's own folder. Every problem stops the run with one
 * line naming the sheet, the line number and the column.
 */

// Stops the run with one line (Nextflow prints 'ERROR ~ <message>' and exits 1); catchable by the test driver.
def sheetError(String message) {
    throw new nextflow.exception.AbortOperationException(message)
}

List<String> samplesheetColumns() { ['id', 'fasta', 'species', 'expression', 'regulators', 'expression_layout'] }

// Splits one CSV line; supports double-quoted fields with commas and "" escapes.
List<String> splitCsvLine(String line, String where) {
    def fields = []
    def cur = new StringBuilder()
    boolean quoted = false
    int i = 0
    while (i < line.length()) {
        char c = line.charAt(i)
        if (quoted) {
            if (c == '"' as char) {
                if (i + 1 < line.length() && line.charAt(i + 1) == '"' as char) {
                    cur.append('"')
                    i += 1
                } else {
                    quoted = false
                }
            } else {
                cur.append(c)
            }
        } else if (c == '"' as char) {
            quoted = true
        } else if (c == ',' as char) {
            fields << cur.toString().trim()
            cur.setLength(0)
        } else {
            cur.append(c)
        }
        i += 1
    }
    if (quoted) sheetError("${where}: unterminated quoted field")
    fields << cur.toString().trim()
    return fields
}

def resolveSheetPath(String value, java.nio.file.Path sheetDir, String where, String column, boolean mustExist = true) {
    if (value ==~ /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/.*/) {
        return file(value)   // remote (https://, s3://, ...): Nextflow stages it; existence is checked when staged
    }
    def p = value.startsWith('/') ? java.nio.file.Paths.get(value) : sheetDir.resolve(value).normalize()
    if (mustExist) {
        if (!java.nio.file.Files.exists(p)) sheetError("${where}: column '${column}': file not found: ${p}")
        if (!java.nio.file.Files.isRegularFile(p)) sheetError("${where}: column '${column}': not a regular file: ${p}")
        if (!java.nio.file.Files.isReadable(p)) sheetError("${where}: column '${column}': file not readable: ${p}")
    }
    return file(p.toString())
}

/*
 * Returns a list of [meta, fasta, expression|null, regulators|null] rows, meta = [id, species, expression_layout].
 */
def parseSamplesheet(sheetPath) {
    if (!sheetPath) sheetError("--genomes is required: a CSV samplesheet with columns id,fasta (see docs/usage.md)")
    def sheet = file(sheetPath.toString())
    def name = sheetPath.toString()
    if (!sheet.exists()) sheetError("samplesheet ${name}: file not found")
    if (sheet.isDirectory()) sheetError("samplesheet ${name}: is a directory, expected a CSV file")
    if (!java.nio.file.Files.isReadable(sheet)) sheetError("samplesheet ${name}: file not readable")
    def text
    try {
        text = new String(java.nio.file.Files.readAllBytes(sheet), 'UTF-8')
    } catch (Exception e) {
        sheetError("samplesheet ${name}: cannot read: ${e.message}")
    }
    if (text.startsWith('\uFEFF')) text = text.substring(1)        // UTF-8 byte-order mark (Excel)
    def lines = text.split(/\r?\n|\r/, -1) as List
    // drop trailing empty lines only
    while (lines && lines[-1].trim() == '') {
        lines.remove(lines.size() - 1)
    }
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
        def species = rec.species ?: (params.default_species ?: id)
        if (!(species ==~ /^[\x21-\x7E]+$/)) sheetError("${where}: species '${species}' must be printable ASCII without spaces")
        if (species.length() > 25) sheetError("${where}: species '${species}' is ${species.length()} bytes; the Helixer layout stores at most 25 (set a shorter 'species' column)")
        def expression = rec.expression ? resolveSheetPath(rec.expression, sheetDir, where, 'expression') : null
        def regulators = rec.regulators ? resolveSheetPath(rec.regulators, sheetDir, where, 'regulators') : null
        if (regulators && !expression) sheetError("${where}: column 'regulators' is set but 'expression' is empty")
        def layout = rec.expression_layout ?: params.genie3_layout
        if (!(layout in ['genes-x-samples', 'samples-x-genes'])) sheetError("${where}: expression_layout '${layout}' must be genes-x-samples or samples-x-genes")
        rows << [[id: id, species: species, expression_layout: layout], fasta, expression, regulators]
    }
    if (!rows) sheetError("samplesheet ${name}: no assemblies (only a header line)")
    return rows
}

/*
 * Number of genes in an expression matrix (for splitting GENIE3 into target chunks): counted from the
 * header (samples-x-genes) or from the data lines (genes-x-samples). The GENIE3 task validates the rest.
 */
int countGenes(expression, String layout) {
    def n = 0
    def first = true
    expression.withReader('UTF-8') { r ->
        if (layout == 'samples-x-genes') {
            def header = r.readLine() ?: ''
            def sep = header.contains('\t') ? '\t' : ','
            def fields = header.split(java.util.regex.Pattern.quote(sep), -1) as List
            // a leading empty/label cell is the row-name column
            n = fields.size() - ((fields && (fields[0].replace('"', '').trim() == '' )) ? 1 : 0)
        } else {
            r.readLine()
            def line = r.readLine()
            while (line != null) {
                if (line.trim()) {
                    n += 1
                }
                line = r.readLine()
            }
        }
    }
    return Math.max(n, 1)
}
