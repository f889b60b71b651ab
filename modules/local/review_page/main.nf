/*
 * A self-contained HTML review page of one assembly (chromaflow review-page, igv-reports): its strongest variant
 * effects (with the variants' ref/alt tracks), strongest peaks and the promoters of the genes with the highest and
 * lowest predicted accessibility, each a table row that moves the page's igv.js there, the predicted tracks shown
 * at every locus. Every input but the FASTA (+ .fai) may be [] (the page has fewer sections); with no locus at all
 * no page is written (optional output). How many loci of each kind and the flank come from ext.args.
 */
process REVIEW_PAGE {
    tag "${meta.id}"
    label 'process_single'

    input:
    // the FASTA and its index; every other input [] for none
    tuple val(meta), path(fasta), path(fai), path(tracks, stageAs: 'tracks/*'), path(peaks, stageAs: 'peaks/*'), path(effects, stageAs: 'variants/*'), path(variant_tracks, stageAs: 'variants/variant_tracks/*'), path(genes, stageAs: 'genes/*'), path(promoters, stageAs: 'promoters/*')

    output:
    tuple(val(meta), path("${prefix}.review.html"), emit: html, optional: true)
    path("versions.yml"                            , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    prefix   = task.ext.prefix ?: "${meta.id}"
    def opts = [
        tracks         ? "--tracks ${tracks}" : '',
        peaks          ? "--peaks ${peaks}" : '',
        effects        ? "--effects ${effects}" : '',
        variant_tracks ? "--variant-tracks ${variant_tracks}" : '',
        genes          ? "--genes ${genes}" : '',
        promoters      ? "--promoters ${promoters}" : '',
    ].findAll().join(' ')
    """
    chromaflow review-page --fasta ${fasta} --name ${meta.id} --out ${prefix}.review.html ${opts} ${args}

    chromaflow versions "${task.process}" igv-reports >| versions.yml
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}"
    """
    echo '<html><!-- REVIEW_PAGE stub --></html>' > ${prefix}.review.html
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
