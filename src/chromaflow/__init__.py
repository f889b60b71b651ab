"""chromaflow: genome assemblies to predicted chromatin tracks and gene-regulatory networks.

One module per pipeline stage (``fasta2h5``, ``predict``, ``bigwig``, ``genie3``, ``bench``) plus
shared helpers in ``chromaflow.common``. The package knows nothing of Nextflow; the pipeline calls
the ``chromaflow`` command line (``chromaflow.cli``).
"""
__version__ = "0.1.0"
