#!/usr/bin/env nextflow
/*
 * chromaflow: genome assemblies → Helixer-layout h5 → Predmoter-compatible chromatin predictions →
 * bigWig tracks; expression matrices → GENIE3 networks; every stage benchmarked.
 *
 *   nextflow run main.nf -profile test                     # embedded test data
 *   nextflow run main.nf -profile slurm_gpu --genomes sheet.csv --model model.ckpt
 *
 * See README.md and docs/usage.md.
 */
nextflow.enable.dsl = 2

include { CHROMAFLOW       } from './workflows/chromaflow'
include { parseSamplesheet } from './subworkflows/local/samplesheet'
include { TRAIN_MODEL; parseTrainSheet } from './workflows/train'

def helpText() {
    """
    Usage: nextflow run main.nf -profile <local|slurm|slurm_gpu|docker|singularity|apptainer|gpu|test> --genomes sheet.csv [--model M.ckpt] [options]

      --genomes PATH         CSV samplesheet: id,fasta[,species,expression,regulators,expression_layout]
      --outdir DIR           results folder (default: results)
      --model PATH|URL       Predmoter checkpoint (.ckpt); required unless --skip_predict
      --predict_shards N     prediction tasks per assembly (integer or 'auto')
      --track_strand S       avg | + | - | all          --track_format bigwig | bedgraph
      --skip_predict / --skip_tracks / --skip_genie3 / --skip_benchmark
      --mode train --train_sheet S.csv   train a model from reads (docs/training.md)

    All parameters: docs/usage.md and nextflow_schema.json.
    """.stripIndent()
}

def validateParams() {
    def problems = []
    if (!(params.h5_compression in ['gzip', 'lzf'])) problems << "--h5_compression must be gzip or lzf (got '${params.h5_compression}')"
    if (!(params.subsequence_length.toString().isInteger()) || (params.subsequence_length as int) <= 0) problems << "--subsequence_length must be a positive integer (got '${params.subsequence_length}')"
    if (!(params.predict_device in ['auto', 'cpu', 'cuda'])) problems << "--predict_device must be auto, cpu or cuda (got '${params.predict_device}')"
    if (!(params.predict_precision in ['fp32', 'bf16'])) problems << "--predict_precision must be fp32 or bf16 (got '${params.predict_precision}')"
    def shards = params.predict_shards.toString()
    if (!(shards == 'auto' || (shards.isInteger() && (shards as int) >= 1))) problems << "--predict_shards must be a positive integer or 'auto' (got '${shards}')"
    if (!(params.track_format in ['bigwig', 'bedgraph'])) problems << "--track_format must be bigwig or bedgraph (got '${params.track_format}')"
    if (!(params.track_strand in ['avg', '+', '-', 'all'])) problems << "--track_strand must be avg, +, - or all (got '${params.track_strand}')"
    if (params.track_window_size != null && !(params.track_window_size.toString().isInteger() && (params.track_window_size as int) > 0)) problems << "--track_window_size must be a positive integer (got '${params.track_window_size}')"
    if (params.track_blacklist && !file(params.track_blacklist).exists()) problems << "--track_blacklist: file not found: ${params.track_blacklist}"
    if (!(params.genie3_tree_method in ['RF', 'ET'])) problems << "--genie3_tree_method must be RF or ET (got '${params.genie3_tree_method}')"
    if (!(params.genie3_layout in ['genes-x-samples', 'samples-x-genes'])) problems << "--genie3_layout must be genes-x-samples or samples-x-genes (got '${params.genie3_layout}')"
    if (!(params.genie3_chunk_size.toString().isInteger() && (params.genie3_chunk_size as int) >= 1)) problems << "--genie3_chunk_size must be a positive integer (got '${params.genie3_chunk_size}')"
    if (!(params.mode in ['predict', 'train'])) problems << "--mode must be predict or train (got '${params.mode}')"
    if (params.mode == 'train') {
        if (params.train_init && !file(params.train_init).exists()) problems << "--train_init: file not found: ${params.train_init}"
        if (problems) error(problems.join('\n'))
        return
    }
    if (!params.skip_predict && !params.test_model && !params.model) problems << "--model is required (a Predmoter .ckpt path or https URL), or use --skip_predict"
    if (params.model && !params.test_model && !(params.model ==~ /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/.*/) && !file(params.model).exists()) problems << "--model: file not found: ${params.model}"
    if (problems) error(problems.join('\n'))
}

workflow {
    if (params.help) {
        log.info helpText()
        return
    }
    validateParams()
    if (params.mode == 'train') {
        def trainRows = parseTrainSheet(params.train_sheet)
        log.info "chromaflow ${workflow.manifest.version}: training '${params.train_name}' on ${trainRows.size()} assembl${trainRows.size() == 1 ? 'y' : 'ies'} from ${params.train_sheet} → ${params.outdir}"
        TRAIN_MODEL(trainRows)
        return
    }
    def rows = parseSamplesheet(params.genomes)
    log.info "chromaflow ${workflow.manifest.version}: ${rows.size()} assembl${rows.size() == 1 ? 'y' : 'ies'} from ${params.genomes} → ${params.outdir}"
    CHROMAFLOW(rows)
}

workflow.onComplete {
    if (workflow.success) {
        log.info "chromaflow: done in ${workflow.duration}. Results: ${params.outdir}  (reports: ${params.outdir}/pipeline_info)"
    } else {
        log.error "chromaflow: failed. See ${params.outdir}/pipeline_info and .nextflow.log"
    }
}
