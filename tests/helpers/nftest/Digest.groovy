import groovy.json.JsonSlurper

/**
 * Content digests for nf-test snapshots of files whose bytes are not reproducible (h5 attributes with a time
 * stamp, gzip headers): see tests/helpers/nftest/digest.py. nf-test runs from the repository root (nf-test.config).
 *
 *   snapshot(Digest.h5(path), Digest.bigwig(path), Digest.gz(path), Digest.npz(path)).match()
 *
 * Each call starts Python once; Digest.all(kind, paths) digests several files of one kind in one start (a list, in
 * the order given): def (a, b) = Digest.all('h5', [fileA, fileB])
 */
class Digest {

    static Object run(String kind, Object path) {
        def script = new File(System.getProperty('user.dir'), 'tests/helpers/nftest/digest.py').absolutePath
        def paths = (path instanceof Collection ? path : [path]).collect { it.toString() }
        def proc = (['python3', script, kind] + paths).execute()
        def out = new StringBuilder()
        def err = new StringBuilder()
        proc.waitForProcessOutput(out, err)
        if (proc.exitValue() != 0) {
            throw new IllegalStateException("digest.py ${kind} ${path} failed: ${err}")
        }
        return new JsonSlurper().parseText(out.toString())
    }

    static Map h5(Object path)     { (Map) run('h5', path) }
    static Map bigwig(Object path) { (Map) run('bigwig', path) }
    static Map npz(Object path)    { (Map) run('npz', path) }
    static Map gz(Object path)     { (Map) run('gz', path) }
    static Map ckpt(Object path)   { (Map) run('ckpt', path) }

    /** The digests of several files of one kind ('h5', 'ckpt', ...), in one Python start: a list in their order. */
    static List all(String kind, Collection paths) {
        def out = run(kind, paths as List)
        return paths.size() == 1 ? [out] : (List) out
    }

    /** The file's name (not its work-directory path), for snapshots that list outputs. */
    static String name(Object path) { new File(path.toString()).name }
}
