#!/usr/bin/env python
"""Seeded synthetic predictions h5 in Predmoter's exact layout (FORMATS.md §4), for bigWig benchmarks.

Usage (stable interface; the cross-stage harness ``benchmarks/run`` calls it like this, with
``benchmarks.harness.env.child_env``; it imports nothing of the repository, so ``python
benchmarks/harness/synth_predictions.py ...`` runs it the same way)::

    python -m benchmarks.harness.synth_predictions --mbp 200 --mode realistic --seed 1 --out F.h5
        [--chromosomes 5] [--template PRED.h5] [--pool 128] [--seq-len 21384] [--force]

It prints one JSON object on stdout: the file's layout (bp, chromosomes, rows, datasets) and, per dataset
and track (+, −, avg), the bp per run of equal values in the generated data next to the template's.

Modes
-----
``realistic``
    Per dataset, the joint (plus, minus) value pair follows a first-order Markov chain whose transition
    counts are those of the template's tracks (default: the mini_model predictions of the shared test
    genome, ``../shared/reference/predmoter/pred_data_1_predictions.h5``, read in place, never copied).
    A first-order chain reproduces, in expectation, the fraction of positions where +, − and the rounded
    average change, i.e. the bp per bigWig interval (template: ≈ 3.5 for ±, 28.8 for atacseq avg, 3.0
    for h3k4me3 avg). Long constant stretches of the template (runs of ≥ 1 kbp where both strands stay
    constant, e.g. its N region) are inserted at the template's rate, lengths and values.
``worst``
    Every track changes at every bp: + takes a new value (0..3, never equal to its predecessor) at each
    position and − equals + , so the average changes at every bp too.

Layout: chromosome sizes are seeded, differ from each other, and are not multiples of ``--seq-len``, so every
chromosome ends in a padded chunk (fill −1). Rows follow Helixer's order (plus chunks ascending, then the
minus chunks of the same windows in reversed order, holding the reversed minus track). int64, chunks
(1, L, 1), gzip level 9 (zlib), fill −1; ``data/species`` and ``prediction/model_name`` are only fill values,
as Predmoter writes them.

To keep generation fast (~1 min for 200 Mbp on 2 cores), each row takes its content from a pool of
``--pool`` distinct windows (seeded choice per row; each window holds the + and − chunks of every dataset,
generated jointly), compressed once each. Converters do not cache chunks, so repeats do not make them
faster; they only make the file smaller than fully distinct content would.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TEMPLATE = ROOT.parent / "shared" / "reference" / "predmoter" / "pred_data_1_predictions.h5"
#: a run of ≥ this many bp with both strands constant is a "flat" stretch (e.g. an N region)
FLAT_BP = 1000


# --------------------------------------------------------------------------------------------------
# template statistics
# --------------------------------------------------------------------------------------------------
def read_tracks(path: Path) -> tuple[list[str], list[list[tuple[np.ndarray, np.ndarray]]]]:
    """(dataset names, per dataset a list of per-chromosome (plus, minus) tracks in genome order).

    Written here from FORMATS §5.2–5.3 (kept independent of the converter under test).
    """
    import h5py

    with h5py.File(path, "r") as h5:
        names = [bytes(x).decode() for x in h5["prediction/datasets"][()]]
        seqids = h5["data/seqids"][()]
        se = h5["data/start_ends"][()]
        pred = h5["prediction/predictions"][()]
    out: list[list] = [[] for _ in names]
    order = list(dict.fromkeys(seqids.tolist()))
    for sid in order:
        rows = np.flatnonzero(seqids == sid)
        plus = rows[se[rows, 0] <= se[rows, 1]]
        minus = np.sort(rows[se[rows, 0] > se[rows, 1]])
        for d in range(len(names)):
            p = pred[plus, :, d].reshape(-1)
            m = pred[minus, :, d].reshape(-1)[::-1]
            out[d].append((p[p != -1], m[m != -1]))
    return names, out


def bp_per_run(x: np.ndarray) -> float:
    return len(x) / (1 + int(np.count_nonzero(x[1:] != x[:-1]))) if len(x) else float("nan")


def avg_track(p: np.ndarray, m: np.ndarray) -> np.ndarray:
    return np.rint((p.astype(np.float32) + m.astype(np.float32)) * np.float32(0.5))


def fit(tracks: list[tuple[np.ndarray, np.ndarray]]) -> dict:
    """Markov-chain + flat-stretch model of one dataset's (plus, minus) pairs."""
    states: dict[tuple[int, int], int] = {}
    pairs = []
    flats = []  # (length, state)
    busy_bp = 0
    for p, m in tracks:
        key = p.astype(np.int64) * 1_000_003 + m.astype(np.int64)
        cut = np.flatnonzero(key[1:] != key[:-1]) + 1
        st = np.concatenate([[0], cut])
        ln = np.diff(np.concatenate([st, [len(key)]]))
        flat = np.zeros(len(key), bool)
        for s, n in zip(st[ln >= FLAT_BP].tolist(), ln[ln >= FLAT_BP].tolist()):
            flat[s : s + n] = True
            flats.append((n, (int(p[s]), int(m[s]))))
        for a, b in zip(p.tolist(), m.tolist()):
            states.setdefault((a, b), len(states))
        idx = np.array([states[(a, b)] for a, b in zip(p.tolist(), m.tolist())])
        ok = ~flat[1:] & ~flat[:-1]
        pairs.append((idx[:-1][ok], idx[1:][ok]))
        busy_bp += int(np.count_nonzero(~flat))
    k = len(states)
    counts = np.zeros((k, k))
    for a, b in pairs:
        np.add.at(counts, (a, b), 1)
    keep = counts.sum(1) > 0
    counts[~keep, :] = 0
    counts[~keep, np.argmax(counts.sum(0))] = 1  # states seen only before a flat stretch: go to the commonest
    trans = counts / counts.sum(1, keepdims=True)
    total = busy_bp + sum(n for n, _ in flats)
    return {
        "states": sorted(states, key=states.get),
        "trans": trans,
        "start": counts.sum(1) / counts.sum(),
        "flats": flats,
        "flat_frac": (total - busy_bp) / total,
    }


def markov(model: dict, n_chains: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """State indices (n_chains, length): n_chains independent chains, vectorised over chains."""
    cum = np.cumsum(model["trans"], axis=1)
    cum[:, -1] = 1.0
    out = np.empty((n_chains, length), np.int16)
    s = rng.choice(len(model["start"]), n_chains, p=model["start"])
    u = rng.random((length, n_chains))
    for i in range(length):
        out[:, i] = s
        s = (u[i][:, None] > cum[s]).sum(1)
        np.minimum(s, len(cum) - 1, out=s)
    return out


def pool_realistic(models: list[dict], n: int, L: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(plus, minus) pools of shape (D, n, L) in genome order."""
    D = len(models)
    P = np.empty((D, n, L), np.int64)
    M = np.empty((D, n, L), np.int64)
    for d, model in enumerate(models):
        st = np.array(model["states"], np.int64)
        idx = markov(model, n, L, rng)
        p = st[idx, 0]
        m = st[idx, 1]
        # flat stretches on the concatenated stream, at the template's rate
        flat_p = p.reshape(-1)
        flat_m = m.reshape(-1)
        total = len(flat_p)
        if model["flats"] and model["flat_frac"] > 0:
            mean_len = np.mean([x for x, _ in model["flats"]])
            gap = mean_len * (1 - model["flat_frac"]) / model["flat_frac"]  # mean busy bp between flats
            pos = int(rng.exponential(gap))
            while pos < total:
                n_bp, (a, b) = model["flats"][rng.integers(len(model["flats"]))]
                flat_p[pos : pos + n_bp] = a
                flat_m[pos : pos + n_bp] = b
                pos += n_bp + int(rng.exponential(gap))
        P[d] = p
        M[d] = m
    return P, M


def pool_worst(D: int, n: int, L: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    steps = rng.integers(1, 4, size=(D, n, L))
    P = np.cumsum(steps, axis=2) % 4  # consecutive values always differ
    return P.astype(np.int64), P.astype(np.int64).copy()


# --------------------------------------------------------------------------------------------------
# file
# --------------------------------------------------------------------------------------------------
def chromosome_sizes(total: int, k: int, L: int, rng: np.random.Generator) -> list[int]:
    w = np.linspace(1.0, 0.5, k) * rng.uniform(0.9, 1.1, k)
    sizes = np.floor(w / w.sum() * total).astype(np.int64)
    sizes[0] += total - sizes.sum()
    for i in range(k):
        if sizes[i] % L == 0:  # keep a padded last chunk in every chromosome
            sizes[i] -= 1
            sizes[(i + 1) % k] += 1
    return [int(s) for s in sizes]


def write(
    out: Path,
    names: list[str],
    sizes: list[int],
    P: np.ndarray,
    M: np.ndarray,
    L: int,
    rng: np.random.Generator,
    threads: int,
) -> int:
    import h5py

    D, n_pool, _ = P.shape
    seqids, start_ends, plan = [], [], []  # plan: (pool window, valid bp, is_minus)
    for ci, size in enumerate(sizes):
        k = -(-size // L)
        wins = rng.integers(0, n_pool, k)
        bounds = [(i * L, min((i + 1) * L, size)) for i in range(k)]
        seqids += [f"chr{ci + 1}".encode()] * (2 * k)
        start_ends += [[s, e] for s, e in bounds] + [[e, s] for s, e in reversed(bounds)]
        plan += [(int(w), e - s, False) for w, (s, e) in zip(wins, bounds)]
        plan += [(int(w), e - s, True) for w, (s, e) in zip(wins[::-1], bounds[::-1])]

    def chunk(w: int, valid: int, minus: bool, d: int) -> bytes:
        a = M[d, w, :valid][::-1] if minus else P[d, w, :valid]
        if valid < L:
            a = np.concatenate([a, np.full(L - valid, -1, np.int64)])
        return zlib.compress(np.ascontiguousarray(a, dtype="<i8").tobytes(), 9)

    keys = sorted({(w, v, mi, d) for w, v, mi in plan for d in range(D)})
    with ThreadPoolExecutor(threads) as ex:
        blobs = dict(zip(keys, ex.map(lambda k: chunk(*k), keys)))
    N = len(seqids)
    with h5py.File(out, "w", libver="earliest") as h5:
        h5.create_dataset(
            "data/species", shape=(N,), dtype="S50", chunks=(1,), maxshape=(None,), fillvalue=b"Synthetic_species"
        )
        h5.create_dataset("data/seqids", data=np.array(seqids, dtype="S50"), chunks=(1,), maxshape=(None,))
        h5.create_dataset(
            "data/start_ends", data=np.array(start_ends, dtype=np.int64), chunks=(1, 2), maxshape=(None, 2)
        )
        h5.create_dataset(
            "prediction/model_name", shape=(1,), dtype="S256", chunks=(1,), maxshape=(None,), fillvalue=b"synthetic"
        )
        h5.create_dataset(
            "prediction/datasets", data=np.array([x.encode() for x in names], dtype="S25"), maxshape=(None,)
        )
        dset = h5.create_dataset(
            "prediction/predictions",
            shape=(N, L, D),
            dtype=np.int64,
            chunks=(1, L, 1),
            compression="gzip",
            compression_opts=9,
            fillvalue=-1,
            maxshape=(None, L, None),
        )
        for r, (w, v, mi) in enumerate(plan):
            for d in range(D):
                dset.id.write_direct_chunk((r, 0, d), blobs[(w, v, mi, d)])
    return N


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--mbp", type=float, required=True, help="genome size in Mbp (whole file)")
    ap.add_argument("--mode", choices=["realistic", "worst"], default="realistic")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True, help="predictions h5 to write")
    ap.add_argument("--chromosomes", type=int, default=5, help="number of chromosomes (default 5)")
    ap.add_argument(
        "--template",
        type=Path,
        default=DEFAULT_TEMPLATE,
        help="predictions h5 whose statistics 'realistic' copies; its dataset names are used in "
        "both modes (default: the shared mini_model predictions)",
    )
    ap.add_argument("--pool", type=int, default=128, help="distinct windows the rows are drawn from")
    ap.add_argument("--seq-len", type=int, default=21384, help="chunk length L (default 21384)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--force", action="store_true", help="overwrite --out")
    args = ap.parse_args(argv)
    if args.out.exists() and not args.force:
        ap.error(f"{args.out} exists (use --force)")
    total = int(round(args.mbp * 1e6))
    L = args.seq_len
    if total < args.chromosomes * 2:
        ap.error("--mbp too small for --chromosomes")
    rng = np.random.default_rng(args.seed)
    names, tmpl = read_tracks(args.template)
    if args.mode == "realistic":
        models = [fit(t) for t in tmpl]
        P, M = pool_realistic(models, args.pool, L, rng)
    else:
        P, M = pool_worst(len(names), args.pool, L, rng)
    sizes = chromosome_sizes(total, args.chromosomes, L, rng)
    tmp = args.out.with_name(f".{args.out.name}.part")
    try:
        N = write(tmp, names, sizes, P, M, L, rng, args.threads)
        os.replace(tmp, args.out)
    finally:
        if tmp.exists():
            tmp.unlink()
    stats = {}
    for d, name in enumerate(names):
        p = P[d].reshape(-1)
        m = M[d].reshape(-1)
        tp = np.concatenate([x for x, _ in tmpl[d]])
        tm = np.concatenate([x for _, x in tmpl[d]])
        stats[name] = {
            track: {"generated": round(bp_per_run(g), 2), "template": round(bp_per_run(t), 2)}
            for track, g, t in (("+", p, tp), ("-", m, tm), ("avg", avg_track(p, m), avg_track(tp, tm)))
        }
    print(
        json.dumps(
            {
                "out": str(args.out),
                "mode": args.mode,
                "seed": args.seed,
                "bp": sum(sizes),
                "chromosomes": dict(zip([f"chr{i + 1}" for i in range(len(sizes))], sizes)),
                "rows": N,
                "seq_len": L,
                "datasets": names,
                "pool": args.pool,
                "template": str(args.template),
                "bp_per_interval": stats,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
