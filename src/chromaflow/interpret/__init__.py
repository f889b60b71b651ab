"""Why is a region open: contribution scores of a Predmoter-compatible model (``chromaflow attribute``), and which
motifs it learned (``chromaflow discover-motifs``).

Modules: :mod:`.regions` (the BED/narrowPeak regions), :mod:`.genome` (FASTA or genome h5 records as base codes),
:mod:`.methods` (the target and the two methods: ISM, Integrated Gradients via captum), :mod:`.core` (the command's
options, validated, and the run), :mod:`.cli_attribute` (the command); the motifs the model learned
(``chromaflow discover-motifs``): :mod:`.contributions` (attribute's output read back), :mod:`.discover` (TF-MoDISco,
TOMTOM, the outputs), :mod:`.report` (the page of logos), :mod:`.cli_discover`. See docs/interpret.md.
"""
