"""Two small motif files, the same two motifs (CF1.1 alpha, CF2.1 beta) in JASPAR and MEME format, for the motif
tests (readers, scanner, the inputs of other tools)."""

JASPAR = """>CF1.1 alpha
A [ 10  0  0  2 ]
C [  0 10  0  2 ]
G [  0  0 10  2 ]
T [  0  0  0  4 ]
>CF2.1 beta
A [ 1 9 ]
C [ 3 0 ]
G [ 3 1 ]
T [ 3 0 ]
"""

MEME = """MEME version 4

ALPHABET= ACGT

strands: + -

Background letter frequencies
A 0.25 C 0.25 G 0.25 T 0.25

MOTIF CF1.1 alpha
letter-probability matrix: alength= 4 w= 4 nsites= 10 E= 0
1.0 0.0 0.0 0.0
0.0 1.0 0.0 0.0
0.0 0.0 1.0 0.0
0.2 0.2 0.2 0.4

MOTIF CF2.1 beta
letter-probability matrix: alength= 4 w= 2 nsites= 10 E= 0
0.1 0.3 0.3 0.3
0.9 0.0 0.1 0.0
"""
