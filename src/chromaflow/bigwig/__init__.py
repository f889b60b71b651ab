"""``chromaflow bigwig``: predictions h5 → bigWig / bedGraph tracks with Predmoter's semantics (FORMATS.md §5).

Modules: :mod:`.h5input` (validation, chromosome map, chunk reading), :mod:`.tracks` (strand average,
smoothing, runs, merge), :mod:`.bigwigfile` and :mod:`.bedgraph` (writers), :mod:`.convert` (the loop),
:mod:`.core` (the options, their checks and the outputs) and :mod:`.cli` (the command's arguments).
"""

from .bedgraph import format_bedgraph_numpy, format_lines
from .bigwigfile import BigWigWriter, PyBigWigWriter
from .h5input import PredictionsInput, chromosome_map
from .tracks import (
    TrackState,
    round_half_even_div,
    runs,
    smooth_exact,
    smooth_numpy,
    strand_average,
    tie_positions,
    window_sums,
)

__all__ = [
    "BigWigWriter",
    "PredictionsInput",
    "PyBigWigWriter",
    "TrackState",
    "chromosome_map",
    "format_bedgraph_numpy",
    "format_lines",
    "round_half_even_div",
    "runs",
    "smooth_exact",
    "smooth_numpy",
    "strand_average",
    "tie_positions",
    "window_sums",
]
