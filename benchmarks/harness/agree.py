"""Output comparisons of ``benchmarks/run`` (the same checks as the fidelity tests), each run in its own process:

    python -m benchmarks.harness.agree h5 OURS.h5 PEER.h5                 fasta2h5: the four data/ datasets equal
    python -m benchmarks.harness.agree predictions OURS.h5 PEER.h5 CKPT GENOME.h5
                                                                predict: equal, or different only at ties
    python -m benchmarks.harness.agree deviation A.h5 B.h5                 predict: how far A is from B (bf16 vs fp32)
    python -m benchmarks.harness.agree tracks OURS_DIR PEER_DIR PRED.h5 WS  bigwig: same files, same intervals (ties
                                                                 allowed where the exact window mean is .5)
    python -m benchmarks.harness.agree score LINKS GOLD                     GENIE3: AUROC / AUPR against a gold standard
    python -m benchmarks.harness.agree coverage OURS.h5 PEER.h5 PREFIX      add-coverage: the evaluation datasets equal
                                                                 (values, dtype, chunks, filters, fill, bam_files)
    python -m benchmarks.harness.agree losscurve OURS.tsv PEER.log          train: the same loss and accuracy per epoch

Each prints one JSON object: {"ok": true|false|null, "detail": "...", ...}.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np

from chromaflow.predict.compare import TIE_EPS

#: The tie rule of predictions is the package's (chromaflow.predict.compare, which the fidelity tests use): a value
#: v of a float64 forward pass is a tie if |v - (floor(v) + 0.5)| <= TIE_EPS * max(1, v), TIE_EPS = 1e-5
#: relative. Until issue 28 the harness had its own rule, |v - (floor(v) + 0.5)| < 1e-4 absolute; the package's
#: window is 10x narrower below v = 10, the same at 10 and wider above (1e-3 at v = 100), and a padding position
#: is never a tie (FORMATS.md §5.4 "Machine dependence": float32 and float64 passes differ by ~1e-6 relative).


def _h5_datasets_equal(a, b, names: list[str]) -> list[str]:
    bad = []
    for k in names:
        if k not in a or k not in b:
            bad.append(f"{k}: missing in {'ours' if k not in a else 'peer'}")
            continue
        x, y = a[k], b[k]
        if x.shape != y.shape or x.dtype != y.dtype:
            bad.append(f"{k}: shape/dtype {x.shape} {x.dtype} vs {y.shape} {y.dtype}")
            continue
        if x.ndim == 0 or x.shape[0] == 0:
            continue
        step = max(1, (64 << 20) // max(1, x.dtype.itemsize * int(np.prod(x.shape[1:]))))
        for i in range(0, x.shape[0], step):
            u, v = x[i : i + step], y[i : i + step]
            if u.dtype.kind == "f":
                u, v = u.view(f"u{u.dtype.itemsize}"), v.view(f"u{v.dtype.itemsize}")
            if not np.array_equal(u, v):
                rows = np.flatnonzero((u != v).reshape(u.shape[0], -1).any(axis=1)) + i
                bad.append(f"{k}: values differ (first row {int(rows[0])}, {rows.size}+ rows)")
                break
    return bad


def h5(ours: str, peer: str) -> dict:
    import h5py

    with h5py.File(ours, "r") as a, h5py.File(peer, "r") as b:
        bad = _h5_datasets_equal(a, b, ["data/X", "data/seqids", "data/species", "data/start_ends"])
        rows = int(a["data/X"].shape[0])
    sizes = {"ours_bytes": Path(ours).stat().st_size, "peer_bytes": Path(peer).stat().st_size}
    sizes["size_ratio"] = sizes["ours_bytes"] / sizes["peer_bytes"]
    if bad:
        return {"ok": False, "detail": "; ".join(bad), **sizes}
    return {
        "ok": True,
        "detail": f"data/X, seqids, species, start_ends identical ({rows} rows); file size "
        f"{sizes['size_ratio']:.3f} x the peer's",
        **sizes,
    }


def _diff_positions(a, b) -> tuple[int, int, list[tuple]]:
    """Differences of two prediction arrays, row by row: (count, max |d|, [(row, pos, ds)] of up to 10k)."""
    n = 0
    maxd = 0
    where: list[tuple] = []
    for r in range(a.shape[0]):
        x, y = a[r], b[r]
        d = x != y
        if d.any():
            idx = np.argwhere(d)
            n += len(idx)
            maxd = max(maxd, int(np.abs(x[d] - y[d]).max()))
            where += [(r, int(p), int(c)) for p, c in idx[: 10000 - len(where)]]
    return n, maxd, where


def predictions(ours: str, peer: str, ckpt: str, genome: str) -> dict:
    """Identical, or every difference is ±1 at a position whose float64 model output lies within
    TIE_EPS (relative) of a .5 rounding boundary (the package's tie rule, issue 14)."""
    import h5py

    with h5py.File(ours, "r") as a, h5py.File(peer, "r") as b:
        bad = _h5_datasets_equal(a, b, ["data/seqids", "data/start_ends", "prediction/datasets"])
        if "data/species" in a and "data/species" in b and a["data/species"][0] != b["data/species"][0]:
            bad.append("data/species differs")
        pa, pb = a["prediction/predictions"], b["prediction/predictions"]
        if pa.shape != pb.shape or pa.dtype != pb.dtype:
            return {"ok": False, "detail": f"predictions shape/dtype {pa.shape} {pa.dtype} vs {pb.shape} {pb.dtype}"}
        n, maxd, where = _diff_positions(pa, pb)
        total = int(np.prod(pa.shape))
    if bad:
        return {"ok": False, "detail": "; ".join(bad)}
    if n == 0:
        return {"ok": True, "detail": f"predictions identical ({total:,} values)", "differ": 0, "values": total}
    if maxd > 1 or n > 10000:
        return {"ok": False, "detail": f"{n} of {total:,} values differ, max |d| {maxd}", "differ": n, "values": total}
    ties, not_ties = _prediction_ties(genome, ckpt, where)
    ok = not not_ties
    return {
        "ok": ok,
        "differ": n,
        "values": total,
        "ties": ties,
        "detail": f"{n} of {total:,} values differ by 1, {'all' if ok else 'not all'} at ties (|raw - k.5| <= "
        f"{TIE_EPS:g} x max(1, raw) in float64)" + ("" if ok else f"; not ties at (row, pos, dataset) {not_ties[:5]}"),
    }


def _prediction_ties(genome: str, ckpt: str, where: list[tuple]) -> tuple[int, list[tuple]]:
    """How many of the differing (row, pos, dataset) are ties by the package's rule, and which are not."""
    import h5py

    from chromaflow.model.checkpoint import build_model, load_checkpoint
    from chromaflow.predict.compare import near_ties

    model = build_model(load_checkpoint(ckpt))
    ties: set[tuple[int, int, int]] = set()
    with h5py.File(genome, "r") as f:
        X = f["data/X"]
        for r in sorted({r for r, _, _ in where}):
            ties |= near_ties(model, X[r : r + 1], row_offset=r)
    allowed = [w for w in where if tuple(w) in ties]
    return len(allowed), [w for w in where if tuple(w) not in ties]


def deviation(a_path: str, b_path: str) -> dict:
    import h5py

    with h5py.File(a_path, "r") as a, h5py.File(b_path, "r") as b:
        n, maxd, _ = _diff_positions(a["prediction/predictions"], b["prediction/predictions"])
        total = int(np.prod(a["prediction/predictions"].shape))
    return {
        "ok": None,
        "differ": n,
        "values": total,
        "fraction": n / total,
        "max_abs": maxd,
        "detail": f"{n:,} of {total:,} values ({100 * n / total:.3f} %) differ, max |d| {maxd}",
    }


# --------------------------------------------------------------------------------------------------
# bigWig / bedGraph
# --------------------------------------------------------------------------------------------------
def _intervals_bw(path: Path) -> dict[str, np.ndarray]:
    import pyBigWig

    out = {}
    with pyBigWig.open(str(path)) as bw:
        chroms = bw.chroms()
        for c, size in chroms.items():
            iv = bw.intervals(c) or []
            out[c] = np.array(iv, dtype=np.float64).reshape(-1, 3)
        out["__sizes__"] = np.array(list(chroms.values()), dtype=np.int64)
        out["__names__"] = np.array(list(chroms.keys()))
    return out


def _intervals_bg(path: Path) -> dict[str, np.ndarray]:
    rows: dict[str, list] = {}
    with gzip.open(path, "rt") as f:
        for line in f:
            if not line.strip():  # the reference writes blank lines for empty blocks (FORMATS.md §5.5)
                continue
            c, s, e, v = line.split("\t")
            rows.setdefault(c, []).append((int(s), int(e), float(v)))
    return {c: np.array(v, dtype=np.float64).reshape(-1, 3) for c, v in rows.items()}


def _differing_bases(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Base positions where two interval lists of one chromosome disagree (both tile the same range)."""
    bounds = np.unique(np.concatenate([a[:, 0], a[:, 1], b[:, 0], b[:, 1]]).astype(np.int64))
    mid = bounds[:-1]
    ia = np.searchsorted(a[:, 0], mid, side="right") - 1
    ib = np.searchsorted(b[:, 0], mid, side="right") - 1
    va = np.where((ia >= 0) & (mid < a[np.clip(ia, 0, None), 1]), a[np.clip(ia, 0, None), 2], np.nan)
    vb = np.where((ib >= 0) & (mid < b[np.clip(ib, 0, None), 1]), b[np.clip(ib, 0, None), 2], np.nan)
    diff = ~((va == vb) | (np.isnan(va) & np.isnan(vb)))
    starts, ends = bounds[:-1][diff], bounds[1:][diff]
    if int((ends - starts).sum()) > MAX_DIFF_BP:
        raise _TooMany(int((ends - starts).sum()))
    pos = [np.arange(s, e) for s, e in zip(starts, ends)]
    return np.concatenate(pos) if pos else np.zeros(0, np.int64)


MAX_DIFF_BP = 5_000_000


class _TooMany(Exception):
    pass


def tracks(ours_dir: str, peer_dir: str, pred_h5: str, ws: str) -> dict:
    w = int(ws) if ws not in ("", "0", "None") else None
    peer_files = sorted(p for p in Path(peer_dir).iterdir() if p.name.endswith((".bw", ".bg.gz")))
    if not peer_files:
        return {"ok": False, "detail": "the peer wrote no track"}
    bad, ties_total, compared = [], 0, 0
    tie_sets: dict[str, dict[str, set[int]]] = {}  # per track file, computed where it differs
    for pf in peer_files:
        of = Path(ours_dir) / pf.name
        if not of.exists():
            bad.append(f"{pf.name}: missing in ours")
            continue
        read = _intervals_bw if pf.name.endswith(".bw") else _intervals_bg
        a, b = read(of), read(pf)
        if pf.name.endswith(".bw"):
            if not np.array_equal(a.pop("__sizes__"), b.pop("__sizes__")) or list(a.pop("__names__")) != list(
                b.pop("__names__")
            ):
                bad.append(f"{pf.name}: chromosome list or sizes differ")
                continue
        for c in sorted(set(a) | set(b)):
            x, y = a.get(c, np.zeros((0, 3))), b.get(c, np.zeros((0, 3)))
            compared += len(y)
            if x.shape == y.shape and np.array_equal(x, y):
                continue
            try:
                pos = _differing_bases(x, y)
            except _TooMany as exc:
                bad.append(f"{pf.name} {c}: {exc.args[0]:,} bp differ")
                continue
            if w is None or pos.size == 0:
                bad.append(f"{pf.name} {c}: {len(x)} vs {len(y)} intervals, {pos.size} bp differ")
                continue
            if pf.name not in tie_sets:
                tie_sets[pf.name] = _smoothing_ties(pred_h5, *_track_of(pf.name), w)
            nt = int(np.isin(pos, np.fromiter(tie_sets[pf.name].get(c, ()), np.int64)).sum())
            if nt < pos.size:
                bad.append(f"{pf.name} {c}: {pos.size - nt} bp differ that are not exact .5 ties")
            ties_total += nt
    if bad:
        return {"ok": False, "detail": "; ".join(bad[:6]), "intervals": compared}
    detail = f"{len(peer_files)} track file(s), {compared:,} intervals identical"
    if ties_total:
        detail = f"{len(peer_files)} track file(s) identical except {ties_total} bp at exact .5 window-mean ties"
    return {"ok": True, "detail": detail, "intervals": compared, "tie_bp": ties_total}


def _track_of(name: str) -> tuple[str, str]:
    # {basename}_{dataset}_{strand}_strand[_bl][_ws=W].ext ; basename has no '_' in the harness
    parts = name.split("_")
    return parts[1], parts[2]


def _smoothing_ties(pred_h5: str, dataset: str, strand: str, w: int) -> dict[str, set[int]]:
    """The positions of each chromosome whose window mean S/w is exactly k + 1/2: the package's smoothing-tie rule
    (chromaflow.bigwig.ties, which the bigWig fidelity tests use; FORMATS.md §5.4)."""
    import h5py

    from chromaflow.bigwig.ties import smoothing_ties

    with h5py.File(pred_h5, "r") as f:
        names = [d.decode() for d in f["prediction/datasets"][()]]
    return smoothing_ties(Path(pred_h5), names.index(dataset), w, strand)


# --------------------------------------------------------------------------------------------------
# GENIE3
# --------------------------------------------------------------------------------------------------
def score(links: str, gold: str) -> dict:
    """AUROC / AUPR of a link list against a DREAM4-style gold standard: the package's scorer
    (chromaflow.genie3.dream4), the one the DREAM4 tests use."""
    from chromaflow.genie3.dream4 import score_links

    s = score_links(links, gold)
    return {"ok": s["scored_links"] > 0, **s, "detail": f"AUROC {s['auroc']:.4f}, AUPR {s['aupr']:.4f}"}


# --------------------------------------------------------------------------------------------------
# add-coverage
# --------------------------------------------------------------------------------------------------
def coverage(ours: str, peer: str, prefix: str) -> dict:
    """The datasets add-coverage writes, as the Helixer fidelity test compares them (tests/coverage): for
    evaluation/<prefix>_coverage, _spliced_coverage and _meta/bam_files the same shape, dtype, chunks, maxshape,
    compression, shuffle and fill value, and the same values (compared in slabs of rows)."""
    import h5py

    names = [
        f"evaluation/{prefix}_coverage",
        f"evaluation/{prefix}_spliced_coverage",
        f"evaluation/{prefix}_meta/bam_files",
    ]
    bad = []
    with h5py.File(ours, "r") as a, h5py.File(peer, "r") as b:
        for k in names:
            if k not in a or k not in b:
                bad.append(f"{k}: missing in {'ours' if k not in a else 'peer'}")
                continue
            x, y = a[k], b[k]
            lay = [
                (n, getattr(x, n), getattr(y, n)) for n in ("chunks", "maxshape", "compression", "shuffle", "fillvalue")
            ]
            diff = [f"{n} {u} vs {v}" for n, u, v in lay if u != v]
            if diff:
                bad.append(f"{k}: " + ", ".join(diff))
        bad += _h5_datasets_equal(a, b, [k for k in names if k in a and k in b])
        cov = a[names[0]] if names[0] in a else None
        shape = tuple(cov.shape) if cov is not None else None
        covered = 0
        if cov is not None and not bad:
            for i in range(0, shape[0], 64):
                covered += int((cov[i : i + 64] > 0).sum())
    if bad:
        return {"ok": False, "detail": "; ".join(bad[:6])}
    if covered == 0:  # two empty outputs would agree trivially
        return {"ok": False, "detail": f"{names[0]} has no covered base in either file"}
    return {
        "ok": True,
        "shape": list(shape),
        "covered_values": covered,
        "detail": f"{prefix}_coverage, _spliced_coverage, _meta/bam_files identical (values and layout; "
        f"{shape[0]:,} rows, {covered:,} covered values)",
    }


# --------------------------------------------------------------------------------------------------
# train
# --------------------------------------------------------------------------------------------------
#: the loss-curve rule of the Predmoter fidelity test (tests/train test_same_loss_curve_as_predmoter): every epoch's
#: avg train/val loss and accuracy within 1e-3 relative or 1e-5 absolute (math.isclose) of Predmoter's
CURVE_REL, CURVE_ABS = 1e-3, 1e-5


def losscurve(ours_tsv: str, peer_log: str) -> dict:
    import math

    from .training import CURVE_KEYS, ours_curve, predmoter_curve

    a, b = ours_curve(Path(ours_tsv)), predmoter_curve(Path(peer_log))
    if len(a) != len(b) or not a:
        return {"ok": False, "detail": f"{len(a)} epochs vs Predmoter's {len(b)}"}
    bad, worst = [], 0.0
    for i, (o, t) in enumerate(zip(a, b)):
        for k in CURVE_KEYS:
            if k not in o or k not in t:
                bad.append(f"epoch {i} {k}: missing in {'ours' if k not in o else 'peer'}")
                continue
            worst = max(worst, abs(o[k] - t[k]) / max(abs(t[k]), CURVE_ABS))
            if not math.isclose(o[k], t[k], rel_tol=CURVE_REL, abs_tol=CURVE_ABS):
                bad.append(f"epoch {i} {k}: {o[k]:.6g} vs {t[k]:.6g}")
    last = a[-1]
    if bad:
        return {"ok": False, "detail": "; ".join(bad[:4]), "max_rel_diff": worst}
    return {
        "ok": True,
        "epochs": len(a),
        "max_rel_diff": worst,
        "final_train_loss": last["avg_train_loss"],
        "detail": f"{len(a)} epoch(s): train/val loss and accuracy equal Predmoter's (largest relative difference "
        f"{worst:.1e}; rule: rel {CURVE_REL:g} or abs {CURVE_ABS:g}); last train loss "
        f"{last['avg_train_loss']:.4f}",
    }


if __name__ == "__main__":
    fn = {
        "h5": h5,
        "predictions": predictions,
        "deviation": deviation,
        "tracks": tracks,
        "score": score,
        "coverage": coverage,
        "losscurve": losscurve,
    }[sys.argv[1]]
    print(json.dumps(fn(*sys.argv[2:])))
