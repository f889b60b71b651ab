"""The planted genome of issue 53 (item 5): a seeded genome in which real JASPAR plant motifs *cause* the coverage,
for the whole chain reads -> coverage -> training -> prediction -> peaks -> attribution -> motifs -> prior -> network
(:mod:`benchmarks.harness.chain_run` runs it; the ``chain`` harness stage and ``tests/benchmarks/test_chain.py`` call
that). ``python -m benchmarks.harness.chain OUTDIR SEED SIZE`` writes the files; same arguments, same bytes.

What is planted (every draw from ``numpy.random.default_rng([SEED, k])``):

* **Motifs**: three JASPAR 2024 CORE plant matrices from pyjaspar's bundled release, of three families, whose sites
  open chromatin -- AGL15 ``MA0548.3`` (MADS, JASPAR family ``Type II``, 16 bp), WRKY33 ``MA1301.2`` (``WRKY``,
  10 bp), bHLH77 ``MA1362.2`` (``bHLH``, 12 bp) -- and a **decoy**, ARF25 ``MA1690.2`` (``ARF``, 12 bp), planted as
  often but causing nothing. Matrices of 10 bp or more: the 6-bp W-box of WRKY40 (``MA1085.3``) occurs by chance
  about once per kilobase of random sequence, as often as the planted sites, so no model could tell them apart.
  Each instance is drawn from the matrix's PPM *sharpened* (squared and renormalised: a clear site, as a bound one
  is) on a random strand.
* **Assemblies**: ``train1``.. (split train), ``val1`` (val) and ``test1`` (test, the held-out genome the network
  lives in), uniform random sequence (A, C, G, T 1/4 each). In the train and val assemblies, sites of the three
  families and decoy instances sit at random non-overlapping places; in ``test1``, genes (``GENE_SLOT`` bp each, a
  1,500-bp body, random strand) whose promoter windows (-1,000/+200 around the TSS, motif-prior's default) hold the
  network's sites.
* **Coverage** (``<id>.atac.bw``, read by ``chromaflow add-coverage --bigwig --unstranded``): ATAC-like fragments.
  Each site of a planted family draws Poisson(``FRAGMENTS`` x strength) fragments, strength U(0.6, 1.4), centred
  at the site +- N(0, 30) bp, 50-120 bp long (narrower than most ATAC-seq peaks: with peaks of ~300 bp, N(0, 50) and
  80-200 bp, the small model's held-out Pearson fell from 0.52 to 0.31 and the bHLH motif was missed); background
  fragments fall uniformly (mean depth ``BACKGROUND``). The bigWig holds the pileup of every fragment (reads, not an
  idealised shape). Decoy instances draw none.
* **Network** (``test1``'s genes): TFs ``MADS1 MADS2 WRKY1 WRKY2 BHLH1 BHLH2`` (two per planted family, sharing its
  motif) and ``ARF1 ARF2`` (the decoy's family, regulating nothing), then ``G1..``. A gene is regulated with
  probability ``REGULATED``, by one or two of the planted families; for each, one member TF (not the gene itself)
  is its regulator (70 % activating) and the family's site is planted in the gene's promoter window, where it opens
  chromatin like any site. Half of all promoters get a decoy ARF instance. Expression: grnlab steady states under
  DREAM4-like multifactorial perturbations (the simulator of :mod:`benchmarks.harness.planted`).

Files: ``<split>/<id>.fa`` and ``<split>/<id>.atac.bw`` per assembly, ``test1.gff3`` (genes), ``expression.tsv``
(samples x genes), ``regulators.txt``, ``tf_families.tsv`` (TF, JASPAR family: what a user knows of a non-model
species' TFs), ``tf_motifs.tsv`` (TF, the planted JASPAR matrix: the prior from the database's own motifs, decoy
included), ``gold.tsv`` (TF, gene, 0/1), ``sites.bed`` (every planted instance of test1: family, strand),
``truth.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from .contrib import jaspar_ppm
from .planted import _write_atomic, simulate, write_fasta, write_gff

#: planted families: name -> (JASPAR matrix, JASPAR tf_family)
FAMILIES = {"MADS": ("MA0548.3", "Type II"), "WRKY": ("MA1301.2", "WRKY"), "BHLH": ("MA1362.2", "bHLH")}
#: the decoy family: planted, causes nothing
DECOY = ("ARF", "MA1690.2", "ARF")
#: sizes: assemblies' sites, genes, samples. A model needs the sites: with 260 per train assembly (~90 per family)
#: a small CNN memorised the train assemblies (train Pearson 0.9, val 0.2); with 1,200 its val Pearson was 0.6
SIZES = {
    # the suite's (tests/benchmarks/test_chain.py): minutes on 2 cores
    "small": {
        "train_assemblies": 2,
        "train_sites": 1200,
        "val_sites": 150,
        "test_sites": 300,
        "genes": 60,
        "samples": 60,
    },
    # the harness case's
    "full": {
        "train_assemblies": 4,
        "train_sites": 1500,
        "val_sites": 300,
        "test_sites": 900,
        "genes": 200,
        "samples": 100,
    },
}
SITE_SPACING = 700  # bp per site slot in the train/val assemblies (a site, its peak and flanks)
GENE_SLOT = 3500  # bp per gene locus in test1
BODY = 1500
UPSTREAM, DOWNSTREAM = 1000, 200
RECORD_SLOTS = 120  # site (or gene) slots per record
FRAGMENTS = 120  # mean fragments per site at strength 1
BACKGROUND = 0.5  # mean background depth
REGULATED = 0.75
DECOY_SHARE = 0.5  # of the train/val sites, as decoys (on top); of test1's promoters
BASES = np.array(list("ACGT"))


def instance(rng: np.random.Generator, ppm: np.ndarray) -> np.ndarray:
    """One site (base indices 0-3, A C G T) drawn from the squared PPM, on a random strand."""
    p = ppm**2
    p = p / p.sum(axis=0, keepdims=True)
    cum = p.cumsum(axis=0)
    site = (rng.random(p.shape[1])[None, :] > cum).sum(axis=0).clip(0, 3)
    return 3 - site[::-1] if rng.random() < 0.5 else site


class Assembly:
    """One assembly's sequence and fragments, built record by record."""

    def __init__(self, name: str, split: str, rng: np.random.Generator):
        self.name, self.split, self.rng = name, split, rng
        self.records: dict[str, np.ndarray] = {}
        self.sites: list[tuple[str, int, int, str, bool]] = []  # seqid, start, end, family, opens

    def record(self, length: int) -> str:
        sid = f"{self.name}_r{len(self.records) + 1}"
        self.records[sid] = self.rng.integers(0, 4, length)
        return sid

    def plant(self, sid: str, pos: int, family: str, ppm: np.ndarray, opens: bool) -> None:
        site = instance(self.rng, ppm)
        self.records[sid][pos : pos + len(site)] = site
        self.sites.append((sid, pos, pos + len(site), family, opens))

    def coverage(self, sid: str) -> np.ndarray:
        """Pileup of the record's fragments: background plus each opening site's."""
        n = len(self.records[sid])
        diff = np.zeros(n + 1)
        nbg = self.rng.poisson(BACKGROUND * n / 110)
        starts = [self.rng.integers(0, n, nbg)]
        lens = [self.rng.integers(60, 161, nbg)]
        for s, a, b, _, opens in self.sites:
            if s != sid or not opens:
                continue
            k = self.rng.poisson(FRAGMENTS * self.rng.uniform(0.6, 1.4))
            ln = self.rng.integers(50, 121, k)
            centre = (a + b) / 2 + self.rng.normal(0, 30, k)
            starts.append(np.round(centre - ln / 2).astype(np.int64))
            lens.append(ln)
        st = np.concatenate(starts).clip(0, n)
        en = (st + np.concatenate(lens)).clip(0, n)
        np.add.at(diff, st, 1)
        np.add.at(diff, en, -1)
        return np.cumsum(diff[:n])

    def write(self, out: Path) -> dict[str, Path]:
        """``<split>/<name>.fa`` and ``<split>/<name>.atac.bw``."""
        import pyBigWig

        d = out / self.split
        d.mkdir(parents=True, exist_ok=True)
        write_fasta(d / f"{self.name}.fa", {sid: "".join(BASES[seq]) for sid, seq in self.records.items()})
        bw_path = d / f"{self.name}.atac.bw"
        tmp = bw_path.with_name(bw_path.name + ".tmp.bw")
        bw = pyBigWig.open(str(tmp), "w")
        bw.addHeader([(s, len(v)) for s, v in self.records.items()])
        for sid in self.records:
            cov = self.coverage(sid)
            bw.addEntries(sid, 0, values=cov.astype(np.float64).tolist(), span=1, step=1)
        bw.close()
        tmp.replace(bw_path)
        return {"fasta": d / f"{self.name}.fa", "bigwig": bw_path}


def _site_kinds(n_sites: int, rng: np.random.Generator) -> list[str]:
    """``n_sites`` sites of the planted families (in turn) and ``DECOY_SHARE`` as many decoys, shuffled."""
    kinds = [f for f in FAMILIES for _ in range(n_sites // len(FAMILIES))] + [DECOY[0]] * int(n_sites * DECOY_SHARE)
    return [kinds[i] for i in rng.permutation(len(kinds))]


def _site_records(asm: Assembly, kinds: list[str], rng: np.random.Generator, ppms: dict) -> None:
    """Records of one site per ``SITE_SPACING`` slot (at a random place in it), ``RECORD_SLOTS`` slots a record."""
    for r in range(0, len(kinds), RECORD_SLOTS):
        chunk = kinds[r : r + RECORD_SLOTS]
        sid = asm.record(len(chunk) * SITE_SPACING + 2 * SITE_SPACING)
        for j, fam in enumerate(chunk):
            pos = SITE_SPACING + j * SITE_SPACING + int(rng.integers(100, SITE_SPACING - 120))
            asm.plant(sid, pos, fam, ppms[fam], fam != DECOY[0])


def _site_assembly(name: str, split: str, n_sites: int, rng: np.random.Generator, ppms: dict) -> Assembly:
    """An assembly of ``n_sites`` sites of the planted families plus decoys, one per slot."""
    asm = Assembly(name, split, rng)
    _site_records(asm, _site_kinds(n_sites, rng), rng, ppms)
    return asm


def _network(rng: np.random.Generator, genes: int) -> dict:
    """TF and gene names, the signed edges {(tf, gene): sign} and each gene's regulating families."""
    tfs = [f"{f}{i}" for f in FAMILIES for i in (1, 2)] + [f"{DECOY[0]}1", f"{DECOY[0]}2"]
    names = tfs + [f"G{i + 1}" for i in range(genes - len(tfs))]
    edges: dict[tuple[str, str], int] = {}
    families: dict[str, list[str]] = {}
    for g in names:
        families[g] = []
        if rng.random() >= REGULATED:
            continue
        k = 1 if rng.random() < 0.6 else 2
        for fam in [list(FAMILIES)[i] for i in sorted(rng.choice(len(FAMILIES), k, replace=False))]:
            members = [t for t in (f"{fam}1", f"{fam}2") if t != g]
            t = members[int(rng.integers(0, len(members)))]
            edges[(t, g)] = 1 if rng.random() < 0.7 else -1
            families[g].append(fam)
    family_of = {t: t[:-1] for t in tfs}  # MADS1 -> MADS
    return {"names": names, "tfs": tfs, "edges": edges, "families": families, "family_of": family_of}


def _test_assembly(rng: np.random.Generator, net: dict, ppms: dict, n_sites: int) -> tuple[Assembly, dict]:
    """test1: the network's genes, their promoters holding their regulators' family sites (and decoys); then
    records of ``n_sites`` sites away from genes (more peaks to learn motifs from than the promoters give)."""
    asm = Assembly("test1", "test", rng)
    names = [net["names"][i] for i in rng.permutation(len(net["names"]))]
    loci = {}
    for r in range(0, len(names), RECORD_SLOTS):
        chunk = names[r : r + RECORD_SLOTS]
        sid = asm.record(len(chunk) * GENE_SLOT + 2000)
        for j, g in enumerate(chunk):
            base = 1000 + j * GENE_SLOT
            strand = "+" if rng.random() < 0.5 else "-"
            if strand == "+":
                start, end = base + UPSTREAM + 200, base + UPSTREAM + 200 + BODY
                tss, win = start, (start - UPSTREAM, start + DOWNSTREAM)
            else:
                start, end = base + 300, base + 300 + BODY
                tss, win = end - 1, (end - 1 - DOWNSTREAM + 1, end - 1 + UPSTREAM + 1)
            loci[g] = {"seqid": sid, "start": start, "end": end, "strand": strand, "tss": tss, "window": win}
            # slots of 200 bp in the window, 40 bp from its ends: a site each, in random order
            slots = list(range(win[0] + 40, win[1] - 60, 200))
            slots = [slots[i] for i in rng.permutation(len(slots))]
            kinds = list(net["families"][g]) + ([DECOY[0]] if rng.random() < DECOY_SHARE else [])
            for fam, pos in zip(kinds, slots):
                asm.plant(sid, pos + int(rng.integers(0, 140)), fam, ppms[fam], fam != DECOY[0])
    _site_records(asm, _site_kinds(n_sites, rng), rng, ppms)
    return asm, loci


def make(outdir: str, seed: str, size: str) -> dict:
    """Every file of the planted genome of ``seed`` at ``size`` (:data:`SIZES`) in ``outdir``; returns truth.json."""
    if size not in SIZES:
        raise SystemExit(f"chain: size {size!r} is not one of {sorted(SIZES)}")
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    z, s = SIZES[size], int(seed)
    ppms = {f: jaspar_ppm(m) for f, (m, _) in FAMILIES.items()}
    ppms[DECOY[0]] = jaspar_ppm(DECOY[1])
    files = {}
    asms = [
        _site_assembly(f"train{i + 1}", "train", z["train_sites"], np.random.default_rng([s, 10 + i]), ppms)
        for i in range(z["train_assemblies"])
    ]
    asms.append(_site_assembly("val1", "val", z["val_sites"], np.random.default_rng([s, 9]), ppms))
    net = _network(np.random.default_rng([s, 1]), z["genes"])
    test, loci = _test_assembly(np.random.default_rng([s, 2]), net, ppms, z["test_sites"])
    asms.append(test)
    for a in asms:
        files[a.name] = {k: str(v.relative_to(out)) for k, v in a.write(out).items()} | {"split": a.split}
    write_gff(out / "test1.gff3", loci)
    X = simulate({"names": net["names"], "edges": net["edges"]}, z["samples"], s)
    _write_atomic(
        out / "expression.tsv",
        "\t".join(net["names"]) + "\n" + "".join("\t".join(f"{v:.6g}" for v in row) + "\n" for row in X),
    )
    _write_atomic(out / "regulators.txt", "".join(f"{t}\n" for t in net["tfs"]))
    fam_of = {**{f: j for f, (_, j) in FAMILIES.items()}, DECOY[0]: DECOY[2]}
    mat_of = {**{f: m for f, (m, _) in FAMILIES.items()}, DECOY[0]: DECOY[1]}
    _write_atomic(out / "tf_families.tsv", "".join(f"{t}\t{fam_of[net['family_of'][t]]}\n" for t in net["tfs"]))
    _write_atomic(out / "tf_motifs.tsv", "".join(f"{t}\t{mat_of[net['family_of'][t]]}\n" for t in net["tfs"]))
    _write_atomic(
        out / "gold.tsv",
        "".join(f"{t}\t{g}\t{int((t, g) in net['edges'])}\n" for t in net["tfs"] for g in net["names"] if g != t),
    )
    _write_atomic(
        out / "sites.bed",
        "".join(f"{sid}\t{a}\t{b}\t{fam}\t{int(o)}\n" for sid, a, b, fam, o in sorted(test.sites)),
    )
    truth = {
        "seed": s,
        "size": size,
        "sizes": z,
        "families": {f: {"matrix": m, "jaspar_family": j} for f, (m, j) in FAMILIES.items()},
        "decoy": {"family": DECOY[0], "matrix": DECOY[1], "jaspar_family": DECOY[2]},
        "assemblies": files,
        "edges": len(net["edges"]),
        "sites": {a.name: {f: sum(1 for x in a.sites if x[3] == f) for f in [*FAMILIES, DECOY[0]]} for a in asms},
        "bp": {a.name: int(sum(len(v) for v in a.records.values())) for a in asms},
    }
    _write_atomic(out / "truth.json", json.dumps(truth, indent=1) + "\n")
    return truth


if __name__ == "__main__":
    make(*sys.argv[1:4])
