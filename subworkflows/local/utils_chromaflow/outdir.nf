/*
 * One run per output folder (issue 54 item 1; docs/usage.md, "One run per output folder"). Called by
 * PIPELINE_INITIALISATION once the sheet is read, before any task.
 *
 * The lock: <outdir>/.chromaflow.lock, a JSON record of the run that holds the folder (host, PID namespace, pid of
 * the driver JVM, run name, session id, launch folder, start time). It is created atomically: a complete temporary
 * file hard-linked to the name (an exclusive create where the file system has no hard links). The driver refreshes
 * its mtime every 30 s from a daemon thread (the heartbeat) and removes it when the run ends: workflow.onComplete
 * (after the last file is published) and a JVM shutdown hook (a run stopped in the script, Ctrl-C, SIGTERM). Not on
 * onError: Nextflow calls it at the first failed task, while finished tasks are still being published. A driver
 * killed with SIGKILL leaves the lock; the next run takes it over, with a warning, once its holder is provably gone:
 *   - on the same machine (host name and PID namespace): its pid runs no process, or one started after the lock;
 *   - on another machine: no heartbeat for staleAfterSeconds() (5 min; the hosts' clocks agree within a minute);
 *   - a run of the same session (-resume of the holder's run): unless its driver still runs on this machine.
 * Object stores (s3://, gs://, az://, any URL but file:) get no lock (no create-if-absent through Nextflow's file
 * systems there) and one warning line; their sample folders are checked as any other.
 *
 * The sample folders: <outdir>/<id>/.chromaflow_run.json names the run (session) that writes the folder. A folder
 * holding files of another session, or files without a stamp, is refused (one line naming it and that run) unless
 * --replace_results: then it is deleted whole and written anew. Checked for every id of the sheet under the lock,
 * before anything is deleted or stamped; a -resume (the same session) is the same run and goes on.
 */

// (The strict Nextflow syntax: no imports, loops or `finally`; java.nio.file's classes by their full names.)

def lockFileName() { '.chromaflow.lock' }
def stampFileName() { '.chromaflow_run.json' }

// a lock of another machine whose mtime is older than this is a dead run's (10 missed heartbeats)
def staleAfterSeconds() { 300 }

// the heartbeat's period, 30 s; CHROMAFLOW_LOCK_HEARTBEAT_S (1-60) shortens it for the tests
def heartbeatSeconds() {
    def env = System.getenv('CHROMAFLOW_LOCK_HEARTBEAT_S')
    return env?.isInteger() && env.toInteger() in 1..60 ? env.toInteger() : 30
}

// s3://, gs://, az://, http(s)://...: every URL but file:
def isObjectStore(String outdir) {
    return outdir ==~ '(?i)^[a-z][a-z0-9+.-]*://.*' && !outdir.toLowerCase().startsWith('file:')
}

def hostName() {
    try {
        return java.net.InetAddress.getLocalHost().getHostName()
    } catch (Exception e) {
        return System.getenv('HOSTNAME') ?: 'unknown'
    }
}

// pids are comparable only inside one PID namespace (a container on the same host has its own)
def pidNamespace() {
    try {
        return java.nio.file.Files.readSymbolicLink(java.nio.file.Paths.get('/proc/self/ns/pid')).toString()
    } catch (Exception e) {
        return ''
    }
}

// this run, as the lock and the stamps record it
def thisRun() {
    return [host: hostName(), pid_namespace: pidNamespace(), pid: ProcessHandle.current().pid(),
            run_name: workflow.runName, session: workflow.sessionId.toString(),
            launch_dir: workflow.launchDir.toString(), started: workflow.start.toString()]
}

// "run NAME (session S, host H, pid P, launched from D, started T)"; a stamp has no pid
def describeRun(Map r) {
    def pid = r.pid != null ? ", pid ${r.pid}" : ''
    return "run ${r.run_name} (session ${r.session}, host ${r.host}${pid}, launched from ${r.launch_dir}, started ${r.started})"
}

def toJson(Map record) {
    return groovy.json.JsonOutput.prettyPrint(groovy.json.JsonOutput.toJson(record)) + '\n'
}

// the record in a lock or stamp file; null when the file is gone, [:] when it is not a record (being written, damaged)
def readRecord(file) {
    def text = null
    try {
        text = new String(java.nio.file.Files.readAllBytes(file), 'UTF-8')
    } catch (java.nio.file.NoSuchFileException e) {
        return null
    }
    try {
        def rec = new groovy.json.JsonSlurper().parseText(text)
        return rec instanceof Map && rec.session ? rec : [:]
    } catch (Exception e) {
        return [:]
    }
}

/*
 * Creates `file` holding `text` unless it exists (true: created). A complete temporary file is hard-linked to the
 * name, so no reader ever sees a partial record; where hard links are not supported, an exclusive create.
 */
def createExclusive(file, String text) {
    def tmp = file.resolveSibling("${file.fileName}.${ProcessHandle.current().pid()}.${System.nanoTime()}.tmp")
    java.nio.file.Files.write(tmp, text.getBytes('UTF-8'))
    def created = null
    try {
        java.nio.file.Files.createLink(file, tmp)
        created = true
    } catch (java.nio.file.FileAlreadyExistsException e) {
        created = false
    } catch (Exception e) {
        java.nio.file.Files.deleteIfExists(tmp)
        if (!(e instanceof UnsupportedOperationException || e instanceof java.io.IOException)) {
            throw e
        }
        return java.nio.file.Files.exists(file, java.nio.file.LinkOption.NOFOLLOW_LINKS) ? false : createNew(file, text)
    }
    java.nio.file.Files.deleteIfExists(tmp)
    return created
}

// the exclusive create of a file system without hard links (a reader may see it before it is written)
def createNew(file, String text) {
    try {
        java.nio.file.Files.write(file, text.getBytes('UTF-8'), java.nio.file.StandardOpenOption.CREATE_NEW,
                                  java.nio.file.StandardOpenOption.WRITE)
        return true
    } catch (java.nio.file.FileAlreadyExistsException e) {
        return false
    }
}

// whether the holder's driver runs: its pid is alive and that process started no later than the holder's run
def driverAlive(Map holder) {
    if (!(holder.pid instanceof Number)) {
        return false  // no pid: not a driver's record
    }
    def proc = ProcessHandle.of((holder.pid as Number).longValue())
    if (!proc.isPresent()) {
        return false
    }
    def began = proc.get().info().startInstant()
    def started = null
    try {
        started = java.time.OffsetDateTime.parse(holder.started as String).toInstant()
    } catch (Exception e) {
        return true  // no start time to compare: the pid runs
    }
    return !began.isPresent() || !began.get().isAfter(started.plusSeconds(5))
}

// why the lock's holder is gone (a warning names it), or null while it may still run
def holderGone(Map holder, Map me, lock) {
    if (holder.host == me.host && holder.pid_namespace == me.pid_namespace) {
        return driverAlive(holder) ? null : "its driver (pid ${holder.pid}) is not running"
    }
    if (holder.session == me.session) {
        return 'this run resumes it (the same session) on another machine'
    }
    def age = (System.currentTimeMillis() - java.nio.file.Files.getLastModifiedTime(lock).toMillis()).intdiv(1000)
    return age > staleAfterSeconds() ? "no heartbeat for ${age} s (stale after ${staleAfterSeconds()} s)" : null
}

/*
 * Removes the lock of a gone holder (true: removed). Runs that find the same stale lock take turns: each removes it
 * only while it holds `<lock>.takeover` (an exclusive create, kept for milliseconds) and only if it still holds
 * that holder's record, so no run ever removes a lock another run has just taken. A takeover file older than a
 * minute is a run's killed in those milliseconds, and is removed.
 */
def removeStaleLock(lock, Map holder, Map me) {
    def guard = lock.resolveSibling("${lock.fileName}.takeover")
    if (!createExclusive(guard, toJson(me))) {
        try {
            if (System.currentTimeMillis() - java.nio.file.Files.getLastModifiedTime(guard).toMillis() > 60000) {
                java.nio.file.Files.deleteIfExists(guard)
            }
        } catch (java.nio.file.NoSuchFileException e) {
            // its run has finished its turn
        }
        sleep(100)
        return false
    }
    def removed = false
    try {
        if (readRecord(lock) == holder) {
            java.nio.file.Files.delete(lock)
            removed = true
        }
    } catch (Exception e) {
        java.nio.file.Files.deleteIfExists(guard)
        throw e
    }
    java.nio.file.Files.deleteIfExists(guard)
    return removed
}

/*
 * One attempt at `<dir>/.chromaflow.lock` (of `left`): true when this run holds it; the run stops with one line when
 * a live run holds it; otherwise (released meanwhile, a stale lock removed, a record being written) the next attempt.
 */
def lockAttempt(dir, lock, Map me, int left) {
    if (createExclusive(lock, toJson(me))) {
        return true
    }
    def holder = readRecord(lock)
    if (holder == null) {
        return false  // released meanwhile
    }
    if (!holder) {
        // an exclusive create being written (no hard links here), or a damaged file: a damaged one stays
        if (left > 1) {
            sleep(250)
            return false
        }
        error("chromaflow: --outdir ${dir} is locked by ${lock}, which holds no run record; if no run uses this folder, delete that file")
    }
    def gone = null
    try {
        gone = holderGone(holder, me, lock)
    } catch (java.nio.file.NoSuchFileException e) {
        return false  // released meanwhile
    }
    if (gone == null) {
        error("chromaflow: --outdir ${dir} is in use by ${describeRun(holder)}; wait for it to end or choose another --outdir (lock: ${lock})")
    }
    if (removeStaleLock(lock, holder, me)) {
        log.warn("chromaflow: taking over the lock of ${describeRun(holder)} on --outdir ${dir}: ${gone}")
    }
    return false
}

// takes `<dir>/.chromaflow.lock` for this run, or stops the run with one line naming the live holder
def takeLock(dir, Map me) {
    java.nio.file.Files.createDirectories(dir)
    def lock = dir.resolve(lockFileName())
    def attempts = 20
    def taken = (1..attempts).find { n -> lockAttempt(dir, lock, me, attempts - n + 1) }
    if (!taken) {
        error("chromaflow: --outdir ${dir}: could not take the lock ${lock} (other runs keep taking it)")
    }
    return lock
}

/*
 * Keeps the lock for the run's lifetime: the heartbeat (mtime refreshed every heartbeatSeconds(), daemon thread),
 * removed at workflow.onComplete, after the last file is published, and by a JVM shutdown hook (a run stopped in
 * the script or by a signal; a SIGKILL leaves it). Only this run's lock is ever refreshed or removed.
 */
def holdLock(lock, Map me) {
    def state = [released: new java.util.concurrent.atomic.AtomicBoolean(false),
                 lost: new java.util.concurrent.atomic.AtomicBoolean(false)]
    def beat = java.util.concurrent.Executors.newSingleThreadScheduledExecutor({ r ->
        def t = new Thread(r as Runnable, 'chromaflow-outdir-lock')
        t.setDaemon(true)
        return t
    } as java.util.concurrent.ThreadFactory)
    def period = heartbeatSeconds()
    beat.scheduleAtFixedRate({ -> refreshLock(lock, me, state) } as Runnable, period, period, java.util.concurrent.TimeUnit.SECONDS)
    def release = { ->
        if (state.released.compareAndSet(false, true)) {
            beat.shutdownNow()
            releaseLock(lock, me)
        }
    }
    workflow.onComplete { release.call() }
    Runtime.getRuntime().addShutdownHook(new Thread({ -> release.call() } as Runnable, 'chromaflow-outdir-unlock'))
}

// removes the lock if it is this run's
def releaseLock(lock, Map me) {
    try {
        def holder = readRecord(lock)
        if (holder?.session == me.session && holder?.pid == me.pid) {
            java.nio.file.Files.deleteIfExists(lock)
        }
    } catch (Exception e) {
        System.err.println("chromaflow: could not remove the lock ${lock}: ${e.message}")
    }
}

// one heartbeat: the lock's mtime set to now while the lock is this run's; one warning when it is not any more
def refreshLock(lock, Map me, Map state) {
    if (state.released.get() || state.lost.get()) {
        return
    }
    def why = null
    try {
        def holder = readRecord(lock)
        if (holder?.session == me.session && holder?.pid == me.pid) {
            java.nio.file.Files.setLastModifiedTime(lock, java.nio.file.attribute.FileTime.from(java.time.Instant.now()))
            return
        }
        why = "was ${holder ? 'taken over by ' + describeRun(holder) : 'removed'}; another run may write into this --outdir"
    } catch (Exception e) {
        why = "cannot be refreshed (${e.class.simpleName}: ${e.message})"
    }
    // the run's end removes the lock while a beat may be running: no warning then
    if (!state.released.get() && state.lost.compareAndSet(false, true)) {
        log.warn("chromaflow: the lock ${lock} of this run ${why}")
    }
}

// who holds a sample folder against this run: null when it is absent, empty but for a stamp, or this session's;
// else [text: what it holds, stamp: the other run's record, null when there is none]
def folderHolder(folder, Map me) {
    if (!java.nio.file.Files.exists(folder, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
        return null
    }
    if (!java.nio.file.Files.isDirectory(folder)) {
        return [text: 'something that is not a folder', stamp: null]
    }
    def stamp = readRecord(folder.resolve(stampFileName()))
    if (stamp?.session == me.session) {
        return null
    }
    def others = java.nio.file.Files.newDirectoryStream(folder).withCloseable { entries ->
        entries.findAll { p -> p.fileName.toString() != stampFileName() }
    }
    if (!others) {
        return null
    }
    return stamp ? [text: "the results of ${describeRun(stamp)}", stamp: stamp]
                 : [text: "files of an unknown run (no ${stampFileName()})", stamp: null]
}

// writes `text` to `file` whole: a temporary beside it renamed onto it (an object store's write is whole anyway)
def writeWhole(file, String text) {
    if (file.fileSystem != java.nio.file.FileSystems.getDefault()) {
        java.nio.file.Files.write(file, text.getBytes('UTF-8'))
        return
    }
    def tmp = file.resolveSibling(".${file.fileName}.${ProcessHandle.current().pid()}.tmp")
    java.nio.file.Files.write(tmp, text.getBytes('UTF-8'))
    java.nio.file.Files.move(tmp, file, java.nio.file.StandardCopyOption.ATOMIC_MOVE,
                             java.nio.file.StandardCopyOption.REPLACE_EXISTING)
}

// deletes a sample folder whole: renamed away first (atomic), so no part of it stays under its name
def deleteFolder(folder) {
    def target = folder
    if (folder.fileSystem == java.nio.file.FileSystems.getDefault()) {
        target = folder.resolveSibling(".${folder.fileName}.replaced.${ProcessHandle.current().pid()}.${System.nanoTime()}")
        java.nio.file.Files.move(folder, target, java.nio.file.StandardCopyOption.ATOMIC_MOVE)
    }
    if (!target.deleteDir() && java.nio.file.Files.exists(target, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
        log.warn("chromaflow: could not delete all of ${target}; delete it by hand")
    }
}

/*
 * Every sheet id's <outdir>/<id>/ checked before anything is changed: held by another run (or by files without a
 * stamp) -> one line naming the first such folder and its run, and the others' ids, unless `replace`; then those
 * folders are deleted whole. Every folder without this session's stamp gets one.
 */
def claimSampleFolders(dir, List ids, boolean replace, Map me) {
    def held = ids.collectEntries { id -> [(id): folderHolder(dir.resolve(id), me)] }.findAll { id, who -> who }
    if (held && !replace) {
        def first = held.keySet().first()
        def more = held.size() > 1 ? "; also ${(held.keySet() as List).drop(1).join(', ')}" : ''
        def stamp = held[first].stamp
        def resume = stamp ? "continue that run (-resume ${stamp.session} in ${stamp.launch_dir}), " : ''
        error("chromaflow: ${dir.resolve(first)} holds ${held[first].text}${more}. Nothing was run: " +
              "${resume}choose another --outdir, or add --replace_results to delete and rewrite these folders")
    }
    held.each { id, who ->
        log.warn("chromaflow: --replace_results: deleting ${dir.resolve(id)} (${who.text})")
        deleteFolder(dir.resolve(id))
    }
    def stamp = toJson(me.findAll { k, v -> k != 'pid' && k != 'pid_namespace' })
    ids.each { id ->
        def folder = dir.resolve(id)
        if (readRecord(folder.resolve(stampFileName()))?.session != me.session) {
            java.nio.file.Files.createDirectories(folder)
            writeWhole(folder.resolve(stampFileName()), stamp)
        }
    }
}

/*
 * Takes --outdir for this run (the lock, held until the run ends) and claims the sheet's sample folders, or stops
 * the run with one line. An object store gets no lock and one warning line.
 */
def claimOutdir(String outdir, List ids, boolean replace) {
    def dir = file(outdir, glob: false)
    def me = thisRun()
    try {
        if (isObjectStore(outdir)) {
            log.warn("chromaflow: --outdir ${outdir} is an object store: no lock is taken there (no atomic create); never start two runs into it at once")
        } else {
            holdLock(takeLock(dir, me), me)
        }
        claimSampleFolders(dir, ids, replace, me)
    } catch (java.io.IOException e) {
        error("chromaflow: --outdir ${outdir}: ${e.class.simpleName}: ${e.message}")
    }
}
