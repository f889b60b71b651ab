#!/usr/bin/env nextflow
/*
 * chromaflow: genome assemblies → Helixer-layout h5 → Predmoter-compatible chromatin predictions →
 * bigWig tracks; expression matrices → GENIE3 networks; every stage benchmarked; a MultiQC report.
 *
 *   nextflow run main.nf -profile test --outdir out                 # embedded test data
 *   nextflow run main.nf -profile slurm_gpu --input sheet.csv --model model.ckpt --outdir results
 *   nextflow run main.nf -profile test --mode train --outdir out    # train a tiny model (docs/training.md)
 *
 * See README.md and docs/usage.md. Every parameter rule is in nextflow_schema.json.
 */
nextflow.enable.dsl = 2

include { CHROMAFLOW         } from './workflows/chromaflow'
include { parseSamplesheet   } from './subworkflows/local/samplesheet'
include { validateParameters } from './subworkflows/local/utils_chromaflow'
include { paramsHelp         } from './subworkflows/local/utils_chromaflow'
include { samplesheetParam   } from './subworkflows/local/utils_chromaflow'
include { samplesheetOptions } from './subworkflows/local/utils_chromaflow'
include { PIPELINE_COMPLETION } from './subworkflows/local/utils_chromaflow'
include { TRAIN_MODEL        } from './workflows/train'
include { parseTrainSheet    } from './workflows/train'

workflow {
    def schema = "${projectDir}/nextflow_schema.json"
    if (params.help) {
        log.info(paramsHelp(schema))
        return
    }
    validateParameters(schema)

    // --mode train reads its own sheet (assemblies + reads per dataset and split; docs/training.md)
    if (params.mode == 'train') {
        def trainRows = parseTrainSheet(params.train_sheet)
        log.info("chromaflow ${workflow.manifest.version} (--mode train): training '${params.train_name}' on ${trainRows.size()} assembl${trainRows.size() == 1 ? 'y' : 'ies'} from ${params.train_sheet} → ${params.outdir}")
        TRAIN_MODEL(trainRows)
        PIPELINE_COMPLETION(params.outdir)
        return
    }

    def sheet = samplesheetParam()
    def rows = parseSamplesheet(sheet, samplesheetOptions(schema))
    log.info("chromaflow ${workflow.manifest.version} (--mode ${params.mode}): ${rows.size()} assembl${rows.size() == 1 ? 'y' : 'ies'} from ${sheet} → ${params.outdir}")
    // optional files are [] in channels (the nf-core convention for an absent path input)
    def ch_samplesheet = Channel.fromList(rows.collect { r -> [r[0], r[1], r[2] ?: [], r[3] ?: []] })

    // the other modes read the samplesheet (the schema lists the modes)
    if (params.mode == 'predict') {
        CHROMAFLOW(ch_samplesheet)
    }

    PIPELINE_COMPLETION(params.outdir)
}
