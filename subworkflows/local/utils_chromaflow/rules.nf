/*
 * Run-level rules that several stage subworkflows read: whether INTERPRET runs, and where an assembly's motif prior
 * comes from. They live in this small file rather than in a subworkflow's main.nf because Nextflow compiles an
 * included file once per script that includes it (24.10: its module cache is keyed by the including script), together
 * with everything that file includes: NETWORK reading priorSource from GENES_AND_MOTIFS' main.nf compiled that
 * subworkflow, its two modules and INTERPRET with its two again in every launch (~0.75 CPU-s of a -stub test-profile
 * launch's ~12.5 with the test suite's JVM options; docs/performance.md).
 */

// whether INTERPRET runs: --interpret, on the peaks of predicted tracks (CHROMAFLOW calls it only then;
// GENES_AND_MOTIFS takes the learned motifs of an assembly with tf_families then)
def interpretRuns() {
    return params.interpret && !params.skip_predict && !params.skip_tracks && !params.skip_peaks
}

// 'learned' (tf_families, with INTERPRET's motifs), 'sheet' (the sheet's motifs and tf_motifs) or null: where an
// assembly's motif prior comes from (GENES_AND_MOTIFS: which MOTIF_PRIOR runs; NETWORK: which GENIE3 tasks wait for
// a prior)
def priorSource(files) {
    return interpretRuns() && files.tf_families ? 'learned' : (files.tf_motifs ? 'sheet' : null)
}
