#!/usr/bin/env nextflow
/*
 * chromaflow: genome assemblies → Helixer-layout h5 → Predmoter-compatible chromatin predictions →
 * bigWig tracks; expression matrices → GENIE3 networks; every stage benchmarked; a MultiQC report.
 *
 *   nextflow run main.nf -profile test --outdir out                 # embedded test data
 *   nextflow run main.nf -profile slurm_gpu --input sheet.csv --model model.ckpt --outdir results
 *   nextflow run main.nf -profile test --mode train --outdir out    # train a tiny model (docs/training.md)
 *
 * PIPELINE_INITIALISATION (--help, parameters, the mode's sheet) → the mode's workflow → PIPELINE_COMPLETION.
 * See README.md and docs/usage.md. Every parameter rule is in nextflow_schema.json.
 */
nextflow.enable.dsl = 2

include { PIPELINE_INITIALISATION } from './subworkflows/local/utils_chromaflow'
include { PIPELINE_COMPLETION     } from './subworkflows/local/utils_chromaflow'
include { CHROMAFLOW              } from './workflows/chromaflow'
include { TRAIN_MODEL             } from './workflows/train'

workflow {
    PIPELINE_INITIALISATION()
    if (params.help) {
        return
    }
    // the schema lists the modes: predict reads the samplesheet, train the train sheet (docs/training.md)
    if (params.mode == 'train') {
        TRAIN_MODEL(PIPELINE_INITIALISATION.out.samplesheet)
    } else if (params.mode == 'predict') {
        CHROMAFLOW(PIPELINE_INITIALISATION.out.samplesheet)
    }
    PIPELINE_COMPLETION(params.outdir)
}
