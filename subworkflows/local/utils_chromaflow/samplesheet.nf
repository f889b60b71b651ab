/*
 * The two sheets, parsed and validated in the pipeline itself before any task starts (no nf-schema /
 * nf-validation plugin: the plugin registry is not reachable on offline clusters), through one CSV reader
 * (readSheet: header, quoting, BOM, line endings, empty lines, field counts) and one set of id and species rules
 * (checkId, checkSpecies). Every problem stops the run with one line naming the sheet, the line and the column.
 *
 * Samplesheet (--input / --genomes; parseSamplesheet):
 *   id,fasta            required
 *   species             optional (≤ 25 ASCII bytes; default: --default_species, else the id)
 *   expression          optional expression matrix (TSV/CSV) → GENIE3 run for this assembly
 *   regulators          optional list of candidate regulators (needs expression)
 *   expression_layout   optional genes-x-samples | samples-x-genes (default: --genie3_layout)
 *   annotation          optional GFF3/GTF of the genes → GENE_ACCESSIBILITY (after prediction)
 *   motifs              optional JASPAR/MEME motif file, or jaspar:<COLLECTION>/<tax group> (pyjaspar's bundled
 *                       database) → MOTIF_PRIOR (needs annotation and tf_motifs)
 *   tf_motifs           optional TF<TAB>motif table (needs motifs)
 *   vcf                 optional variants (VCF, bgzipped VCF or BCF) → VARIANT_EFFECT for this assembly
 * Train sheet (--train_sheet, --mode train; parseTrainSheet): one row per reads file, see trainSheetColumns().
 * Relative paths are resolved against the sheet's own folder.
 */

// Stops the run with one line and exit status 1 (catchable by the test driver tests/pipeline/nextflow/validate_sheets.nf).
def sheetError(String message) {
    error(message)
}

List<String> samplesheetColumns() { ['id', 'fasta', 'species', 'expression', 'regulators', 'expression_layout', 'annotation', 'motifs', 'tf_motifs', 'vcf'] }

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
 * The id and species rules: the package's src/chromaflow/schemas/assembly.json, which chromaflow.genome.encoding
 * reads too (one rule for the pipeline and the package). Found beside this file's folder in the repository.
 */
def assemblyRules() {
    def path = file("${moduleDir}/../../../src/chromaflow/schemas/assembly.json")
    return new groovy.json.JsonSlurper().parse(path.toFile()).properties
}

// An assembly id (used in output paths): letters, digits, '.', '_', '-', at most 100 characters (assembly.json).
def checkId(id, String where) {
    if (!id) sheetError("${where}: column 'id' is empty")
    if (!(id ==~ assemblyRules().id.pattern)) sheetError("${where}: id '${id}' may only contain letters, digits, '.', '_' and '-' (no spaces or path characters)")
    if (id.length() > (assemblyRules().id.maxLength as int)) sheetError("${where}: id '${id.take(20)}...' is ${id.length()} characters; at most ${assemblyRules().id.maxLength} (it names the assembly's output files)")
    return id
}

// The species string stored in the genome h5: printable ASCII without spaces, at most 25 bytes (data/species S25).
def checkSpecies(species, String where) {
    def rule = assemblyRules().species
    if (!(species ==~ rule.pattern)) sheetError("${where}: species '${species}' must be printable ASCII without spaces")
    if (species.length() > (rule.maxLength as int)) sheetError("${where}: species '${species}' is ${species.length()} bytes; the Helixer layout stores at most ${rule.maxLength} (set a shorter 'species' column)")
    return species
}

/*
 * Returns a list of [meta, files] rows, one per assembly: files = [fasta:, expression:, regulators:, annotation:,
 * motifs:, tf_motifs:, vcf:] (each a path, or null where the column is empty), meta = [id, species,
 * expression_layout] (+ motifs_db: 'jaspar:...' where the motifs column names pyjaspar's bundled database instead
 * of a file).
 * options: default_species (else the id), default_layout (for rows without expression_layout) and layouts (the
 * allowed values: the genie3_layout enum of nextflow_schema.json).
 */
def parseSamplesheet(sheetPath, Map options = [:]) {
    def layouts = options.layouts ?: ['genes-x-samples', 'samples-x-genes']
    if (!sheetPath) sheetError("--input (or --genomes) is required: a CSV samplesheet with columns id,fasta (see docs/usage.md)")
    def (name, sheetDir, records) = readSheet(sheetPath, 'samplesheet', samplesheetColumns(), ['id', 'fasta'])
    def rows = []
    def seen = [:]
    records.each { rec, lineNo, where ->
        def id = checkId(rec.id, where)
        if (seen.containsKey(id)) sheetError("${where}: duplicate id '${id}' (first on line ${seen[id]})")
        seen[id] = lineNo
        if (!rec.fasta) sheetError("${where}: column 'fasta' is empty")
        def fasta = resolveSheetPath(rec.fasta, sheetDir, where, 'fasta')
        def species = checkSpecies(rec.species ?: (options.default_species ?: id), where)
        def expression = rec.expression ? resolveSheetPath(rec.expression, sheetDir, where, 'expression') : null
        def regulators = rec.regulators ? resolveSheetPath(rec.regulators, sheetDir, where, 'regulators') : null
        if (regulators && !expression) sheetError("${where}: column 'regulators' is set but 'expression' is empty")
        def layout = rec.expression_layout ?: (options.default_layout ?: layouts[0])
        if (!(layout in layouts)) sheetError("${where}: expression_layout '${layout}' must be ${layouts.join(' or ')}")
        def annotation = rec.annotation ? resolveSheetPath(rec.annotation, sheetDir, where, 'annotation') : null
        def motifs_db = (rec.motifs ?: '').startsWith('jaspar:') ? rec.motifs : null
        if (motifs_db && !(motifs_db ==~ /^jaspar:[A-Za-z_]+(\/[A-Za-z_]+)?(@[A-Za-z0-9_]+)?$/)) {
            sheetError("${where}: column 'motifs': '${motifs_db}' must be jaspar:<COLLECTION>[/<tax group>][@<release>], e.g. jaspar:CORE/plants")
        }
        def motifs = rec.motifs && !motifs_db ? resolveSheetPath(rec.motifs, sheetDir, where, 'motifs') : null
        def tf_motifs = rec.tf_motifs ? resolveSheetPath(rec.tf_motifs, sheetDir, where, 'tf_motifs') : null
        if (rec.motifs && !annotation) sheetError("${where}: column 'motifs' is set but 'annotation' is empty (the prior scans the genes' promoters)")
        if (rec.motifs && !tf_motifs) sheetError("${where}: column 'motifs' is set but 'tf_motifs' is empty (which TF binds which motif)")
        if (tf_motifs && !rec.motifs) sheetError("${where}: column 'tf_motifs' is set but 'motifs' is empty")
        def meta = [id: id, species: species, expression_layout: layout] + (motifs_db ? [motifs_db: motifs_db] : [:])
        def vcf = rec.vcf ? resolveSheetPath(rec.vcf, sheetDir, where, 'vcf') : null
        rows << [meta, [fasta: fasta, expression: expression, regulators: regulators, annotation: annotation,
                        motifs: motifs, tf_motifs: tf_motifs, vcf: vcf]]
    }
    if (!rows) sheetError("samplesheet ${name}: no assemblies (only a header line)")
    return rows
}

List<String> trainSheetColumns() { ['id', 'split', 'fasta', 'species', 'dataset', 'file', 'library', 'shift'] }

/*
 * The train sheet (--mode train; docs/training.md): one row per reads file.
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
 */
def parseTrainSheet(sheetPath) {
    if (!sheetPath) sheetError("--mode train needs --train_sheet: a CSV with columns ${trainSheetColumns().join(',')} (see docs/training.md)")
    def (name, sheetDir, records) = readSheet(sheetPath, 'train sheet', trainSheetColumns(), ['id', 'split', 'fasta', 'dataset', 'file'])
    def asm = [:]        // id -> [meta, fasta, line]
    def groups = [:]     // id -> dataset -> spec (+ line)
    records.each { rec, lineNo, where ->
        def id = checkId(rec.id, where)
        if (!(rec.split in ['train', 'val', 'test'])) sheetError("${where}: column 'split' must be train, val or test (got '${rec.split}')")
        if (!rec.fasta) sheetError("${where}: column 'fasta' is empty")
        def fasta = resolveSheetPath(rec.fasta, sheetDir, where, 'fasta')
        def species = checkSpecies(rec.species ?: id, where)
        if (asm.containsKey(id)) {
            def (m0, f0, l0) = asm[id]
            if (m0.split != rec.split || f0.toString() != fasta.toString() || m0.species != species) {
                sheetError("${where}: assembly '${id}' has another split, fasta or species than on line ${l0}")
            }
        } else {
            asm[id] = [[id: id, species: species, split: rec.split], fasta, lineNo]
        }
        def ds = rec.dataset
        if (!(ds ==~ /^[A-Za-z0-9][A-Za-z0-9_.-]*$/)) sheetError("${where}: dataset '${ds}' may only contain letters, digits, '.', '_' and '-'")
        if (!rec.file) sheetError("${where}: column 'file' is empty")
        def lower = rec.file.toLowerCase()
        def kind = lower.endsWith('.bam') ? 'bam' : (lower.endsWith('.bw') || lower.endsWith('.bigwig') ? 'bigwig' : null)
        if (!kind) sheetError("${where}: column 'file': '${rec.file}' is neither a .bam nor a .bw/.bigwig file")
        def reads = resolveSheetPath(rec.file, sheetDir, where, 'file')
        def index = null
        if (kind == 'bam') {
            def bai = file(reads.toString() + '.bai')
            def csi = file(reads.toString() + '.csi')
            def bai2 = file(reads.toString().replaceAll(/\.bam$/, '.bai'))
            index = [bai, csi, bai2].find { it.exists() }
            if (!index) sheetError("${where}: column 'file': ${reads} has no index (${reads}.bai or .csi); run samtools index")
        }
        def library = rec.library ?: 'unstranded'
        if (!(library in ['unstranded', 'first', 'second'])) sheetError("${where}: column 'library' must be unstranded, first or second (got '${library}')")
        def shiftText = (rec.shift ?: 'false').toLowerCase()
        if (!(shiftText in ['true', 'false', 'yes', 'no', '1', '0'])) sheetError("${where}: column 'shift' must be true or false (got '${rec.shift}')")
        def shift = shiftText in ['true', 'yes', '1']
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
    if (!rows) sheetError("train sheet ${name}: no rows (only a header line)")
    if (!rows.any { it[0].split == 'train' }) sheetError("train sheet ${name}: no assembly with split 'train'")
    if (!rows.any { it[0].split == 'val' }) sheetError("train sheet ${name}: no assembly with split 'val'")
    return rows
}
