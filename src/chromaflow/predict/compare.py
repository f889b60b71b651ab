"""Compare predictions with a reference: exact, except ±1 at documented near-ties.

A prediction is ``round_half_to_even(exp(model(x)))``. Where the exact value lies on a .5 boundary up to the
rounding noise of float32 arithmetic, two correct implementations (other kernels, other CPUs, a GPU, another
batch size) can round to neighbouring integers. So a comparison allows a difference of exactly 1 at positions that
a **float64** forward pass of the same model puts within :data:`TIE_EPS` (relative, ``max(1, value)``) of a .5
boundary, names every allowed position, and fails on any other difference. The float32 forward pass deviates from
the float64 one by < 5e-7 relative on the reference fixtures, so the margin is 20-fold.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

#: a value v is a near-tie if |v − (⌊v⌋ + 0.5)| <= TIE_EPS · max(1, v), v from a float64 forward pass
TIE_EPS = 1e-5


def near_ties(model, x_rows, *, eps: float = TIE_EPS, row_offset: int = 0, batch: int = 4) -> set[tuple[int, int, int]]:
    """(row, position, dataset) of every non-padding value of ``model`` on ``x_rows`` ((n, L, 4) one-hot, float16
    or float32; rows numbered from ``row_offset``) that a float64 forward pass puts within ``eps`` of a .5
    boundary."""
    import torch

    m64 = copy.deepcopy(model).double().eval()
    out: set[tuple[int, int, int]] = set()
    with torch.inference_mode():
        for a in range(0, len(x_rows), batch):
            x = torch.as_tensor(np.asarray(x_rows[a : a + batch]), dtype=torch.float64)
            y = torch.exp(m64(x))
            dist = (y - torch.floor(y) - 0.5).abs()
            sel = (dist <= eps * y.clamp(min=1.0)) & (x.amax(dim=2) != 0).unsqueeze(2)
            for r, p, d in sel.nonzero().tolist():
                out.add((row_offset + a + r, p, d))
    return out


@dataclass
class Comparison:
    """The result of comparing predictions with a reference: values compared, how many differ, the differences at
    near-ties (allowed) and elsewhere (unexpected) as (row, pos, dataset, ours, reference), and the largest absolute
    difference."""

    values: int = 0
    differ: int = 0
    allowed: list = field(default_factory=list)  # (row, pos, dataset, ours, reference) at near-ties
    unexpected: list = field(default_factory=list)  # (row, pos, dataset, ours, reference) anywhere else
    max_abs: int = 0

    @property
    def ok(self) -> bool:
        """True when every difference is at a near-tie."""
        return not self.unexpected

    def summary(self, limit: int = 5) -> str:
        """One line: values compared, how many differ, at near-ties and elsewhere, and the first ``limit`` unexpected
        differences."""
        head = (
            f"{self.values} values, {self.differ} differ: {len(self.allowed)} at near-ties (allowed), "
            f"{len(self.unexpected)} elsewhere"
        )
        if self.unexpected:
            shown = ", ".join(f"row {r} pos {p} dataset {d}: {a} vs {b}" for r, p, d, a, b in self.unexpected[:limit])
            head += f"; first: {shown}"
        return head

    def as_dict(self) -> dict:
        """The comparison as JSON-ready fields: counts, ``ok``, the allowed differences, the first 100 unexpected ones
        with their count, and :data:`TIE_EPS`."""
        return {
            "values": self.values,
            "differ": self.differ,
            "max_abs": self.max_abs,
            "ok": self.ok,
            "allowed": [list(map(int, t)) for t in self.allowed],
            "unexpected": [list(map(int, t)) for t in self.unexpected[:100]],
            "unexpected_count": len(self.unexpected),
            "tie_eps": TIE_EPS,
        }


def compare_arrays(
    ours: np.ndarray, ref: np.ndarray, ties: set | None, *, row_offset: int = 0, cmp: Comparison | None = None
) -> Comparison:
    """Compare (n, L, D) prediction arrays; ``ties`` = allowed (row, pos, dataset), rows from ``row_offset``."""
    cmp = cmp or Comparison()
    if ours.shape != ref.shape:
        raise ValueError(f"shapes differ: {ours.shape} vs {ref.shape}")
    cmp.values += int(ours.size)
    diff = np.argwhere(ours != ref)
    cmp.differ += len(diff)
    ties = ties or set()
    for r, p, d in diff.tolist():
        a, b = int(ours[r, p, d]), int(ref[r, p, d])
        key = (row_offset + r, p, d)
        cmp.max_abs = max(cmp.max_abs, abs(a - b))
        if key in ties and abs(a - b) == 1 and a >= 0 and b >= 0:
            cmp.allowed.append((*key, a, b))
        else:
            cmp.unexpected.append((*key, a, b))
    return cmp


def compare_files(ours_path: str, ref_path: str, ties: set | None, *, rows_per_read: int = 64) -> Comparison:
    """Compare ``prediction/predictions`` of two predictions files (and require equal seqids/start_ends/datasets)."""
    import h5py

    cmp = Comparison()
    with h5py.File(ours_path, "r") as fa, h5py.File(ref_path, "r") as fb:
        for name in ("data/seqids", "data/start_ends", "prediction/datasets"):
            if not np.array_equal(fa[name][()], fb[name][()]):
                raise ValueError(f"{name} differs between {ours_path} and {ref_path}")
        pa, pb = fa["prediction/predictions"], fb["prediction/predictions"]
        if pa.shape != pb.shape:
            raise ValueError(f"prediction/predictions shapes differ: {pa.shape} vs {pb.shape}")
        for a in range(0, pa.shape[0], rows_per_read):
            compare_arrays(pa[a : a + rows_per_read], pb[a : a + rows_per_read], ties, row_offset=a, cmp=cmp)
    return cmp
