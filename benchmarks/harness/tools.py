"""Child-process tools of the ``bigwig_writers``, ``variant`` and ``genie3_prior`` stages, each run as its own process
(``python -m benchmarks.harness.tools KIND ...``, with :func:`benchmarks.harness.env.child_env`): a measured
command (a bigWig writer) or a seeded input. Every input is deterministic: same arguments, same bytes.

    bigwig-write WRITER OUT N MEAN_BP SEED THREADS
        write N seeded intervals (one chromosome, geometric run lengths of mean MEAN_BP, values 0..3, like a
        predictions track) with WRITER (chromaflow-l1, chromaflow-l6: our writer at libdeflate level 1 / 6;
        pybigwig; pybigtools) into OUT; prints the seconds of the write call alone (the timed process also makes
        the intervals and starts Python, about the same for every writer)
    bigwig-check OUT N MEAN_BP SEED
        OUT read back with pyBigWig holds exactly those N intervals; one JSON line, exit 1 when it does not
    variants OUT.vcf.gz FASTA N SEED
        N variant records at seeded random positions of FASTA (70 % SNVs, 15 % insertions of 1-10 bp, 15 %
        deletions of 1-10 bp, every 20th record with a second ALT), bgzipped and tabix-indexed
    random-prior OUT EXPRESSION SEED
        a long prior table over every ordered pair of the expression's genes (samples x genes): prior 1 with
        probability 0.1, 0 with 0.6, NA otherwise
    gold-priors OUTDIR GOLD SEED
        OUTDIR/informative.tsv from the gold standard (each pair NA with probability 0.3, else 1 with probability
        0.6 for a true edge and 0.05 for a false one) and OUTDIR/shuffled.tsv (the same values permuted over the
        pairs)
    prior-null OUT.json SETDIR N SEED
        the prior checks of N relabellings of a real set's prior (``benchmarks/genie3/grn_data.py``'s SETDIR: its
        regulator ids permuted among the regulators, its target ids among the genes, ``default_rng(SEED)``): how
        often the default relabelling test and the correlation test keep a prior with swapped ids (one JSON file)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

WRITERS = ("chromaflow-l1", "chromaflow-l6", "pybigwig", "pybigtools")


# --------------------------------------------------------------------------------------------------
# bigWig writers
# --------------------------------------------------------------------------------------------------
def intervals(n: int, mean: float, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, values) of n seeded intervals, back to back from 0."""
    rng = np.random.default_rng(seed)
    lens = rng.geometric(1 / mean, n).astype(np.int64)
    ends = np.cumsum(lens)
    vals = rng.integers(0, 4, n).astype(np.float32)
    return ends - lens, ends, vals


def bigwig_write(writer: str, out: str, n: str, mean: str, seed: str, threads: str) -> None:
    s, e, v = intervals(int(n), float(mean), int(seed))
    size, count = int(e[-1]), len(s)
    t0 = time.perf_counter()
    if writer.startswith("chromaflow"):
        from concurrent.futures import ThreadPoolExecutor

        from chromaflow.bigwig.bigwigfile import BigWigWriter

        pool = ThreadPoolExecutor(int(threads)) if int(threads) > 1 else None
        w = BigWigWriter(out, [("chr1", size)], pool, level=int(writer[-1]))
        step = 1 << 20  # written in pieces, as the converter does
        for a in range(0, count, step):
            w.write("chr1", s[a : a + step], e[a : a + step], v[a : a + step])
        w.close()
    elif writer == "pybigwig":
        import pyBigWig

        bw = pyBigWig.open(out, "w")
        bw.addHeader([("chr1", size)])
        bw.addEntries(["chr1"] * count, s, ends=e, values=v.astype(np.float64))
        bw.close()
    elif writer == "pybigtools":
        import pybigtools

        bw = pybigtools.open(out, "w")
        bw.write({"chr1": size}, zip(["chr1"] * count, s.tolist(), e.tolist(), v.tolist()))
    else:
        raise SystemExit(f"unknown writer {writer!r}; choose from {', '.join(WRITERS)}")
    print(time.perf_counter() - t0)


def bigwig_check(out: str, n: str, mean: str, seed: str) -> None:
    import pyBigWig

    s, e, v = intervals(int(n), float(mean), int(seed))
    bw = pyBigWig.open(out)
    got = np.array(bw.intervals("chr1") or [], dtype=np.float64).reshape(-1, 3)
    bw.close()
    ok = len(got) == len(s) and all(np.array_equal(got[:, k], x) for k, x in enumerate((s, e, v)))
    print(json.dumps({"ok": bool(ok), "intervals": len(got), "written": len(s)}))
    sys.exit(0 if ok else 1)


# --------------------------------------------------------------------------------------------------
# variant-effect inputs
# --------------------------------------------------------------------------------------------------
def _read_fasta(path: str) -> dict[str, str]:
    seqs: dict[str, list[str]] = {}
    name = ""
    for line in Path(path).read_text().splitlines():
        if line.startswith(">"):
            name = line[1:].split()[0]
            seqs[name] = []
        else:
            seqs[name].append(line)
    return {k: "".join(v) for k, v in seqs.items()}


def _variant_lines(seqs: dict[str, str], n: int, rng: np.random.Generator) -> list[str]:
    names = list(seqs)
    recs: set = set()
    while len(recs) < n:
        c = names[int(rng.integers(len(names)))]
        recs.add((c, int(rng.integers(100, len(seqs[c]) - 100))))
    lines = []
    for i, (c, p) in enumerate(sorted(recs, key=lambda t: (names.index(t[0]), t[1]))):
        s = seqs[c]
        u = rng.random()
        if u < 0.70:
            ref, alt = s[p - 1], "ACGT"[("ACGT".index(s[p - 1]) + int(rng.integers(1, 4))) % 4]
        elif u < 0.85:
            ref, alt = s[p - 1], s[p - 1] + "".join("ACGT"[int(k)] for k in rng.integers(0, 4, rng.integers(1, 11)))
        else:
            k = int(rng.integers(1, 11))
            ref, alt = s[p - 1 : p + k], s[p - 1]
        if i % 20 == 19 and len(ref) == 1:
            alt += "," + "".join(b for b in "ACGT" if b != ref and b != alt[0])[:1]
        lines.append(f"{c}\t{p}\tv{i}\t{ref}\t{alt}\t.\t.\t.")
    return lines


def variants(out: str, fasta: str, n: str, seed: str) -> None:
    """The VCF of benchmarks/variant (the generator of bench_variant.py, same draws: seed + 1)."""
    import pysam

    seqs = _read_fasta(fasta)
    lines = _variant_lines(seqs, int(n), np.random.default_rng(int(seed) + 1))
    head = "##fileformat=VCFv4.2\n" + "".join(f"##contig=<ID={c},length={len(s)}>\n" for c, s in seqs.items())
    plain = Path(out + ".tmp.vcf")
    plain.write_text(head + "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n" + "\n".join(lines) + "\n")
    tmp = out + ".tmp.gz"
    pysam.tabix_compress(str(plain), tmp, force=True)
    pysam.tabix_index(tmp, preset="vcf", force=True)
    plain.unlink()
    Path(tmp + ".tbi").replace(out + ".tbi")
    Path(tmp).replace(out)


# --------------------------------------------------------------------------------------------------
# genie3 --prior inputs
# --------------------------------------------------------------------------------------------------
def _genes(expression: str) -> list[str]:
    from chromaflow.genie3.expression import read_expression

    return list(read_expression(expression, "samples-x-genes").genes)


def _write_prior(out: Path, rows) -> None:
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "w") as f:
        f.write("regulator\ttarget\tprior\n")
        for r, t, pi in rows:
            f.write(f"{r}\t{t}\t{'NA' if pi == 0.5 else f'{pi:g}'}\n")
    tmp.replace(out)


def random_prior(out: str, expression: str, seed: str) -> None:
    """The cost study's prior (run_benchmark.py prior's, same draws): per ordered pair, self-pairs left out."""
    genes = _genes(expression)
    G = len(genes)
    rng = np.random.default_rng(int(seed))
    reg, tgt = np.divmod(np.arange(G * G), G)
    keep = reg != tgt
    u = rng.uniform(size=G * G)
    pi = np.where(u < 0.1, 1.0, np.where(u < 0.7, 0.0, 0.5))[keep]
    _write_prior(Path(out), ((genes[r], genes[t], p) for r, t, p in zip(reg[keep], tgt[keep], pi)))


def gold_priors(outdir: str, gold: str, seed: str) -> None:
    """The accuracy study's priors (run_benchmark.py prior's, same draws), informative.tsv and shuffled.tsv."""
    from chromaflow.genie3 import dream4

    truth = dream4.read_gold(gold)
    keys = sorted(truth)
    rng = np.random.default_rng(int(seed))
    na = rng.uniform(size=len(keys)) < 0.3
    hit = rng.uniform(size=len(keys)) < np.array([0.6 if truth[k] else 0.05 for k in keys])
    pi = np.where(na, 0.5, np.where(hit, 1.0, 0.0))
    shuffled = pi[rng.permutation(len(pi))]
    Path(outdir).mkdir(parents=True, exist_ok=True)
    for name, values in (("informative", pi), ("shuffled", shuffled)):
        _write_prior(Path(outdir) / f"{name}.tsv", ((r, t, p) for (r, t), p in zip(keys, values)))


def prior_null(out: str, setdir: str, n: str, seed: str) -> None:
    """How often each check keeps a real set's prior with its ids swapped (the null of the relabelling test, drawn as
    ``genie3_prior.shuffle_prior`` draws it): N relabellings, each checked with its own seed."""
    from chromaflow.genie3.expression import read_expression, read_regulators
    from chromaflow.genie3.prior import Prior, read_prior
    from chromaflow.genie3.prior_check import check_prior
    from chromaflow.genie3.prior_relabel import LEVEL, check_prior_relabel

    d = Path(setdir)
    e = read_expression(d / "expression.tsv", "genes-x-samples")
    regs = np.asarray(read_regulators(d / "regulators.txt", e), dtype=np.int64)
    pr = read_prior(d / "prior.tsv", e.genes)
    rng = np.random.default_rng(int(seed))
    relabel, correlation = [], []
    t0 = time.process_time()
    for i in range(int(n)):
        rmap = np.arange(e.n_genes)
        rmap[regs] = regs[rng.permutation(len(regs))]
        tmap = rng.permutation(e.n_genes)
        p = Prior(rmap[pr.reg], tmap[pr.tgt], pr.pi, pr.layout, pr.pairs_read, pr.ignored, pr.path)
        relabel.append(check_prior_relabel(e.values, e.genes, regs, p, LEVEL, i))
        correlation.append(check_prior(e.values, e.genes, regs, p, LEVEL))
    doc = {
        "n": int(n),
        "level": LEVEL,
        "relabel_kept": sum(r["decision"] == "kept" for r in relabel),
        "relabel_p_below_0.05": sum(r["p"] < 0.05 for r in relabel),
        "correlation_kept": sum(r["decision"] == "kept" for r in correlation),
        "correlation_z": [r["z"] for r in correlation],
        "relabel_z": [r["z"] for r in relabel],
        "cpu_s_per_prior": (time.process_time() - t0) / max(int(n), 1),
    }
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")


KINDS = {
    "bigwig-write": bigwig_write,
    "bigwig-check": bigwig_check,
    "variants": variants,
    "random-prior": random_prior,
    "gold-priors": gold_priors,
    "prior-null": prior_null,
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in KINDS:
        raise SystemExit(f"usage: python -m benchmarks.harness.tools {{{','.join(KINDS)}}} ARGS... (see its __doc__)")
    KINDS[argv[0]](*argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
