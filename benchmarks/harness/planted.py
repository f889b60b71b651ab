"""The planted network of the ``network`` stage: a seeded genome whose promoters carry the motifs of a known
TF -> target network, expression simulated from that network, and the helpers that turn a prior into contenders
and score link lists (``python -m benchmarks.harness.planted KIND ...``, each in its own process like ``harness.gen``;
the harness calls :func:`score` in its own process, so scikit-learn is imported once for all runs).

    make OUTDIR SEED GENES TFS SAMPLES      genome.fa, genes.gff3, motifs.jaspar, tf_motifs.tsv, regulators.txt,
                                            expression.tsv (samples x genes), gold.tsv, accessibility.bw, truth.json
    rank-prior PRIOR OUT                    the prior alone as a link list (rank = prior, then hits)
    shuffle-prior PRIOR OUT SEED            the same prior values, permuted over the (TF, target) pairs
    score LINKS GOLD                        one JSON line: AUROC, AUPR, precision at the top 0.1 / 0.5 / 1 %
    paired-difference LINKS_A LINKS_B GOLD  one JSON line: AUPR(A) - AUPR(B) and its paired bootstrap SE over targets

The network (every draw from ``numpy.random.default_rng(SEED)``; same arguments, same bytes):

* TFS transcription factors TF1.. and GENES - TFS other genes G1..; every gene except a share ``UNREGULATED`` of
  them gets 1-3 TF regulators (never itself), 70 % activating, 30 % repressing. The TFs are among the targets
  too (TF -> TF edges).
* Each TF has one made-up motif (length 10-12, 85 % of the counts on a random consensus base). Every true edge
  plants the consensus (either strand, at a random free place) in the target's promoter window (-1000/+200 around
  the TSS: the motif-prior default). **Decoys**: every (TF, gene) pair that is *not* an edge gets a copy at rate
  ``DECOY_RATE``; chance hits of the random sequence (p < 1e-4, about 0.24 per motif per window) come on top.
  So the prior is informative but imperfect.
* **Predicted accessibility** (``accessibility.bw``, one value per promoter window, read by ``chromaflow
  gene-accessibility --bigwig``): a regulated gene's promoter is open with probability ``OPEN_IF_REGULATED``, an
  unregulated one with ``OPEN_IF_UNREGULATED`` -- a stand-in for a model whose open/closed calls are right ~80 %
  of the time. Hits in closed promoters are then mostly decoys. (Predictions of ``make-test-model``'s random
  weights have no relation to a planted truth, so a track drawn from it would measure nothing.)
* **Expression**: grnlab 0.3.0 (Hill kinetics, additive logic, parameters drawn by ``grnlab.build_model``); each
  sample is a steady state (``grnlab.steady_state``) of the network under a multifactorial perturbation like
  DREAM4's: every gene is knocked down (production x U(0.2, 0.8)) or over-expressed (x U(1.5, 3)) with
  probability 0.25 each, the factors drawn per sample; then 10 % log-normal measurement noise.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np

UNREGULATED = 0.3
DECOY_RATE = 0.1
OPEN_IF_REGULATED = 0.8
OPEN_IF_UNREGULATED = 0.2
UPSTREAM, DOWNSTREAM = 1000, 200
SLOT = 3500  # bp per gene locus: promoter window, a 1,500 bp gene body, intergenic sequence
BODY = 1500
RECORDS = 3
# steady_state integrates in windows of 20 / (smallest decay rate) until the residual is < 1e-8; a network that
# settles slowly (or oscillates) would go on to grnlab's 2,000 time units: after MAX_TIME the time average of the
# last window is taken, as grnlab does for oscillators
MAX_TIME = 120.0
BASES = np.array(list("ACGT"))
COMP = str.maketrans("ACGT", "TGCA")


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def network(seed: int, genes: int, tfs: int) -> dict:
    """Names, the signed edges {(tf, target): sign} and which genes are regulated."""
    rng = np.random.default_rng(seed)
    names = [f"TF{i + 1}" for i in range(tfs)] + [f"G{i + 1}" for i in range(genes - tfs)]
    edges: dict[tuple[str, str], int] = {}
    regulated = {}
    for g in names:
        regulated[g] = bool(rng.random() >= UNREGULATED)
        if not regulated[g]:
            continue
        cands = [t for t in names[:tfs] if t != g]
        k = int(rng.integers(1, 4))
        for t in rng.choice(cands, size=min(k, len(cands)), replace=False):
            edges[(str(t), g)] = 1 if rng.random() < 0.7 else -1
    return {"names": names, "tfs": names[:tfs], "edges": edges, "regulated": regulated}


def motifs(rng: np.random.Generator, tfs: list[str]) -> dict[str, dict]:
    out = {}
    for t in tfs:
        n = int(rng.integers(10, 13))
        cons = rng.integers(0, 4, size=n)
        counts = np.full((4, n), 5)
        counts[cons, np.arange(n)] = 85
        out[t] = {"id": f"PLANT_{t}", "consensus": "".join(BASES[cons]), "counts": counts}
    return out


def _genome(rng: np.random.Generator, names: list[str]) -> tuple[dict, dict]:
    """Random sequence of RECORDS records with the genes spread over them in shuffled order, random strands: the
    sequences (arrays of bases) and each gene's locus (seqid, start, end, strand, promoter window)."""
    order = [names[i] for i in rng.permutation(len(names))]
    per = -(-len(order) // RECORDS)
    seqs, loci = {}, {}
    for r in range(RECORDS):
        chunk = order[r * per : (r + 1) * per]
        length = len(chunk) * SLOT + 2000
        seq = BASES[rng.integers(0, 4, size=length)]
        for j, g in enumerate(chunk):
            base = 1000 + j * SLOT
            strand = "+" if rng.random() < 0.5 else "-"
            if strand == "+":
                start, end = base + UPSTREAM + 200, base + UPSTREAM + 200 + BODY  # 0-based, half-open
                tss = start
                win = (tss - UPSTREAM, tss + DOWNSTREAM)
            else:
                start, end = base + 300, base + 300 + BODY
                tss = end - 1
                win = (tss - DOWNSTREAM + 1, tss + UPSTREAM + 1)
            loci[g] = {"seqid": f"chr{r + 1}", "start": start, "end": end, "strand": strand, "window": win}
        seqs[f"chr{r + 1}"] = seq
    return seqs, loci


def _plant(rng: np.random.Generator, net: dict, mot: dict, seqs: dict, loci: dict) -> dict:
    """Motif copies into the promoter windows (in place): true edges always, decoys at DECOY_RATE, at free
    non-overlapping places inside the window; how many of each."""
    planted = {"true": 0, "decoy": 0}
    for g in net["names"]:
        lo, hi = loci[g]["window"]
        lo, hi = lo + 20, hi - 20
        free = list(range(lo, hi - 12, 14))
        rng.shuffle(free)
        for t in net["tfs"]:
            if t == g:
                continue
            kind = "true" if (t, g) in net["edges"] else ("decoy" if rng.random() < DECOY_RATE else None)
            if kind is None or not free:
                continue
            pos = free.pop()
            m = mot[t]["consensus"]
            if rng.random() < 0.5:
                m = m.translate(COMP)[::-1]
            seqs[loci[g]["seqid"]][pos : pos + len(m)] = list(m)
            planted[kind] += 1
    return planted


def write_fasta(path: Path, records: dict[str, str]) -> None:
    """A FASTA of ``records`` ({seqid: sequence}), 60 bases a line, written atomically."""
    fa = [f">{sid}\n" + "\n".join(s[i : i + 60] for i in range(0, len(s), 60)) + "\n" for sid, s in records.items()]
    _write_atomic(path, "".join(fa))


def write_gff(path: Path, loci: dict[str, dict]) -> None:
    """A GFF3 of one ``gene`` feature per locus ({gene: {seqid, start (0-based), end, strand}}), by position."""
    gff = ["##gff-version 3"]
    for g in sorted(loci, key=lambda x: (loci[x]["seqid"], loci[x]["start"])):
        lc = loci[g]
        gff.append(f"{lc['seqid']}\tplanted\tgene\t{lc['start'] + 1}\t{lc['end']}\t.\t{lc['strand']}\t.\tID={g}")
    _write_atomic(path, "\n".join(gff) + "\n")


def _write_network_files(out: Path, net: dict, mot: dict, seqs: dict, loci: dict) -> None:
    """genome.fa, genes.gff3, motifs.jaspar, tf_motifs.tsv, regulators.txt and gold.tsv."""
    names = net["names"]
    write_fasta(out / "genome.fa", {sid: "".join(seq) for sid, seq in seqs.items()})
    write_gff(out / "genes.gff3", loci)
    jas = []
    for t in net["tfs"]:
        jas.append(
            f">{mot[t]['id']}\t{t}\n"
            + "".join(f"{b} [ {' '.join(str(int(x)) for x in mot[t]['counts'][i])} ]\n" for i, b in enumerate("ACGT"))
        )
    _write_atomic(out / "motifs.jaspar", "".join(jas))
    _write_atomic(out / "tf_motifs.tsv", "".join(f"{t}\t{mot[t]['id']}\n" for t in net["tfs"]))
    _write_atomic(out / "regulators.txt", "".join(f"{t}\n" for t in net["tfs"]))
    _write_atomic(
        out / "gold.tsv",
        "".join(f"{t}\t{g}\t{int((t, g) in net['edges'])}\n" for t in net["tfs"] for g in names if g != t),
    )


def make(outdir: str, seed: str, genes: str, tfs: str, samples: str) -> None:
    """The planted network of ``seed`` and its files in ``outdir`` (see the module docstring)."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    seed_i, G, T, S = int(seed), int(genes), int(tfs), int(samples)
    net = network(seed_i, G, T)
    rng = np.random.default_rng([seed_i, 1])
    mot = motifs(rng, net["tfs"])
    names = net["names"]
    seqs, loci = _genome(rng, names)
    planted = _plant(rng, net, mot, seqs, loci)
    # predicted accessibility of each promoter window
    open_ = {g: bool(rng.random() < (OPEN_IF_REGULATED if net["regulated"][g] else OPEN_IF_UNREGULATED)) for g in names}
    level = {g: float(rng.uniform(20, 60) if open_[g] else rng.uniform(0, 5)) for g in names}
    _write_network_files(out, net, mot, seqs, loci)
    _bigwig(out / "atac.bw", seqs, loci, level)
    X = simulate(net, S, seed_i)
    _write_atomic(
        out / "expression.tsv",
        "\t".join(names) + "\n" + "".join("\t".join(f"{v:.6g}" for v in row) + "\n" for row in X),
    )
    truth = {
        "seed": seed_i,
        "genes": G,
        "tfs": T,
        "samples": S,
        "edges": len(net["edges"]),
        "regulated": sum(net["regulated"].values()),
        "planted": planted,
        "open_promoters": sum(open_.values()),
        "decoy_rate": DECOY_RATE,
        "unregulated": UNREGULATED,
        "open_if_regulated": OPEN_IF_REGULATED,
        "open_if_unregulated": OPEN_IF_UNREGULATED,
        "simulator": "grnlab " + _version("grnlab"),
    }
    _write_atomic(out / "truth.json", json.dumps(truth, indent=1) + "\n")


def _version(dist: str) -> str:
    from importlib import metadata

    return metadata.version(dist)


def _bigwig(path: Path, seqs: dict, loci: dict, level: dict) -> None:
    import pyBigWig

    tmp = path.with_name(path.name + ".tmp.bw")
    bw = pyBigWig.open(str(tmp), "w")
    bw.addHeader([(s, len(v)) for s, v in seqs.items()])
    for sid in seqs:
        ws = sorted((lc["window"], g) for g, lc in loci.items() if lc["seqid"] == sid)
        bw.addEntries(
            [sid] * len(ws), [w[0] for w, _ in ws], ends=[w[1] for w, _ in ws], values=[level[g] for _, g in ws]
        )
    bw.close()
    tmp.replace(path)


def simulate(net: dict, samples: int, seed: int) -> np.ndarray:
    """samples x genes steady states of the network under random multifactorial perturbations (grnlab)."""
    import grnlab as grn

    if not hasattr(np, "trapz"):
        # grnlab 0.3.0's steady_state calls np.trapz, which numpy 2.4 removed (np.trapezoid is the same rule)
        np.trapz = np.trapezoid
    names = net["names"]
    idx = {g: i for i, g in enumerate(names)}
    A = np.zeros((len(names), len(names)))
    for (t, g), s in net["edges"].items():
        A[idx[g], idx[t]] = s  # grnlab: row i lists the regulators of gene i
    model = grn.build_model(A, logic="additive", seed=seed, labels=names)
    rng = np.random.default_rng([seed, 2])
    X = np.empty((samples, len(names)))
    x0 = grn.steady_state(model, seed=seed)  # each perturbed steady state starts from the unperturbed one
    for s in range(samples):
        u = rng.random(len(names))
        down, up = np.flatnonzero(u < 0.25), np.flatnonzero(u > 0.75)
        m = model
        if down.size:
            m = grn.perturb(m, knockdown=down.tolist(), knockdown_factor=float(rng.uniform(0.2, 0.8)))
        if up.size:
            m = grn.perturb(m, overexpress=up.tolist(), overexpress_factor=float(rng.uniform(1.5, 3)))
        X[s] = grn.steady_state(m, initial_condition=x0, max_time=MAX_TIME, seed=seed + s)
    X *= np.exp(rng.normal(0, 0.1, size=X.shape))
    return X


def _read_prior(path: str) -> tuple[list[str], list[list[str]]]:
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as f:
        head = f.readline().rstrip("\n").split("\t")
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    return head, rows


def _write_links(out: str, links: list[tuple[str, str, float]]) -> None:
    tmp = out + ".tmp"
    with gzip.GzipFile(tmp, "wb", mtime=0) as f:
        f.write(("regulator\ttarget\timportance\n" + "".join(f"{r}\t{t}\t{w:.6g}\n" for r, t, w in links)).encode())
    Path(tmp).replace(out)


def _prior_value(x: str) -> float:
    return 0.5 if x in ("", "NA") else float(x)


def rank_prior(prior: str, out: str) -> None:
    """The prior alone: weight = prior + 1e-3 x hits (hits break the ties of prior 1: more sites, more likely)."""
    head, rows = _read_prior(prior)
    c = {k: head.index(k) for k in ("regulator", "target", "prior", "hits")}
    links = [(r[c["regulator"]], r[c["target"]], _prior_value(r[c["prior"]]) + 1e-3 * int(r[c["hits"]])) for r in rows]
    links.sort(key=lambda x: (-x[2], x[0], x[1]))
    _write_links(out, links)


def shuffle_prior(prior: str, out: str, seed: str) -> None:
    """The prior's values (with their hits and accessibility) permuted over the pairs: same density, no signal."""
    head, rows = _read_prior(prior)
    rng = np.random.default_rng(int(seed))
    perm = rng.permutation(len(rows))
    ci = [head.index("regulator"), head.index("target")]
    new = [[r[i] if i in ci else rows[p][i] for i in range(len(head))] for r, p in zip(rows, perm)]
    tmp = out + ".tmp"
    with gzip.GzipFile(tmp, "wb", mtime=0) as f:
        f.write(("\t".join(head) + "\n" + "".join("\t".join(r) + "\n" for r in new)).encode())
    Path(tmp).replace(out)


def precision_at(y: np.ndarray, s: np.ndarray, k: int) -> float:
    """Expected precision of the top k links when ties at the cut are broken at random (the prior alone ties)."""
    order = np.sort(s)[::-1]
    cut = order[k - 1]
    above = s > cut
    tied = s == cut
    n_above = int(above.sum())
    take = k - n_above
    return float((y[above].sum() + take * y[tied].mean()) / k)


def _aligned(gold: dict, *weights: dict) -> tuple[list[tuple[str, str]], np.ndarray, list[np.ndarray]]:
    """The gold standard's (TF, target) pairs in sorted order (as ``dream4.score`` scores them), their labels
    (float, 0/1) and each link list's weights on those pairs (a pair a list lacks weighs 0)."""
    keys = sorted(gold)
    y = np.array([gold[k] for k in keys], dtype=float)
    return keys, y, [np.array([w.get(k, 0.0) for k in keys], dtype=float) for w in weights]


def score(links: str, gold: str) -> dict:
    from chromaflow.genie3 import dream4

    g = dream4.read_gold(gold)
    w = dream4.read_links(links)
    res = dream4.score(g, w)
    keys, y, (s,) = _aligned(g, w)
    for pct in (0.1, 0.5, 1.0):
        k = max(1, int(round(len(keys) * pct / 100)))
        res[f"p_at_{pct:g}pct"] = precision_at(y, s, k)
        res[f"k_at_{pct:g}pct"] = k
    return res


def paired_difference(links_a: str, links_b: str, gold: str, n_boot: int = 1000, seed: int = 0) -> dict:
    """AUPR of ``links_a`` minus that of ``links_b`` on the same gold standard, and its standard error by a paired
    bootstrap over the *targets* (each resample draws targets with replacement and keeps all their (TF, target)
    pairs, in both link lists alike: a target's edges share its promoter, so they are not independent draws).
    Returns {"aupr_diff", "se", "n_boot", "targets"}; resamples without a true edge are skipped. Seeded: the same
    files give the same figures."""
    from sklearn.metrics import average_precision_score

    from chromaflow.genie3 import dream4

    keys, y, (a, b) = _aligned(dream4.read_gold(gold), dream4.read_links(links_a), dream4.read_links(links_b))
    targets = sorted({k[1] for k in keys})
    rows = [np.flatnonzero([k[1] == t for k in keys]) for t in targets]
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(n_boot):
        idx = np.concatenate([rows[i] for i in rng.integers(0, len(targets), len(targets))])
        if y[idx].any():
            diffs.append(average_precision_score(y[idx], a[idx]) - average_precision_score(y[idx], b[idx]))
    return {
        "aupr_diff": float(average_precision_score(y, a) - average_precision_score(y, b)),
        "se": float(np.std(diffs, ddof=1)),
        "n_boot": len(diffs),
        "targets": len(targets),
    }


def main(argv: list[str]) -> int:
    kind, args = argv[0], argv[1:]
    if kind == "make":
        make(*args)
    elif kind == "rank-prior":
        rank_prior(*args)
    elif kind == "shuffle-prior":
        shuffle_prior(*args)
    elif kind == "score":
        print(json.dumps(score(*args)))
    elif kind == "paired-difference":
        print(json.dumps(paired_difference(*args)))
    else:
        raise SystemExit(f"harness.planted: unknown kind {kind!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
