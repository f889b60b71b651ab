"""Gene annotation (GFF3 / GTF) and per-gene promoter accessibility (``chromaflow gene-accessibility``).

``gff``: a streaming GFF3/GTF reader of genes or transcripts (tested against gffutils); ``windows``: strand-aware
TSS windows; ``accessibility``: window statistics from a predictions h5 or bigWig tracks.
"""
