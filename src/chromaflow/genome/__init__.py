"""The genome core every stage shares: reading FASTA (:mod:`.fasta`), the Helixer encoding and its limits
(:mod:`.encoding`), cutting records into subsequences (:mod:`.layout`), and reading and writing the one-row-chunked
datasets of a genome or predictions h5 in bounded blocks (:mod:`.h5rows`)."""
