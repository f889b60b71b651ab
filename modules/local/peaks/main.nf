/*
 * Peaks on the predicted tracks: `chromaflow peaks` once per dataset of the predictions h5 (narrowPeak, equal to
 * MACS3 bdgpeakcall on the strand-average track), added to the IGV session and UCSC hub BIGWIG wrote. The browser
 * files come in as BIGWIG's tracks (staged under tracks/); the updated igv_session.xml and hub stanzas (trackDb.txt,
 * or the single-file hub.txt of a BIGWIG given the FASTA) are new files here (the staged links are replaced,
 * BIGWIG's own files are left as they are). Cutoff, minimum length, maximum gap and smoothing come through ext.args.
 *
 * observed: a genome h5 with measured coverage (evaluation/<dataset>_coverage, ADD_COVERAGE's) or [] for none;
 * given, each dataset's cutoff is chosen against it (--observed; train mode sets meta.observed, and ext.args then
 * says --cutoff auto), recorded in the summary and metrics JSON.
 */
process PEAKS {
    tag "${meta.id}"
    label 'process_low'

    input:
    tuple val(meta), path(predictions, arity: '1..*'), path(tracks, stageAs: 'tracks/*'), path(observed, stageAs: 'observed/*')

    output:
    tuple(val(meta), path("tracks/*.{narrowPeak,bb}")             , emit: peaks)
    tuple(val(meta), path("tracks/*.peaks.json")                  , emit: summary)
    // includeInputs: the updated files carry the names of the staged ones they replace
    tuple(val(meta), path("tracks/{igv_session.xml,trackDb.txt,hub.txt}", includeInputs: true), emit: browser, optional: true)
    tuple(val(meta), path("*.peaks.metrics.json")                 , emit: metrics)
    path("versions.yml"                                           , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    def obs  = observed ? "--observed ${observed}" : ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    """
    export CHROMAFLOW_TASK_NAME="${task.process} (${task.tag})"   # the trace's task name, recorded in the metrics JSON
    browser=""
    if [ -e tracks/igv_session.xml ]; then browser="--browser-dir tracks"; fi
    datasets=\$(python3 -c 'import sys, h5py; print(" ".join(x.decode() for x in h5py.File(sys.argv[1], "r")["prediction/datasets"][()]))' ${predictions[0]})
    for ds in \$datasets; do
        chromaflow peaks \\
            --predictions ${predictions[0]} \\
            --dataset "\$ds" \\
            --out "tracks/${prefix}_\${ds}.narrowPeak" \\
            --summary "tracks/${prefix}_\${ds}.peaks.json" \\
            --name "${prefix}_\${ds}" \\
            --threads ${task.cpus} \\
            --metrics "${prefix}_\${ds}.peaks.metrics.json" \\
            \$browser \\
            --force \\
            ${args} \\
            ${obs}
    done

    chromaflow versions "${task.process}" h5py numpy >| versions.yml
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}"
    """
    mkdir -p tracks
    touch tracks/${prefix}_stub.narrowPeak
    echo '{"stub": true}' >| tracks/${prefix}_stub.peaks.json
    echo '{"stage": "peaks", "stub": true}' >| ${prefix}_stub.peaks.metrics.json
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
