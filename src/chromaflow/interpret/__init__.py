"""Why is a region open: contribution scores of a Predmoter-compatible model (``chromaflow attribute``).

Modules: :mod:`.regions` (the BED/narrowPeak regions), :mod:`.genome` (FASTA or genome h5 records as base codes),
:mod:`.methods` (the target and the two methods: ISM, Integrated Gradients via captum), :mod:`.core` (the command's
options, validated, and the run), :mod:`.cli_attribute` (the command). See docs/interpret.md.
"""
