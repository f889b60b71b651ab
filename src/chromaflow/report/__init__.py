"""Benchmark reporting: the pipeline's end-of-run report (``chromaflow benchmark-report``) and the settings sweep
(``chromaflow bench``)."""
