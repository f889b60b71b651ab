"""chromaflow: genome assemblies to predicted chromatin tracks and gene-regulatory networks.

One package per pipeline stage (``fasta2h5``, ``predict``, ``bigwig``, ``peaks``, ``genie3``, ...) around a shared
genome core (``genome``), plus small shared modules, one concern each: ``errors`` (the one error type; the only one
most of the package imports), ``outputs`` (atomic outputs, locks, the output rule), ``signals``, ``progress``,
``metrics``, ``inputs``, ``sharding``, ``cli_options``. The package knows nothing of Nextflow; the pipeline calls
the ``chromaflow`` command line (``chromaflow.cli``).
"""

__version__ = "0.1.0"
