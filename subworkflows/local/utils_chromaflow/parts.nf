/*
 * Fan-out and gathering of an assembly's parts (prediction shards, variant shards, GENIE3 chunks), shared by the
 * stage subworkflows: the meta of a merged result, the gathering of n parts for their merge, and the bins of small
 * assemblies that PREDICT_GROUP predicts in one task.
 */

// meta without the keys of one shard / chunk (and of PREDICT's input kind): the meta of the merged result
def baseMeta(meta) {
    return meta.findAll { k, v -> !(k in ['shard', 'shards', 'chunk', 'chunks', 'predict_input']) }
}

/*
 * Bins of whole assemblies for PREDICT_GROUP: items [meta, genome, index, bp], already sorted by id, packed in that
 * order into consecutive bins of at most maxBp base pairs (an item larger than maxBp alone in its bin). The order is
 * fixed by the ids, so the same sheet gives the same bins and -resume finds the same tasks.
 */
def groupBins(items, double maxBp) {
    def bins = []
    def bin = []
    long total = 0
    items.each { item ->
        if (bin && total + item[3] > maxBp) {
            bins << bin
            bin = []
            total = 0
        }
        bin << item
        total += item[3]
    }
    if (bin) {
        bins << bin
    }
    return bins
}

/*
 * A grouped task's outputs back to one [meta, file] per assembly: the file named <meta.id><suffix>.
 */
def byAssembly(metas, files, String suffix) {
    def list = files instanceof List ? files : [files]
    return metas.collect { m ->
        def f = list.find { it.name == "${m.id}${suffix}".toString() }
        if (f == null) {
            error("chromaflow: internal error: no ${m.id}${suffix} among a PREDICT_GROUP task's outputs")
        }
        [m, f]
    }
}

/*
 * The parts of every assembly gathered for their merge: [meta, file] items whose meta carries `part` (1..n) and
 * `count` (n) → one [baseMeta, [files in part order]] per assembly, emitted as soon as its n parts are in.
 */
def gatherParts(ch, String part, String count) {
    return ch
        .map { meta, f -> [groupKey(baseMeta(meta), meta[count]), meta[part], f] }
        .groupTuple()
        .map { key, idx, files -> [key.getGroupTarget(), [idx, files].transpose().sort { it[0] }.collect { it[1] }] }
}

// A plan's JSON (PREDICT_PLAN, VARIANT_PLAN, GENIE3_PLAN) as a map.
def readJson(path) {
    return new groovy.json.JsonSlurper().parse(path.toFile())
}
