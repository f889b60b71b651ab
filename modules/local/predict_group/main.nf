/*
 * Predmoter-compatible prediction of several whole (unsharded) assemblies in one task, one after the other
 * (chromaflow predict --group): the task pays torch's import, the model load and the device start once instead of
 * once per assembly. Each assembly gets the file a PREDICT task would write for it (<id>_predictions.h5, the same
 * bytes) and its own metrics JSON. workflows/chromaflow.nf groups the assemblies of at most --predict_group_mbp
 * whose plan has one shard (groupBins, subworkflows/local/utils_chromaflow/parts.nf); larger ones and shards go to PREDICT.
 * Labelled process_gpu like PREDICT.
 *
 * metas: the members' meta maps (meta.predict_input 'h5' or 'fasta' as in PREDICT; meta.species for FASTA members);
 * genomes: their genome h5s or FASTAs in the same order, staged into in1/, in2/, ... (two FASTAs may share a name).
 */
process PREDICT_GROUP {
    tag "${metas.size()} assemblies: ${metas[0].id} .. ${metas[-1].id}"
    label 'process_medium'
    label 'process_gpu'

    input:
    tuple val(metas), path(genomes, stageAs: 'in?/*')
    path model

    output:
    tuple(val(metas), path("*_predictions.h5")        , emit: predictions)
    tuple(val(metas), path("*.predict.metrics.json")  , emit: metrics)
    path("versions.yml"                               , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args  = task.ext.args ?: ''
    def files = genomes instanceof List ? genomes : [genomes]
    // the --group table (chromaflow predict --help): one row per assembly, in the order of metas
    def rows  = ['input\tkind\tspecies\tout\tmetrics'] + [metas, files].transpose().collect { m, g ->
        def fasta = m.predict_input == 'fasta'
        [g, fasta ? 'fasta' : 'h5', fasta ? m.species : '', "${m.id}_predictions.h5", "${m.id}.predict.metrics.json"].join('\t')
    }
    """
    export CHROMAFLOW_TASK_NAME="${task.process} (${task.tag})"   # the trace's task name, recorded in the metrics JSONs
    printf '%s\\n' ${rows.collect { "'" + it + "'" }.join(' ')} >| predict_group.tsv
    chromaflow predict \\
        --group predict_group.tsv \\
        --model ${model} \\
        --threads ${task.cpus} \\
        --force \\
        ${args}

    chromaflow versions "${task.process}" torch >| versions.yml
    """

    stub:
    def ids = metas.collect { it.id }.join(' ')
    """
    for id in ${ids}; do
        touch \${id}_predictions.h5
        echo '{"stage": "predict", "stub": true}' >| \${id}.predict.metrics.json
    done
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
