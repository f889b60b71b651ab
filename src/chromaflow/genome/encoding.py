"""The Helixer genome encoding and its limits (FORMATS.md §1): one home for every rule the stages share.

``data/X`` holds float16 one-hot columns in the order C, A, T, G; IUPAC ambiguity codes spread the one over the
bases they stand for; padding (byte :data:`PAD`) is all zero. ``fasta2h5``, ``predict --fasta`` and
``fasta-layout`` check species and subsequence length with the functions here, so every command accepts and
refuses the same values with the same message.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import numpy as np

from ..utils.errors import ChromaflowError

#: Predmoter's and Helixer's subsequence length
DEFAULT_L = 21384
#: longest accepted --subsequence-length (a chunk of data/X is 8 bytes per position: 8 MiB here)
MAX_L = 1 << 20
#: data/species is S25
MAX_SPECIES_BYTES = 25
#: byte used for padding positions: encodes to all-zero columns
PAD = 0

#: byte -> complement byte (IUPAC, both cases; padding and anything else unchanged)
COMPLEMENT = np.arange(256, dtype=np.uint8)
for _a, _b in zip(b"ACGTRYKMBDHVSWN", b"TGCAYRMKVHDBSWN"):
    COMPLEMENT[_a] = _b
    COMPLEMENT[ord(chr(_a).lower())] = ord(chr(_b).lower())

_ONE, _HALF, _QUARTER, _THIRD = 0x3C00, 0x3800, 0x3400, 0x3548  # 1.0, 0.5, 0.25, float16(0.33)
_CODES = {  # symbol: (C, A, T, G)
    "C": (_ONE, 0, 0, 0),
    "A": (0, _ONE, 0, 0),
    "T": (0, 0, _ONE, 0),
    "G": (0, 0, 0, _ONE),
    "Y": (_HALF, 0, _HALF, 0),
    "R": (0, _HALF, 0, _HALF),
    "W": (0, _HALF, _HALF, 0),
    "S": (_HALF, 0, 0, _HALF),
    "K": (0, 0, _HALF, _HALF),
    "M": (_HALF, _HALF, 0, 0),
    "D": (0, _THIRD, _THIRD, _THIRD),
    "V": (_THIRD, _THIRD, 0, _THIRD),
    "H": (_THIRD, _THIRD, _THIRD, 0),
    "B": (_THIRD, 0, _THIRD, _THIRD),
    "N": (_QUARTER, _QUARTER, _QUARTER, _QUARTER),
}

#: (256, 4) uint16 float16 bit patterns of the columns C, A, T, G; row 0 (and every non-IUPAC byte) is all
#: zero = padding
LUT16 = np.zeros((256, 4), dtype=np.uint16)
for _sym, _cols in _CODES.items():
    LUT16[ord(_sym)] = _cols
    LUT16[ord(_sym.lower())] = _cols
#: the complement's columns: reversed column order (C,A,T,G -> G,T,A,C)
LUT16_RC = np.ascontiguousarray(LUT16[:, ::-1])


@functools.cache
def assembly_rules() -> dict[str, dict]:
    """The id and species rules (``schemas/assembly.json``, the file the pipeline's sheet reader reads too):
    {"id": {"pattern": ...}, "species": {"pattern": ..., "maxLength": 25}}."""
    return json.loads((Path(__file__).parent.parent / "schemas" / "assembly.json").read_text())["properties"]


def check_species(species: str, option: str = "--species") -> bytes:
    """The species as stored in data/species (S25: printable ASCII without spaces, 1..25 bytes, the samplesheet's
    rule: :func:`assembly_rules`), or a one-line error naming ``option``."""
    rule = assembly_rules()["species"]
    if not species or not species.isascii():
        raise ChromaflowError(f"{option} {species!r}: must be a non-empty ASCII string")
    if not re.fullmatch(rule["pattern"], species):
        raise ChromaflowError(f"{option} {species!r}: must be printable ASCII without spaces")
    sp = species.encode("ascii")
    if len(sp) > rule["maxLength"]:
        raise ChromaflowError(
            f"{option} {species!r} is {len(sp)} bytes long; the Helixer layout stores at most {MAX_SPECIES_BYTES} (S25)"
        )
    return sp


def check_length(L: int, option: str = "--subsequence-length") -> int:
    """The subsequence length, 1..:data:`MAX_L`, or a one-line error (the same cap for every command)."""
    if L < 1 or L > MAX_L:
        raise ChromaflowError(f"{option} {L}: must be between 1 and {MAX_L:,} (Predmoter's is {DEFAULT_L})")
    return int(L)
