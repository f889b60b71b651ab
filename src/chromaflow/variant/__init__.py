"""``chromaflow variant-effect``: predicted chromatin effects of VCF variants."""
