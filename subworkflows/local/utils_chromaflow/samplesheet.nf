/*
 * The two sheets, parsed and validated in the pipeline itself before any task starts (no nf-schema /
 * nf-validation plugin: the plugin registry is not reachable on offline clusters), through one CSV reader
 * (readSheet: header, quoting, BOM, line endings, empty lines, field counts) and each sheet's JSON schema, the one
 * home of its rules (checkRow; sheetSchema below): assets/schema_input.json for the samplesheet (--input /
 * --genomes; parseSamplesheet: one row per assembly, columns id, fasta, species, expression, regulators,
 * expression_layout, annotation, motifs, tf_motifs, vcf) and assets/schema_train.json for the train sheet
 * (--train_sheet, --mode train; parseTrainSheet: one row per reads file). Both take the id and species rules from
 * src/chromaflow/schemas/assembly.json. Every problem stops the run with one line naming the sheet, the line and
 * the column. Relative paths are resolved against the sheet's own folder.
 */

// Stops the run with one line and exit status 1 (catchable by the test driver tests/pipeline/nextflow/validate_sheets.nf).
def sheetError(String message) {
    error(message)
}

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
 * One CSV sheet: [name, folder, records], each record [fields by (lower-case) column, line number, "<what> <name>
 * line <n>"]. `what` names the sheet in messages ('samplesheet', 'train sheet'); `columns` are the allowed columns,
 * `required` those that must be there.
 */
def readSheet(sheetPath, String what, List<String> columns, List<String> required) {
    def sheet = file(sheetPath.toString(), glob: false)
    def name = sheetPath.toString()
    if (!sheet.exists()) sheetError("${what} ${name}: file not found")
    if (sheet.isDirectory()) sheetError("${what} ${name}: is a directory, expected a CSV file")
    if (!sheet.canRead()) sheetError("${what} ${name}: file not readable")
    def text
    try {
        text = new String(sheet.bytes, 'UTF-8')
    } catch (Exception e) {
        sheetError("${what} ${name}: cannot read: ${e.message}")
    }
    if (text.startsWith('\uFEFF')) text = text.substring(1)        // UTF-8 byte-order mark (Excel)
    def lines = text.split(/\r?\n|\r/, -1) as List
    // drop trailing empty lines only (an empty line between records is an error below)
    def last = lines.findLastIndexOf { l -> l.trim() != '' }
    lines = last >= 0 ? lines[0..last] : []
    if (!lines) sheetError("${what} ${name}: file is empty (expected a header line '${required.join(',')},...')")
    def header = splitCsvLine(lines[0], "${what} ${name} line 1").collect { it.toLowerCase() }
    def dup = header.findAll { h -> header.count(h) > 1 }.unique()
    if (dup) sheetError("${what} ${name} line 1: duplicate column(s): ${dup.join(', ')}")
    def missing = required.findAll { !(it in header) }
    if (missing) sheetError("${what} ${name} line 1: missing required column(s): ${missing.join(', ')} (header is '${lines[0].trim()}')")
    def extra = header.findAll { !(it in columns) }
    if (extra) sheetError("${what} ${name} line 1: unknown column(s): ${extra.join(', ')} (allowed: ${columns.join(', ')})")
    def records = []
    lines.eachWithIndex { String line, int idx ->
        if (idx == 0) return
        int lineNo = idx + 1
        def where = "${what} ${name} line ${lineNo}"
        if (line.trim() == '') sheetError("${where}: empty line")
        def fields = splitCsvLine(line, where)
        if (fields.size() != header.size()) sheetError("${where}: ${fields.size()} fields, but the header has ${header.size()}")
        records << [[header, fields].transpose().collectEntries { [(it[0]): it[1]] }, lineNo, where]
    }
    return [name, sheet.toAbsolutePath().getParent(), records]
}

/*
 * The sheets' rules: a JSON schema per sheet (assets/schema_input.json, assets/schema_train.json), named by the
 * sheet's parameter in nextflow_schema.json ("schema": the nf-schema keyword) and read here, with every $ref
 * resolved (the id and species rules are the package's src/chromaflow/schemas/assembly.json, which
 * chromaflow.genome.encoding reads too; expression_layout is the genie3_layout parameter's enum). What the reader
 * takes from a schema: the columns (items.properties, in order), the required ones, each cell's rule (enum,
 * pattern, maxLength, if/then/else, format file-path with exists), items.dependentRequired and uniqueEntries;
 * errorMessage (nf-schema's), maxLength_help and dependentRequired_help give the reason after the value. Rules across
 * rows or across the columns of a row that JSON Schema cannot state stay in parseSamplesheet / parseTrainSheet.
 */
def pipelineRoot() {
    return file("${moduleDir}/../../..")
}

// The node `pointer` ('/$defs/x/properties/y', RFC 6901) points to in `doc`.
def jsonPointer(doc, String pointer, String where) {
    def node = doc
    pointer.tokenize('/').each { raw ->
        def key = raw.replace('~1', '/').replace('~0', '~')
        node = node instanceof List ? node[key as int] : node?.get(key)
        if (node == null) {
            error("${where}: \$ref pointer '${pointer}' names nothing")
        }
    }
    return node
}

// `node` with every {"$ref": "<file relative to base's folder>#<pointer>"} replaced by its target, merged with the
// $ref's siblings (which win: a column's own description over the referenced rule's; the sheets give no rule beside
// a $ref, which JSON Schema would apply on top of the referenced one)
def resolveRefs(node, base) {
    if (node instanceof List) {
        return node.collect { resolveRefs(it, base) }
    }
    if (!(node instanceof Map)) {
        return node
    }
    def out = [:]
    def ref = node['$ref']
    if (ref != null) {
        def (uri, pointer) = ref.toString().contains('#') ? ref.toString().split('#', 2) as List : [ref.toString(), '']
        def target = uri ? base.parent.resolve(uri).normalize() : base
        def doc = new groovy.json.JsonSlurper().parse(target.toFile())
        out.putAll(resolveRefs(jsonPointer(doc, pointer, base.toString()), target))
    }
    node.each { k, v -> if (k != '$ref') out[k] = resolveRefs(v, base) }
    return out
}

// The schema of the sheet that parameter `param` names (nextflow_schema.json's "schema"), $refs resolved; or the
// schema file `override` (tests).
def sheetSchema(String param, override = null) {
    def root = pipelineRoot()
    def path = override ? file(override.toString()) : null
    if (!path) {
        def params_schema = new groovy.json.JsonSlurper().parse(root.resolve('nextflow_schema.json').toFile())
        def spec = params_schema['$defs'].values().findResult { g -> g.properties?.get(param) }
        path = root.resolve(spec.schema.toString())
    }
    return resolveRefs(new groovy.json.JsonSlurper().parse(path.toFile()), path)
}

def orList(List values) {
    def v = values.collect { it.toString() }
    return v.size() > 1 ? v[0..-2].join(', ') + ' or ' + v[-1] : v.join('')
}

// Does `value` satisfy the (string-only) conditions of `spec`? (an if/then/else's `if`)
def cellMatches(String value, Map spec) {
    return cellProblem('', value, spec) == null
}

/*
 * The first problem of one cell's value against its column's rule, as the text after "<sheet> line <n>: ", or null.
 * A long value is shown cut to its first 20 characters.
 */
def cellProblem(String column, String value, Map spec) {
    def shown = value.length() > 30 ? value.take(20) + '...' : value
    def reason = spec.errorMessage
    if (spec['enum'] != null && !(spec['enum'].any { it.toString() == value })) {
        return "column '${column}': '${shown}' ${reason ?: 'must be ' + orList(spec['enum'])}"
    }
    if (spec.pattern && !java.util.regex.Pattern.compile(spec.pattern.toString()).matcher(value).find()) {
        return "column '${column}': '${shown}' ${reason ?: 'does not match ' + spec.pattern}"
    }
    if (spec.maxLength != null && value.length() > (spec.maxLength as int)) {
        return "column '${column}': '${shown}' is ${value.length()} characters; at most ${spec.maxLength}${spec.maxLength_help ? ' (' + spec.maxLength_help + ')' : ''}"
    }
    if (spec['if'] != null) {
        def branch = cellMatches(value, spec['if']) ? spec['then'] : spec['else']
        if (branch != null) {
            return cellProblem(column, value, branch)
        }
    }
    return null
}

/*
 * One row of a sheet checked against its schema's items: every column's value (the cell, else defaults[column],
 * else the schema's default; null when none), with `format: file-path` values resolved to paths (checked to
 * exist where the schema says `exists`). Stops the run on the first problem, naming the line and the column.
 */
def checkRow(Map rec, String where, Map schema, sheetDir, Map defaults = [:]) {
    def items = schema.items
    def values = [:]
    items.properties.each { String column, Map spec ->
        def value = rec[column] ?: (defaults[column] ?: spec['default'])
        if (!value) {
            if (column in (items.required ?: [])) sheetError("${where}: column '${column}' is empty")
            values[column] = null
            return
        }
        value = value.toString()
        def problem = cellProblem(column, value, spec)
        if (problem) sheetError("${where}: ${problem}")
        // the rule that applies to this value (if/then/else) says whether it is a file
        def rule = spec['if'] != null ? ((cellMatches(value, spec['if']) ? spec['then'] : spec['else']) ?: [:]) : spec
        values[column] = rule.format == 'file-path' ? resolveSheetPath(value, sheetDir, where, column, rule.exists == true) : value
    }
    (items.dependentRequired ?: [:]).each { String column, List needs ->
        if (!rec[column]) return
        needs.findAll { !rec[it] }.take(1).each { need ->
            def help = items.dependentRequired_help?.get(column)?.get(need)
            sheetError("${where}: column '${column}' is set but '${need}' is empty${help ? ' (' + help + ')' : ''}")
        }
    }
    return values
}

// The schema's uniqueEntries: the first row whose columns repeat an earlier row's.
def checkUnique(Map schema, List records) {
    (schema.uniqueEntries ?: []).each { column ->
        def seen = [:]
        records.each { rec, lineNo, where ->
            def v = rec[column]
            if (seen.containsKey(v)) sheetError("${where}: duplicate ${column} '${v}' (first on line ${seen[v]})")
            seen[v] = lineNo
        }
    }
}

/*
 * Returns a list of [meta, files] rows, one per assembly: files = [fasta:, expression:, regulators:, annotation:,
 * motifs:, tf_motifs:, tf_families:, vcf:] (each a path, or null where the column is empty), meta = [id, species,
 * expression_layout] (+ motifs_db: 'jaspar:...' where the motifs column names pyjaspar's bundled database instead
 * of a file).
 * options: default_species (else the id), default_layout (for rows without expression_layout; else the schema's
 * default), schema (a schema file instead of the one nextflow_schema.json names for --input: tests).
 */
def parseSamplesheet(sheetPath, Map options = [:]) {
    if (!sheetPath) sheetError("--input (or --genomes) is required: a CSV samplesheet with columns id,fasta (see docs/usage.md)")
    def schema = sheetSchema('input', options.schema)
    def columns = schema.items.properties.keySet() as List
    def (name, sheetDir, records) = readSheet(sheetPath, 'samplesheet', columns, schema.items.required)
    if (!records) sheetError("samplesheet ${name}: no assemblies (only a header line)")
    checkUnique(schema, records)
    def rows = records.collect { rec, lineNo, where ->
        def v = checkRow(rec, where, schema, sheetDir,
                         [species: options.default_species ?: rec.id, expression_layout: options.default_layout])
        def motifs_db = v.motifs instanceof String ? v.motifs : null      // jaspar:... (a file is a path)
        def meta = [id: v.id, species: v.species, expression_layout: v.expression_layout] + (motifs_db ? [motifs_db: motifs_db] : [:])
        [meta, [fasta: v.fasta, expression: v.expression, regulators: v.regulators, annotation: v.annotation,
                motifs: motifs_db ? null : v.motifs, tf_motifs: v.tf_motifs, tf_families: v.tf_families, vcf: v.vcf]]
    }
    return rows
}

/*
 * The train sheet (--mode train; docs/training.md, assets/schema_train.json): one row per reads file.
 *   id        assembly id; rows with the same id share split, fasta and species
 *   split     train | val | test (at least one train and one val assembly)
 *   fasta     the assembly (FASTA, plain or gzip)
 *   species   optional (default: the id)
 *   dataset   the coverage name the model predicts, e.g. atacseq, h3k4me3
 *   file      a coordinate-sorted BAM with its index beside it (.bai or .csi), or a bigWig (.bw / .bigwig)
 *   library   unstranded (default) | first | second (first/second-read-is-sense-strand); bigWig: unstranded
 *   shift     true | false (default): ATAC Tn5 shift, BAM + unstranded only
 * Files of one dataset of one assembly are replicates (one coverage column each) and must share kind, library, shift.
 * Returns one row per assembly: [meta (id, species, split), fasta, specs], one spec per dataset in sheet order:
 * [dataset, kind: bam|bigwig, library, shift, files: [reads files], indexes: [their BAM indexes; none for bigWigs]].
 * options: schema (a schema file instead of the one nextflow_schema.json names for --train_sheet: tests).
 */
def parseTrainSheet(sheetPath, Map options = [:]) {
    def schema = sheetSchema('train_sheet', options.schema)
    def columns = schema.items.properties.keySet() as List
    if (!sheetPath) sheetError("--mode train needs --train_sheet: a CSV with columns ${columns.join(',')} (see docs/training.md)")
    def (name, sheetDir, records) = readSheet(sheetPath, 'train sheet', columns, schema.items.required)
    if (!records) sheetError("train sheet ${name}: no rows (only a header line)")
    def asm = [:]        // id -> [meta, fasta, line]
    def groups = [:]     // id -> dataset -> spec (+ line)
    records.each { rec, lineNo, where ->
        def v = checkRow(rec, where, schema, sheetDir, [species: rec.id])
        def id = v.id
        def fasta = v.fasta
        def species = v.species
        if (asm.containsKey(id)) {
            def (m0, f0, l0) = asm[id]
            if (m0.split != v.split || f0.toString() != fasta.toString() || m0.species != species) {
                sheetError("${where}: assembly '${id}' has another split, fasta or species than on line ${l0}")
            }
        } else {
            asm[id] = [[id: id, species: species, split: v.split], fasta, lineNo]
        }
        def ds = v.dataset
        def reads = v.file
        def kind = rec.file.toLowerCase().endsWith('.bam') ? 'bam' : 'bigwig'     // the schema's pattern allows no other
        def index = null
        if (kind == 'bam') {
            def bai = file(reads.toString() + '.bai')
            def csi = file(reads.toString() + '.csi')
            def bai2 = file(reads.toString().replaceAll(/\.bam$/, '.bai'))
            index = [bai, csi, bai2].find { it.exists() }
            if (!index) sheetError("${where}: column 'file': ${reads} has no index (${reads}.bai or .csi); run samtools index")
        }
        def library = v.library
        def shift = v.shift.toLowerCase() in ['true', 'yes', '1']
        if (kind == 'bigwig' && (library != 'unstranded' || shift)) sheetError("${where}: a bigWig needs library unstranded and shift false")
        if (shift && library != 'unstranded') sheetError("${where}: shift needs library unstranded (as in Helixer)")
        def g = groups.get(id, [:])
        groups[id] = g
        if (g.containsKey(ds)) {
            def s = g[ds]
            if (s.kind != kind || s.library != library || s.shift != shift) {
                sheetError("${where}: dataset '${ds}' of '${id}' mixes file kind, library or shift with line ${s.line}")
            }
            if (reads.toString() in s.files.collect { it.toString() }) sheetError("${where}: ${reads} is listed twice for dataset '${ds}' of '${id}'")
            s.files << reads
            if (index) s.indexes << index
        } else {
            g[ds] = [dataset: ds, kind: kind, library: library, shift: shift, files: [reads], indexes: index ? [index] : [], line: lineNo]
        }
    }
    def rows = asm.collect { id, a ->
        def (meta, fasta, l) = a
        [meta, fasta, groups[id].values().collect { s -> s.findAll { k, v -> k != 'line' } }]
    }
    if (!rows.any { it[0].split == 'train' }) sheetError("train sheet ${name}: no assembly with split 'train'")
    if (!rows.any { it[0].split == 'val' }) sheetError("train sheet ${name}: no assembly with split 'val'")
    return rows
}
