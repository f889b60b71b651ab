"""``chromaflow review-page``: one self-contained HTML page per assembly (igv-reports) with the loci worth a look:
the strongest variant effects, the strongest peaks and the promoters of the genes with the highest and lowest
predicted accessibility (docs/review.md).

:mod:`.loci` reads the three tables and chooses the loci, :mod:`.slices` cuts the tracks to them, :mod:`.page`
hands both to igv-reports; :mod:`.cli` is the command.
"""
