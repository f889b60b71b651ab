"""Motif priors for GENIE3 (``chromaflow motif-prior``): motifs from JASPAR/MEME files or pyjaspar's bundled
database, a MOODS scan of promoter windows on both strands, and the (TF, target) prior table."""
