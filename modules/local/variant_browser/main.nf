/*
 * The top variants' ref/alt bigWigs (VARIANT_EFFECT / VARIANT_MERGE variant_tracks/) added to the IGV session and
 * UCSC hub of an assembly's tracks: the final browser files, after BIGWIG wrote them and PEAKS (when it runs) added
 * its peaks. The browser files come in staged under tracks/, the bigWigs under variants/variant_tracks/: the
 * published layout (<id>/tracks/ beside <id>/variants/), so the relative paths written are the published ones.
 * The updated igv_session.xml and hub stanzas (trackDb.txt, or the single-file hub.txt) are new files (the staged
 * links are replaced).
 */
process VARIANT_BROWSER {
    tag "${meta.id}"
    label 'process_single'

    input:
    tuple val(meta), path(browser, stageAs: 'tracks/*'), path(variant_tracks, stageAs: 'variants/variant_tracks/*')

    output:
    // includeInputs: the updated files carry the names of the staged ones they replace
    tuple(val(meta), path("tracks/{igv_session.xml,trackDb.txt,hub.txt}", includeInputs: true), emit: browser)
    path("versions.yml"                                                                , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    """
    chromaflow variant-browser --browser-dir tracks --name ${prefix} ${args} ${variant_tracks}

    chromaflow versions "${task.process}" >| versions.yml
    """

    stub:
    """
    mkdir -p tracks
    for f in igv_session.xml trackDb.txt hub.txt; do
        if [ -e tracks/\$f ]; then cp --remove-destination "\$(readlink -f tracks/\$f)" tracks/\$f; fi
    done
    echo '<!-- VARIANT_BROWSER stub: variant tracks -->' >> tracks/igv_session.xml
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
