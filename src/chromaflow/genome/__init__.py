"""The genome core every stage shares: reading FASTA (:mod:`.fasta`), the Helixer encoding and its limits
(:mod:`.encoding`), and cutting records into subsequences (:mod:`.layout`)."""
