/*
 * Train (or fine-tune with --init) a Predmoter-compatible model on the training and validation genome h5 files.
 * Labelled process_gpu: profiles give it GPUs (accelerator = --train_gpus); --devices is the accelerator request,
 * so several GPUs on one node train with DDP. Where no GPU is visible (--train_device auto) it trains on the CPU.
 */
process TRAIN {
    tag "${meta.id}"
    label 'process_medium'
    label 'process_gpu'

    input:
    tuple val(meta), path(train_h5, stageAs: 'input/train/*'), path(val_h5, stageAs: 'input/val/*')
    path init   // fine-tuning checkpoint, or [] for a new model

    output:
    tuple(val(meta), path("${prefix}/best.ckpt")             , emit: best)
    tuple(val(meta), path("${prefix}/last.ckpt")             , emit: last)
    tuple(val(meta), path("${prefix}/metrics.tsv")           , emit: epochs)
    tuple(val(meta), path("${prefix}.train.metrics.json")    , emit: metrics)
    path("versions.yml"                                      , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args    = task.ext.args ?: ''
    prefix      = task.ext.prefix ?: "${meta.id}"
    def devices = task.accelerator ? (task.accelerator.request as int) : 1
    def threads = Math.max(1, (task.cpus as int).intdiv(devices))
    def initArg = init ? "--init ${init}" : ''
    // meta.datasets: the train sheet's datasets (workflows/train.nf), unless ext.args names its own; not on a
    // resumed attempt (the checkpoint keeps its datasets)
    def dsArg   = meta.datasets && !(args =~ /--datasets\b/) ? "--datasets ${meta.datasets.join(' ')}" : ''
    // a retry (exit 130-145: SIGTERM of a scheduler's time limit or a preemption) continues the stopped attempt:
    // `chromaflow train` saved last.ckpt after each epoch and exits 128 + signal. Its folder is copied from the
    // previous attempt's work directory when this task can see it (always without containers; with containers
    // only where the work directory is mounted), else the attempt starts afresh.
    def previous = task.attempt > 1 && task.previousTrace ? (task.previousTrace.get('workdir') ?: '') : ''
    """
    export CHROMAFLOW_TASK_NAME="${task.process} (${task.tag})"   # the trace's task name, recorded in the metrics JSON
    start="--force ${initArg} ${dsArg}"
    if [ -n "${previous}" ] && [ -f "${previous}/${prefix}/last.ckpt" ]; then
        rm -rf ${prefix} && cp -r "${previous}/${prefix}" ${prefix}
        start="--resume ${prefix}/last.ckpt"
        echo "TRAIN ${meta.id}: attempt ${task.attempt} continues from ${previous}/${prefix}/last.ckpt" >&2
    fi
    chromaflow train \\
        --input-dir input \\
        --out ${prefix} \\
        --devices ${devices} \\
        --threads ${threads} \\
        --metrics ${prefix}.train.metrics.json \\
        \$start \\
        ${args}

    chromaflow versions "${task.process}" torch lightning >| versions.yml
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}"
    """
    mkdir -p ${prefix}
    touch ${prefix}/best.ckpt ${prefix}/last.ckpt ${prefix}/metrics.tsv
    echo '{"stage": "train", "stub": true}' >| ${prefix}.train.metrics.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
