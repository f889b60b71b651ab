/*
 * --mode train: assemblies + reads (BAM or bigWig) per dataset and split → genome h5 with coverage → a trained,
 * Predmoter-compatible model → its evaluation → optionally predictions and tracks from the new model.
 *
 *   FASTA2H5 (per assembly) → ADD_COVERAGE (per assembly, all its datasets) → TRAIN (process_gpu) → EVALUATE
 *   [--train_predict: PREDICT + BIGWIG of the val/test assemblies with the new best.ckpt]
 *
 * Sheet (--train_sheet, CSV, one row per reads file; relative paths are resolved against the sheet's folder):
 *   id        assembly id (letters, digits, . _ -); rows with the same id share split, fasta and species
 *   split     train | val | test (at least one train and one val assembly)
 *   fasta     the assembly (FASTA, plain or gzip)
 *   species   optional (≤ 25 ASCII bytes; default: the id)
 *   dataset   the coverage name the model predicts, e.g. atacseq, h3k4me3
 *   file      a coordinate-sorted BAM with its index beside it (.bai or .csi), or a bigWig (.bw / .bigwig)
 *   library   unstranded (default) | first | second (first/second-read-is-sense-strand); bigWig: unstranded
 *   shift     true | false (default): ATAC Tn5 shift, BAM + unstranded only
 * Files of one dataset of one assembly are replicates (one coverage column each) and must share kind, library, shift.
 */
include { FASTA2H5     } from '../modules/local/fasta2h5'
include { ADD_COVERAGE } from '../modules/local/add_coverage'
include { TRAIN        } from '../modules/local/train'
include { EVALUATE     } from '../modules/local/evaluate'
include { PREDICT      } from '../modules/local/predict'
include { BIGWIG       } from '../modules/local/bigwig'
include { BENCHMARK    } from '../modules/local/benchmark'
include { MULTIQC      } from '../modules/local/multiqc'
include { runTraceFile } from '../subworkflows/local/utils_chromaflow'
include { splitCsvLine; resolveSheetPath; sheetError } from '../subworkflows/local/samplesheet'

List<String> trainSheetColumns() { ['id', 'split', 'fasta', 'species', 'dataset', 'file', 'library', 'shift'] }

/*
 * Returns one row per assembly: [meta (id, species, split), fasta, specs, reads, indexes] (see ADD_COVERAGE).
 * Every problem stops the run with one line naming the sheet, the line number and the column.
 */
def parseTrainSheet(sheetPath) {
    if (!sheetPath) sheetError("--mode train needs --train_sheet: a CSV with columns ${trainSheetColumns().join(',')} (see docs/training.md)")
    def sheet = file(sheetPath.toString())
    def name = sheetPath.toString()
    if (!sheet.exists()) sheetError("train sheet ${name}: file not found")
    if (sheet.isDirectory()) sheetError("train sheet ${name}: is a directory, expected a CSV file")
    def text = new String(java.nio.file.Files.readAllBytes(sheet), 'UTF-8')
    if (text.startsWith('\uFEFF')) text = text.substring(1)
    def all = text.split(/\r?\n|\r/, -1) as List
    def last = all.findLastIndexOf { it.trim() != '' }
    def lines = last < 0 ? [] : all[0..last]   // trailing empty lines dropped
    if (!lines) sheetError("train sheet ${name}: file is empty (expected a header line '${trainSheetColumns().join(',')}')")
    def header = splitCsvLine(lines[0], "train sheet ${name} line 1").collect { it.toLowerCase() }
    def missing = ['id', 'split', 'fasta', 'dataset', 'file'].findAll { !(it in header) }
    if (missing) sheetError("train sheet ${name} line 1: missing required column(s): ${missing.join(', ')} (header is '${lines[0].trim()}')")
    def extra = header.findAll { !(it in trainSheetColumns()) }
    if (extra) sheetError("train sheet ${name} line 1: unknown column(s): ${extra.join(', ')} (allowed: ${trainSheetColumns().join(', ')})")
    def sheetDir = sheet.toAbsolutePath().getParent()
    def asm = [:]        // id -> [meta, fasta, line]
    def groups = [:]     // id -> dataset -> [kind, library, shift, files, indexes, line]
    lines.eachWithIndex { String line, int idx ->
        if (idx == 0) return
        int lineNo = idx + 1
        def where = "train sheet ${name} line ${lineNo}"
        if (line.trim() == '') sheetError("${where}: empty line")
        def fields = splitCsvLine(line, where)
        if (fields.size() != header.size()) sheetError("${where}: ${fields.size()} fields, but the header has ${header.size()}")
        def rec = [header, fields].transpose().collectEntries { [(it[0]): it[1]] }
        def id = rec.id
        if (!id) sheetError("${where}: column 'id' is empty")
        if (!(id ==~ /^[A-Za-z0-9][A-Za-z0-9._-]*$/)) sheetError("${where}: id '${id}' may only contain letters, digits, '.', '_' and '-'")
        if (!(rec.split in ['train', 'val', 'test'])) sheetError("${where}: column 'split' must be train, val or test (got '${rec.split}')")
        if (!rec.fasta) sheetError("${where}: column 'fasta' is empty")
        def fasta = resolveSheetPath(rec.fasta, sheetDir, where, 'fasta')
        def species = rec.species ?: id
        if (!(species ==~ /^[\x21-\x7E]{1,25}$/)) sheetError("${where}: species '${species}' must be 1-25 printable ASCII characters without spaces")
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
            g[ds] = [kind: kind, library: library, shift: shift, files: [reads], indexes: index ? [index] : [], line: lineNo]
        }
    }
    def rows = asm.collect { id, a ->
        def (meta, fasta, l) = a
        def specs = groups[id].collect { ds, s -> [dataset: ds, kind: s.kind, library: s.library, shift: s.shift, n: s.files.size()] }
        def reads = groups[id].values().collectMany { it.files }
        def indexes = groups[id].values().collectMany { it.indexes }
        [meta, fasta, specs, reads, indexes]
    }
    if (!rows) sheetError("train sheet ${name}: no rows (only a header line)")
    if (!rows.any { it[0].split == 'train' }) sheetError("train sheet ${name}: no assembly with split 'train'")
    if (!rows.any { it[0].split == 'val' }) sheetError("train sheet ${name}: no assembly with split 'val'")
    return rows
}

def annotateTrainMetrics(meta, json, extra = [:]) {
    def m = new groovy.json.JsonSlurper().parse(json.toFile())
    m.assembly = meta.id
    extra.each { k, v -> m[k] = v }
    m.remove('epochs')   // per-epoch detail stays in the TRAIN metrics file; the report wants one line per task
    return groovy.json.JsonOutput.toJson(m)
}

workflow TRAIN_MODEL {
    take:
    rows   // parseTrainSheet(...)

    main:
    ch_versions = Channel.empty()
    ch_metrics  = Channel.empty()
    ch_rows = Channel.fromList(rows)

    FASTA2H5(ch_rows.map { meta, fasta, specs, reads, idx -> [meta, fasta] })
    ch_versions = ch_versions.mix(FASTA2H5.out.versions)
    ch_metrics  = ch_metrics.mix(FASTA2H5.out.metrics.map { meta, j -> annotateTrainMetrics(meta, j) })

    ch_cov_in = FASTA2H5.out.h5
        .join(ch_rows.map { meta, fasta, specs, reads, idx -> [meta, specs, reads, idx] })
    ADD_COVERAGE(ch_cov_in)
    ch_versions = ch_versions.mix(ADD_COVERAGE.out.versions)
    ch_metrics  = ch_metrics.mix(ADD_COVERAGE.out.metrics.flatMap { meta, js -> (js instanceof List ? js : [js]).collect { annotateTrainMetrics(meta, it) } })

    ch_h5 = ADD_COVERAGE.out.h5
    ch_train = ch_h5.filter { meta, h5 -> meta.split == 'train' }.map { meta, h5 -> h5 }.collect(sort: true).map { [it] }
    ch_val   = ch_h5.filter { meta, h5 -> meta.split == 'val' }.map { meta, h5 -> h5 }.collect(sort: true).map { [it] }
    ch_init  = params.train_init ? Channel.value(file(params.train_init, checkIfExists: true)) : Channel.value([])
    TRAIN(Channel.of([id: params.train_name]).combine(ch_train).combine(ch_val), ch_init)
    ch_versions = ch_versions.mix(TRAIN.out.versions)
    ch_metrics  = ch_metrics.mix(TRAIN.out.metrics.map { meta, j -> annotateTrainMetrics(meta, j) })

    ch_eval = ch_h5.filter { meta, h5 -> meta.split != 'train' }.map { meta, h5 -> h5 }.collect(sort: true).map { [it] }
    EVALUATE(TRAIN.out.best.combine(ch_eval))
    ch_versions = ch_versions.mix(EVALUATE.out.versions)
    ch_metrics  = ch_metrics.mix(EVALUATE.out.metrics.map { meta, j -> annotateTrainMetrics(meta, j) })

    if (params.train_predict) {
        ch_model = TRAIN.out.best.map { meta, ckpt -> ckpt }.first()
        ch_pred_in = ch_h5.filter { meta, h5 -> meta.split != 'train' }
            .map { meta, h5 -> [[id: meta.id, species: meta.species, shard: 1, shards: 1], h5] }
        PREDICT(ch_pred_in, ch_model)
        ch_versions = ch_versions.mix(PREDICT.out.versions)
        ch_metrics  = ch_metrics.mix(PREDICT.out.metrics.map { meta, j -> annotateTrainMetrics(meta, j, [shard: meta.shard, shards: meta.shards]) })
        if (!params.skip_tracks) {
            ch_blacklist = params.track_blacklist ? Channel.value(file(params.track_blacklist, checkIfExists: true)) : Channel.value([])
            BIGWIG(PREDICT.out.predictions.map { meta, p -> [meta.subMap(['id', 'species']), p] }, ch_blacklist)
            ch_versions = ch_versions.mix(BIGWIG.out.versions)
            ch_metrics  = ch_metrics.mix(BIGWIG.out.metrics.map { meta, j -> annotateTrainMetrics(meta, j) })
        }
    }

    //
    // Versions, benchmark report (every task's metrics + this run's trace) and MultiQC, as in the predict mode
    //
    ch_versions_file = ch_versions
        .unique { it.text }
        .collectFile(name: 'software_versions.yml', sort: { it.text }, newLine: false)
    ch_multiqc_files = Channel.empty()
    if (!params.skip_benchmark) {
        def trace = runTraceFile()
        BENCHMARK(ch_metrics.collectFile(name: 'metrics.jsonl', newLine: true, sort: true), ch_versions_file, trace ?: [])
        ch_versions = ch_versions.mix(BENCHMARK.out.versions)
        ch_multiqc_files = BENCHMARK.out.multiqc
    }
    if (!params.skip_multiqc && !params.skip_benchmark) {  // MultiQC finds no results in the versions alone
        MULTIQC(
            ch_multiqc_files.collect().ifEmpty([]),
            ch_versions_file,
            file("${projectDir}/assets/multiqc_config.yml", checkIfExists: true)
        )
        ch_versions = ch_versions.mix(MULTIQC.out.versions)
    }
    ch_versions
        .unique { it.text }
        .collectFile(name: 'software_versions.yml', storeDir: "${params.outdir}/pipeline_info", sort: { it.text }, newLine: false)
        .set { ch_versions_published }

    emit:
    model      = TRAIN.out.best
    evaluation = EVALUATE.out.tsv
    versions   = ch_versions_published
}
