/*
 * --mode train: assemblies + reads (BAM or bigWig) per dataset and split → genome h5 with coverage → a trained,
 * Predmoter-compatible model → its evaluation → optionally predictions and tracks from the new model.
 *
 *   FASTA2H5 (per assembly) → ADD_COVERAGE (per assembly, all its datasets) → TRAIN (process_gpu) → EVALUATE
 *   [--train_predict: PREDICT + BIGWIG of the val/test assemblies with the new best.ckpt, and PEAKS on their
 *   predicted tracks with --cutoff auto against their measured coverage (ADD_COVERAGE's h5)] → REPORTING
 *
 * take: ch_rows  channel of [meta (id, species, split), [fasta:, datasets:]] per assembly: parseTrainSheet
 *                (subworkflows/local/utils_chromaflow/samplesheet.nf) reads the sheet (--train_sheet; docs/training.md),
 *                one spec per dataset with its files and indexes
 */
include { FASTA2H5     } from '../modules/local/fasta2h5'
include { ADD_COVERAGE; coverageInput } from '../modules/local/add_coverage'
include { TRAIN        } from '../modules/local/train'
include { EVALUATE     } from '../modules/local/evaluate'
include { PREDICT      } from '../modules/local/predict'
include { TRACKS       } from '../subworkflows/local/tracks'
include { REPORTING    } from '../subworkflows/local/reporting'

workflow TRAIN_MODEL {
    take:
    ch_rows

    main:
    ch_versions = Channel.empty()
    ch_metrics  = Channel.empty()   // [meta, metrics JSON(s)] of every task, annotated by REPORTING

    FASTA2H5(ch_rows.map { meta, files -> [meta, files.fasta] })
    ch_versions = ch_versions.mix(FASTA2H5.out.versions)
    ch_metrics  = ch_metrics.mix(FASTA2H5.out.metrics)

    ch_cov_in = FASTA2H5.out.h5
        .join(ch_rows.map { meta, files -> [meta, files.datasets] })
        .map { meta, h5, specs -> coverageInput(meta, h5, specs) }
    ADD_COVERAGE(ch_cov_in)
    ch_versions = ch_versions.mix(ADD_COVERAGE.out.versions)
    ch_metrics  = ch_metrics.mix(ADD_COVERAGE.out.metrics)

    ch_h5 = ADD_COVERAGE.out.h5
    ch_train = ch_h5.filter { meta, h5 -> meta.split == 'train' }.map { meta, h5 -> h5 }.collect(sort: true).map { [it] }
    ch_val   = ch_h5.filter { meta, h5 -> meta.split == 'val' }.map { meta, h5 -> h5 }.collect(sort: true).map { [it] }
    ch_init  = params.train_init ? Channel.value(file(params.train_init, checkIfExists: true)) : Channel.value([])
    // the model predicts the sheet's datasets, in the order they first appear (chromaflow train's own default is
    // Predmoter's pair atacseq h3k4me3, which a sheet of ATAC-seq alone does not hold)
    ch_train_meta = ch_rows.flatMap { meta, files -> files.datasets.collect { spec -> spec.dataset } }
        .unique().toList()
        .map { ds -> [id: params.train_name, datasets: ds] }
    TRAIN(ch_train_meta.combine(ch_train).combine(ch_val), ch_init)
    ch_versions = ch_versions.mix(TRAIN.out.versions)
    ch_metrics  = ch_metrics.mix(TRAIN.out.metrics)

    ch_eval = ch_h5.filter { meta, h5 -> meta.split != 'train' }.map { meta, h5 -> h5 }.collect(sort: true).map { [it] }
    EVALUATE(TRAIN.out.best.combine(ch_eval))
    ch_versions = ch_versions.mix(EVALUATE.out.versions)
    ch_metrics  = ch_metrics.mix(EVALUATE.out.metrics)

    if (params.train_predict) {
        ch_model = TRAIN.out.best.map { meta, ckpt -> ckpt }.first()
        ch_pred_in = ch_h5.filter { meta, h5 -> meta.split != 'train' }
            .map { meta, h5 -> [[id: meta.id, species: meta.species, shard: 1, shards: 1], h5, []] }  // no FASTA index: an h5
        PREDICT(ch_pred_in, ch_model)
        ch_versions = ch_versions.mix(PREDICT.out.versions)
        ch_metrics  = ch_metrics.mix(PREDICT.out.metrics)
        // tracks and peaks of the predicted assemblies: each has measured coverage (its h5 from ADD_COVERAGE, the one
        // PREDICT read), so PEAKS's cutoff is the F1-best against the measured peaks; the sheet's FASTA gives the
        // genome files and a single-file hub
        if (!params.skip_tracks) {
            TRACKS(
                PREDICT.out.predictions.map { meta, p -> [meta.id, meta.subMap(['id', 'species']), p] }
                    .join(ch_h5.map { meta, h5 -> [meta.id, h5] })
                    .join(ch_rows.map { meta, files -> [meta.id, files.fasta] })
                    .map { id, meta, p, h5, fasta -> [meta, p, h5, fasta] },
                Channel.empty()
            )
            ch_versions = ch_versions.mix(TRACKS.out.versions)
            ch_metrics  = ch_metrics.mix(TRACKS.out.metrics)
        }
    }

    REPORTING(ch_versions, ch_metrics, Channel.empty(), Channel.empty())   // no review pages or motifs in train mode

    emit:
    model      = TRAIN.out.best
    evaluation = EVALUATE.out.tsv
    versions   = REPORTING.out.versions
}
