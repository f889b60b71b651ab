"""FASTA -> Helixer-layout genome HDF5: the conversion (:mod:`.convert`), the deflate engines for its chunks
(:mod:`.deflate`, with the onehot encoder's C kernel) and the ``chromaflow fasta2h5`` command (:mod:`.cli`)."""
