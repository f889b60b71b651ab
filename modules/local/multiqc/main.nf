/*
 * MultiQC report of the run: the benchmark stage's custom content (*_mqc.tsv / *_mqc.json) and the software
 * versions of every process (staged as *_mqc_versions.yml, which MultiQC lists in its "Software Versions"
 * section). Report title and section order come from the MultiQC config file (assets/multiqc_config.yml).
 */
process MULTIQC {
    label 'process_single'

    input:
    path(multiqc_files, stageAs: 'mqc/?/*')
    path(versions, stageAs: 'mqc/chromaflow_software_mqc_versions.yml')
    path multiqc_config

    output:
    path("${prefix}.html"      , emit: report)
    path("${prefix}_data"      , emit: data)
    path("versions.yml"        , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args   = task.ext.args ?: ''
    prefix     = task.ext.prefix ?: 'multiqc_report'
    def config = multiqc_config ? "--config ${multiqc_config}" : ''
    """
    multiqc \\
        --force \\
        --no-ansi \\
        --filename ${prefix}.html \\
        ${config} \\
        ${args} \\
        mqc

    cat <<-END_VERSIONS >| versions.yml
    "${task.process}":
        multiqc: \$(multiqc --version | sed 's/.*version //')
    END_VERSIONS
    """

    stub:
    prefix = task.ext.prefix ?: 'multiqc_report'
    """
    mkdir -p ${prefix}_data
    touch ${prefix}.html ${prefix}_data/multiqc.log
    printf '"%s":\\n    multiqc: stub\\n' "${task.process}" >| versions.yml
    """
}
