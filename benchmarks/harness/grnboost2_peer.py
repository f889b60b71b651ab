"""Run arboreto's GRNBoost2 on a DREAM4-style expression TSV (rows = samples, columns = genes); run it with the
arboreto peer's interpreter: ``peer-arboreto-python grnboost2_peer.py EXPR.tsv OUT_links.tsv --seed S --workers W``.

Uses arboreto only as a black box (its public ``grnboost2`` function, default settings), on a dask LocalCluster of
W single-threaded worker processes like ``../shared/peers/checks/arboreto_genie3.py``. Writes the ranked edge
list (TF, target, importance).
"""

import argparse
import shutil
import tempfile


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("expr")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()

    import dask
    import pandas as pd
    from arboreto.algo import grnboost2
    from distributed import Client, LocalCluster

    df = pd.read_csv(a.expr, sep="\t")
    scratch = tempfile.mkdtemp(prefix="bench-dask-")
    dask.config.set({"temporary-directory": scratch})
    cluster = LocalCluster(
        n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=None, local_directory=scratch
    )
    client = Client(cluster)
    try:
        links = grnboost2(expression_data=df, client_or_address=client, seed=a.seed)
    finally:
        client.close()
        cluster.close()
        shutil.rmtree(scratch, ignore_errors=True)
    links.to_csv(a.out, sep="\t", index=False)


if __name__ == "__main__":
    main()
