"""Prepare the real GRN data sets of the genie3 prior stage (``benchmarks/run --stages genie3_prior``) from public git
repositories; nothing of them is committed here.

Sources (fetch the repositories, e.g. with ``git clone --bare``, into MIRROR as ``owner+name/repo``, then run
``python benchmarks/genie3/grn_data.py --mirror MIRROR --out DIR`` and point ``CHROMAFLOW_GRN_DATA`` at DIR):

* S. cerevisiae, expression: github.com/netZoo/netZooR at commit 858d6a7, ``data/yeast.RData``, object ``yeast``,
  ``yeast$exp.cc`` (2,555 genes x 50 cell-cycle samples; the 23 genes with a missing value left out), read with the
  PyPI ``rdata`` reader;
  gold standard: github.com/flatironinstitute/inferelator at commit 5fd992e, ``data/yeast/gold_standard.tsv``
  (993 targets x 98 TFs, non-zero = edge; Tchourine et al. 2018); prior: the same commit's
  ``data/yeast/yeast-motif-prior.tsv`` (a motif scan: independent of the gold standard's curated sources).
  Regulators: the gold standard's TFs present in the expression. Prior values: 1 where the motif prior has an
  entry, 0 for a TF with a motif column but no entry (it has motifs, none hits), NA (0.5) for a TF absent from it.
* B. subtilis: the same inferelator commit, ``data/bsubtilis/expression.tsv.gz`` (4,218 genes x 266 samples) and
  ``data/bsubtilis/gold_standard.tsv.gz``; inferelator's prior of this organism comes from the same source as the
  gold standard, so the gold standard's edges are split: a random half (numpy ``default_rng(0)``) is the prior
  (pi = 1, every other pair NA), the other half is the gold standard, and the AUPR is computed over the pairs
  that are not prior edges only. The matrix is cut to the gold standard's TFs and 600 of its targets (drawn with
  numpy ``default_rng(1)``) to keep a run on two cores in minutes.

* A. thaliana (the nitrate set of issue 56 and of DIOgene, Cassan et al.): github.com/OceaneCsn/
  integrative_GRN_N_induction at commit f8ba23c: ``data/inferelator_inputs/expression.tsv`` (Varala et al. 2018 root
  nitrate response, 1,426 genes x 45 samples), ``data/inferelator_inputs/priors.tsv`` (targets x 201 TFs: 1 = a motif
  of the TF in the promoter, 0 = none of its motifs hits, 0.5 = a TF without motif, written NA here) and
  ``rdata/connectf_N_responsive_genes.rdata`` (``validated_edges``; the ``DAPSeq`` rows, ConnecTF, are the gold
  standard). Regulators: the prior's 201 TFs; evaluated as DIOgene's ``evaluate_grn`` does: the TFs with DAP-seq data
  (``meta.json``'s ``evaluated_regulators``) x every gene.

Needs pandas and the PyPI ``rdata`` reader (``pip install rdata==1.1.0``; not in requirements-test.txt: no test runs
this script).

Each set is written to ``DIR/<name>/``: ``expression.tsv`` (genes x samples), ``regulators.txt``, ``prior.tsv``
(targets x regulators matrix: 1, 0 or NA), ``gold.tsv`` (regulator, target: the evaluated edges), ``exclude.tsv``
(pairs left out of the evaluation) and ``meta.json`` (the sources).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import subprocess
from pathlib import Path

import numpy as np

INFERELATOR = ("flatironinstitute+inferelator", "5fd992e")
NETZOOR = ("netZoo+netZooR", "858d6a7")
DIOGENE = ("OceaneCsn+integrative_GRN_N_induction", "f8ba23c")
SUB_TARGETS = 600  # B. subtilis: gold-standard targets kept (numpy default_rng(1)), besides the TFs
INF_URL = f"github.com/flatironinstitute/inferelator@{INFERELATOR[1]}"


def _show(mirror: Path, repo: tuple[str, str], path: str) -> bytes:
    """A file of a commit of a bare mirror (``git show``), gunzipped where its name ends in .gz."""
    git = mirror / repo[0] / "repo"
    data = subprocess.run(
        ["git", f"--git-dir={git}", "show", f"{repo[1]}:{path}"], check=True, capture_output=True
    ).stdout
    return gzip.decompress(data) if path.endswith(".gz") else data


def _table(mirror: Path, repo, path: str):
    import pandas as pd

    return pd.read_csv(io.BytesIO(_show(mirror, repo, path)), sep="\t", index_col=0)


def _write(out: Path, expr, regs: list[str], prior, gold: list[tuple[str, str]], exclude, meta: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    expr.to_csv(out / "expression.tsv", sep="\t", float_format="%.6g")
    (out / "regulators.txt").write_text("".join(f"{r}\n" for r in regs))
    prior.to_csv(out / "prior.tsv", sep="\t", na_rep="NA")
    (out / "gold.tsv").write_text("".join(f"{r}\t{t}\n" for r, t in gold))
    (out / "exclude.tsv").write_text("".join(f"{r}\t{t}\n" for r, t in exclude))
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")


def _edges(gs, regs: list[str], genes: set[str]) -> list[tuple[str, str]]:
    """The gold standard's non-zero (TF, target) pairs among the regulators and genes, self-pairs left out."""
    sub = gs.loc[[t for t in gs.index if t in genes], [r for r in gs.columns if r in set(regs)]]
    rows, cols = np.nonzero(sub.to_numpy() != 0)
    return sorted((sub.columns[c], sub.index[r]) for r, c in zip(rows, cols) if sub.columns[c] != sub.index[r])


def yeast(mirror: Path, out: Path) -> None:
    import rdata

    y = rdata.read_rda(io.BytesIO(_show(mirror, NETZOOR, "data/yeast.RData")))["yeast"]
    expr = y["exp.cc"]
    expr = expr.loc[~expr.isna().any(axis=1)]  # 23 genes have a missing value (26 cells): left out
    expr.columns = [f"S{i + 1}" for i in range(expr.shape[1])]
    genes = set(expr.index)
    gs = _table(mirror, INFERELATOR, "data/yeast/gold_standard.tsv")
    regs = sorted(r for r in gs.columns if r in genes)
    motif = _table(mirror, INFERELATOR, "data/yeast/yeast-motif-prior.tsv")
    targets = list(expr.index)
    prior = motif.reindex(index=targets, columns=regs)
    has = [r in motif.columns for r in regs]
    prior = (prior.fillna(0) != 0).astype(float)
    prior.loc[:, [r for r, h in zip(regs, has) if not h]] = np.nan
    gold = _edges(gs, regs, genes)
    meta = {
        "expression": f"github.com/netZoo/netZooR@{NETZOOR[1]}:data/yeast.RData (yeast$exp.cc)",
        "gold_standard": f"{INF_URL}:data/yeast/gold_standard.tsv",
        "prior": f"{INF_URL}:data/yeast/yeast-motif-prior.tsv",
        "evaluated_targets": sorted(t for t in gs.index if t in genes),
        "note": "regulators: gold-standard TFs in the expression; prior 1 = motif hit, 0 = TF with motifs, no hit",
    }
    _write(out, expr, regs, prior, gold, [], meta)


def bsubtilis(mirror: Path, out: Path) -> None:
    expr = _table(mirror, INFERELATOR, "data/bsubtilis/expression.tsv.gz")
    gs = _table(mirror, INFERELATOR, "data/bsubtilis/gold_standard.tsv.gz")
    regs = sorted(r for r in gs.columns if r in set(expr.index))
    targets = sorted(t for t in gs.index[(gs.to_numpy() != 0).any(axis=1)] if t in set(expr.index))
    targets = sorted(np.asarray(targets)[np.random.default_rng(1).permutation(len(targets))[:SUB_TARGETS]].tolist())
    keep = sorted(set(regs) | set(targets))
    expr = expr.loc[keep]
    edges = _edges(gs, regs, set(keep))
    rng = np.random.default_rng(0)
    half = np.zeros(len(edges), dtype=bool)
    half[rng.permutation(len(edges))[: len(edges) // 2]] = True
    prior_edges = [e for e, h in zip(edges, half) if h]
    gold = [e for e, h in zip(edges, half) if not h]
    import pandas as pd

    prior = pd.DataFrame(np.nan, index=keep, columns=regs)
    for r, t in prior_edges:
        prior.loc[t, r] = 1.0
    meta = {
        "expression": f"{INF_URL}:data/bsubtilis/expression.tsv.gz",
        "gold_standard": f"{INF_URL}:data/bsubtilis/gold_standard.tsv.gz",
        "prior": "a random half of the gold standard's edges (numpy default_rng(0)); evaluated on the other half",
        "evaluated_targets": sorted({t for _, t in edges}),
        "note": "genes: the gold standard's TFs and 600 of its targets; prior edges are left out of the evaluation",
    }
    _write(out, expr, regs, prior, gold, prior_edges, meta)


def arabidopsis(mirror: Path, out: Path) -> None:
    import rdata

    url = f"github.com/OceaneCsn/integrative_GRN_N_induction@{DIOGENE[1]}"
    expr = _table(mirror, DIOGENE, "data/inferelator_inputs/expression.tsv")
    prior = _table(mirror, DIOGENE, "data/inferelator_inputs/priors.tsv")  # targets x TFs: 1, 0, 0.5 (no motif)
    regs = list(prior.columns)
    prior = prior.reindex(index=list(expr.index)).replace(0.5, np.nan)
    edges = rdata.read_rda(io.BytesIO(_show(mirror, DIOGENE, "rdata/connectf_N_responsive_genes.rdata")))
    v = edges["validated_edges"]
    v = v[(v["type"] == "DAPSeq") & v["from"].isin(regs) & v["to"].isin(set(expr.index))]
    gold = sorted({(str(r), str(t)) for r, t in zip(v["from"], v["to"]) if r != t})
    meta = {
        "expression": f"{url}:data/inferelator_inputs/expression.tsv (Varala et al. 2018)",
        "gold_standard": f"{url}:rdata/connectf_N_responsive_genes.rdata (validated_edges, type DAPSeq: ConnecTF)",
        "prior": f"{url}:data/inferelator_inputs/priors.tsv (TF binding motifs in promoters; 0.5 = TF without motif)",
        "evaluated_targets": sorted(expr.index),
        "evaluated_regulators": sorted({r for r, _ in gold}),
        "note": "DIOgene's nitrate set (Cassan et al.): evaluated over the TFs with DAP-seq data x every gene",
    }
    _write(out, expr, regs, prior, gold, [], meta)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirror", required=True, help="directory of the bare mirrors, owner+name/repo")
    ap.add_argument("--out", required=True, help="output directory (CHROMAFLOW_GRN_DATA)")
    a = ap.parse_args(argv)
    yeast(Path(a.mirror), Path(a.out) / "yeast")
    bsubtilis(Path(a.mirror), Path(a.out) / "bsubtilis")
    arabidopsis(Path(a.mirror), Path(a.out) / "arabidopsis")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
