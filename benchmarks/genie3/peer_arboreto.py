"""arboreto GENIE3 (or GRNBoost2) on a DREAM4-style TSV, for the AUPR/seed study in this folder.

Run with the arboreto peer's interpreter:
  ../shared/peers/bin/peer-arboreto-python benchmarks/genie3/peer_arboreto.py EXPR.tsv LINKS.tsv \
      --trees 1000 --seed 1 --workers 2 [--method genie3|grnboost2] [--gold GOLD.tsv]

Same call as ../shared/peers/checks/arboreto_genie3.py (``arboreto.algo.diy(regressor_type='RF')`` with
arboreto's own RF settings and ``n_estimators=--trees`` on a ``LocalCluster(n_workers=W,
threads_per_worker=1)``), except that the links are written and scored *before* the cluster is closed and a
failure to close it (dask times out on a heavily loaded machine) does not lose the result. Prints one JSON
line: times, and with --gold AUROC / AUPR (average precision) over all ordered off-diagonal pairs.
"""

import argparse
import json
import shutil
import tempfile
import time

import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))  # chromaflow.genie3.dream4: the scorer


def score(links, gold_path):
    """AUROC / AUPR of arboreto's links (TF, target, importance) with chromaflow's DREAM4 scorer."""
    from chromaflow.genie3 import dream4

    weights = {(tf, tg): float(imp) for tf, tg, imp in links[["TF", "target", "importance"]].itertuples(index=False)}
    return dream4.score(dream4.read_gold(gold_path), weights)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("expr")
    ap.add_argument("out")
    ap.add_argument("--trees", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--method", choices=["genie3", "grnboost2"], default="genie3")
    ap.add_argument("--gold")
    a = ap.parse_args()

    import dask
    from arboreto.algo import diy, grnboost2
    from arboreto.core import RF_KWARGS
    from distributed import Client, LocalCluster

    df = pd.read_csv(a.expr, sep="\t")
    t0 = time.time()
    scratch = tempfile.mkdtemp(prefix="peers-dask-")
    dask.config.set({"temporary-directory": scratch})
    cluster = LocalCluster(
        n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=None, local_directory=scratch
    )
    client = Client(cluster)
    t1 = time.time()
    if a.method == "genie3":
        links = diy(
            expression_data=df,
            regressor_type="RF",
            regressor_kwargs=dict(RF_KWARGS, n_estimators=a.trees),
            client_or_address=client,
            seed=a.seed,
        )
    else:
        links = grnboost2(expression_data=df, client_or_address=client, seed=a.seed)
    t2 = time.time()
    links.to_csv(a.out, sep="\t", index=False)
    res = {
        "method": a.method,
        "links": int(len(links)),
        "trees": a.trees,
        "seed": a.seed,
        "workers": a.workers,
        "cluster_start_s": round(t1 - t0, 2),
        "infer_s": round(t2 - t1, 2),
    }
    if a.gold:
        res.update(score(links, a.gold))
    print(json.dumps(res), flush=True)
    try:
        client.close()
        cluster.close()
    except Exception as exc:  # noqa: BLE001 - the result is already written
        res["close_error"] = type(exc).__name__
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
