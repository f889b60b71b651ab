"""Read coverage (BAM or bigWig) -> ``evaluation/<prefix>_coverage`` in a Helixer-layout genome h5.

``chromaflow add-coverage`` writes the datasets Helixer's ``add_ngs_coverage.py`` writes, with its counting
semantics (FORMATS.md §7.1), so that files made by either tool are interchangeable; see :mod:`.add` for the
design (atomic, streaming per genomic window, parallel counting and compression). Modules: :mod:`.core` (the
command's options, their checks and the run), :mod:`.add` (the update), :mod:`.layout` (rows and windows),
:mod:`.sources` (BAM and bigWig counting) and :mod:`.cli` (the command's arguments).
"""
