/*
 * Test driver: the configuration of the project in --root under each profile list in --profiles (separated by ';'),
 * rendered as `nextflow config <root> -profile <list> -flat` renders it, by the same Nextflow code (CmdConfig's
 * ConfigBuilder and its flat printer), all in one JVM instead of one launch each (~4 s of JVM start and
 * compilation a launch: the suite's time, issue 28). For each list it prints
 *   BEGIN<TAB><profiles>, the flat lines, END<TAB><profiles>     or     ERROR<TAB><profiles><TAB><message>
 * Used by tests/pipeline/test_containers.py and test_cloud_profiles.py, which also compare one rendering with
 * the real `nextflow config` command's output.
 */
// Nextflow's classes by name: the strict syntax (tests/pipeline/test_nftest_parse.py) knows no class of the runtime
def make(String name) {
    return Class.forName(name).getDeclaredConstructor().newInstance()
}

params.root = ''
params.profiles = ''

workflow {
    params.profiles.tokenize(';').each { profiles ->
        try {
            def cmd = make('nextflow.cli.CmdConfig')
            cmd.profile = profiles
            cmd.printFlatten = true
            def config = make('nextflow.config.ConfigBuilder')
                .setShowClosures(true)
                .setStripSecrets(true)
                .showMissingVariables(true)
                .setOptions(make('nextflow.cli.CliOptions'))
                .setBaseDir(java.nio.file.Paths.get(params.root))
                .setCmdConfig(cmd)
                .buildConfigObject()
            def out = new ByteArrayOutputStream()
            cmd.printFlatten0(config, out)
            println("BEGIN\t${profiles}")
            print(out.toString('UTF-8'))
            println("END\t${profiles}")
        } catch (Throwable e) {
            println("ERROR\t${profiles}\t${(e.message ?: e.class.name).replace('\n', '\\n')}")
        }
    }
}
