"""Final outputs shared by ``genie3`` and ``genie3-merge``: link list, weight matrix, summary, plot."""

from __future__ import annotations

import json
from typing import cast

import numpy as np

from ..utils.cli_options import add_run_options
from ..utils.outputs import atomic_outputs, naming_errors, wants_gzip
from . import links


def finish_outputs(
    W: np.ndarray,
    meta: dict,
    out,
    weights=None,
    summary=None,
    plot=None,
    top: int = 1000,
    max_links: int = 0,
    threads: int = 1,
    repeats: np.ndarray | None = None,
    consume: bool = False,
) -> int:
    """Link list (+ optional weight matrix, summary, plot) from the full weight block W (R x T); ``threads``
    format and compress the link list (same bytes for any number). All or nothing: every output is written to
    its temporary and they are renamed together at the end; on any failure none is left
    (:func:`chromaflow.utils.outputs.atomic_outputs`). ``repeats`` (``--repeats`` > 1: repeats x R x T, W their mean)
    adds the columns confidence and mean_rank (:func:`stability`). ``consume``: W may be overwritten once the
    link list and weights are written (the summary's quantiles and the plot's sorted values then use W's own
    buffer: no second R x T copy, see :func:`nonself_values`). The link list and weight matrix are gzip'ed when their
    names end in ``.gz``, plain text otherwise (:func:`chromaflow.utils.outputs.wants_gzip`)."""
    gz = (wants_gzip(out), weights is not None and wants_gzip(weights))
    with atomic_outputs([out, weights, summary, plot]) as (t_out, t_weights, t_summary, t_plot):
        return _write_outputs(
            W, meta, t_out, t_weights, t_summary, t_plot, top, max_links, threads, repeats, consume, gz
        )


def nonself_values(W: np.ndarray, reg_idx: np.ndarray, tgt_idx: np.ndarray, consume: bool) -> np.ndarray:
    """The values of W's non-self pairs in row-major order (``W[~self_mask]``). With ``consume`` they are moved
    to the front of W's own buffer (the <= R self entries squeezed out, segment by segment) and a view returned:
    no R x T copy and no R x T mask; W is then garbage."""
    if not consume or not W.flags.c_contiguous:
        return W[~links.self_mask(reg_idx, tgt_idx)]
    R, T = W.shape
    tpos = {int(g): j for j, g in enumerate(tgt_idx)}
    selfs = sorted(i * T + tpos[int(g)] for i, g in enumerate(reg_idx) if int(g) in tpos)
    flat = W.reshape(-1)
    if not selfs:
        return flat
    bounds = selfs + [R * T]
    for k in range(1, len(bounds)):  # values between self entries k-1 and k move k places left
        a, b = bounds[k - 1] + 1, bounds[k]
        flat[a - k : b - k] = flat[a:b]
    return flat[: R * T - len(selfs)]


def stability(repeats: np.ndarray, reg_names, tgt_names, reg_idx, tgt_idx, top: int):
    """Per link over the repeats: confidence = fraction of repeats in which the link ranks within the first
    ``top`` (each repeat ranked as the link list is: importance, then regulator and target name) and mean_rank
    (1-based; self-links 0). Two R x T float64 matrices."""
    n = len(repeats)
    R, T = repeats.shape[1:]
    hits = np.zeros((R, T), dtype=np.int64)
    rank_sum = np.zeros((R, T), dtype=np.float64)
    for Wr in repeats:
        rows, cols = links.ranked_links(Wr, reg_names, tgt_names, reg_idx, tgt_idx, 0)
        rank = np.zeros((R, T), dtype=np.int64)
        rank[rows, cols] = np.arange(1, len(rows) + 1)
        hits += (rank >= 1) & (rank <= top)
        rank_sum += rank
    return hits / n, rank_sum / n


def _write_outputs(
    W, meta, out, weights, summary, plot, top, max_links, threads, repeats=None, consume=False, gz=(True, True)
) -> int:
    """The outputs into their temporaries (:func:`finish_outputs`); ``gz``: (link list, weights) gzip'ed."""
    genes = meta["genes"]
    reg_idx = np.asarray(meta["regulators"], dtype=np.int64)
    tgt_idx = np.asarray(meta["targets"], dtype=np.int64)
    reg_names = [genes[i] for i in reg_idx]
    tgt_names = [genes[i] for i in tgt_idx]
    limit = 0 if max_links == 0 else max(max_links, top if summary else 0)
    rows, cols = links.ranked_links(W, reg_names, tgt_names, reg_idx, tgt_idx, limit)
    n_write = len(rows) if max_links == 0 else min(max_links, len(rows))
    conf = mrank = None
    if repeats is not None and len(repeats) > 1:
        conf, mrank = stability(repeats, reg_names, tgt_names, reg_idx, tgt_idx, top)
    with naming_errors(out):
        if conf is None:
            n_links = links.write_links(
                out, W, reg_names, tgt_names, rows[:n_write], cols[:n_write], threads=threads, gz=gz[0]
            )
        else:
            n_links = links.write_links_stability(
                out, W, conf, cast(np.ndarray, mrank), reg_names, tgt_names, rows[:n_write], cols[:n_write], gz[0]
            )
    if weights:
        with naming_errors(weights):
            links.write_weights(weights, W, reg_names, tgt_names, gz[1])
    if summary or plot:
        doc = summary_of_matrix(W, rows, cols, reg_names, tgt_names, meta, top, n_links) if summary else None
        vals_all = nonself_values(W, reg_idx, tgt_idx, consume)  # W's structure is not used after this
        if summary:
            assert doc is not None  # made above with summary
            doc.update(summary_of_values(vals_all))
            if conf is not None:
                doc["stability"] = stability_summary(conf, mrank, rows, cols, top, len(repeats))
            text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
            with naming_errors(summary):
                summary.write_text(text)
        if plot:
            n_all = len(vals_all)
            vals_all.sort()  # in place (a copy of the non-self values, or W's own buffer with consume)
            pos = vals_all[np.searchsorted(vals_all, 0.0, side="right") :][::-1]
            with naming_errors(plot):
                make_plot(plot, pos, n_all, None if conf is None else conf[rows[:top], cols[:top]])
    return n_links


def summary_of_matrix(W, rows, cols, reg_names, tgt_names, meta, top, n_links) -> dict:
    """The summary's fields that need W's structure (out-degrees, total weights, the top-N cut)."""
    top = int(max(0, min(top, len(rows))))
    outdeg = np.bincount(rows[:top], minlength=len(reg_names))
    tpos = {g: t for t, g in enumerate(tgt_names)}
    total = W.sum(axis=1) - np.array([W[r, tpos[g]] if g in tpos else 0.0 for r, g in enumerate(reg_names)])
    by_deg = sorted(range(len(reg_names)), key=lambda r: (-int(outdeg[r]), reg_names[r]))[:20]
    by_w = sorted(range(len(reg_names)), key=lambda r: (-float(total[r]), reg_names[r]))[:20]
    doc = {
        "edges_written": int(n_links),
        "regulators": len(reg_names),
        "targets": len(tgt_names),
        "genes": len(meta["genes"]),
        "top_n": top,
        "top_n_min_importance": float(W[rows[top - 1], cols[top - 1]]) if top else None,
        "top_regulators_by_out_degree_in_top_n": [
            {"regulator": reg_names[r], "out_degree": int(outdeg[r])} for r in by_deg if outdeg[r] > 0
        ],
        "top_regulators_by_total_weight": [
            {"regulator": reg_names[r], "total_weight": round(float(total[r]), 9)} for r in by_w
        ],
        "options": meta.get("options", {}),
        "constant_targets": meta.get("constant_targets", []),
    }
    if meta.get("prior_check") is not None:  # --prior with --prior-check auto (the decision, z and p)
        doc["prior_check"] = meta["prior_check"]
    return doc


def summary_of_values(vals_all: np.ndarray) -> dict:
    """The summary's fields over all non-self values: counted in blocks, quantiles with ``overwrite_input`` (numpy
    partitions the array itself: the same values as on a copy, without the copy). Reorders ``vals_all``."""
    step = 1 << 22
    nonzero = sum(int(np.count_nonzero(vals_all[a : a + step] > 0)) for a in range(0, len(vals_all), step))
    return {
        "edges": int(len(vals_all)),
        "edges_nonzero": nonzero,
        "importance_quantiles": {
            q: float(np.quantile(vals_all, float(q), overwrite_input=True)) for q in ("0.5", "0.9", "0.99")
        }
        if len(vals_all)
        else {},
    }


def stability_summary(conf, mrank, rows, cols, top, n_repeats) -> dict:
    """How stable the first ``top`` links (by mean importance) are over the repeats."""
    top = int(max(0, min(top, len(rows))))
    c = conf[rows[:top], cols[:top]]
    levels = np.round(c * n_repeats).astype(np.int64)
    return {
        "repeats": int(n_repeats),
        "top_n": top,
        "top_links_mean_confidence": round(float(c.mean()), 9) if top else None,
        "top_links_in_every_repeat": int(np.count_nonzero(levels == n_repeats)),
        "top_links_confidence_counts": {
            f"{k}/{n_repeats}": int(np.count_nonzero(levels == k)) for k in range(n_repeats + 1)
        },
        "top_links_mean_rank_median": round(float(np.median(mrank[rows[:top], cols[:top]])), 9) if top else None,
    }


def make_plot(path, pos: np.ndarray, n_all: int, conf: np.ndarray | None = None) -> None:
    """Histogram of the positive weights ``pos`` (sorted descending; of ``n_all`` non-self values) (log x) and
    rank plot (log y), with ``conf`` (--repeats) a third panel: the confidence of each of the top links by rank;
    byte-deterministic PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "chromaflow"
    if conf is None:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4), dpi=100)
    else:
        fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(15, 4), dpi=100)
        x = np.arange(1, len(conf) + 1)
        a3.plot(x, conf, ".", ms=3, color="#228833")
        if len(conf) >= 10:  # running mean over a window of a tenth of the links
            k = max(1, len(conf) // 10)
            a3.plot(x[k - 1 :], np.convolve(conf, np.ones(k) / k, mode="valid"), color="#222222", lw=1)
        a3.set_ylim(-0.05, 1.05)
        a3.set_xlabel("rank of the link (mean importance)")
        a3.set_ylabel("confidence (fraction of repeats in top N)")
        a3.set_title(f"top-{len(conf)} link stability")
    if pos.size:
        lo, hi = float(pos.min()), float(pos.max())
        bins = np.logspace(np.log10(lo), np.log10(hi) if hi > lo else np.log10(lo) + 1, 60)
        a1.hist(pos, bins=bins, color="#4477aa")
        a1.set_xscale("log")
        a1.set_yscale("log")
        a2.plot(np.arange(1, pos.size + 1), pos, color="#aa3377", lw=1)
        a2.set_xscale("log")
        a2.set_yscale("log")
    a1.set_xlabel("importance (positive links)")
    a1.set_ylabel("links")
    a1.set_title(f"weight distribution ({pos.size} > 0 of {n_all})")
    a2.set_xlabel("rank")
    a2.set_ylabel("importance")
    a2.set_title("rank plot")
    fig.tight_layout()
    try:
        fig.savefig(path, format="png", metadata={"Software": None})
    finally:
        plt.close(fig)


def output_options(args) -> list[tuple[str, str | None]]:
    """(option, path) of every output ``genie3`` and ``genie3-merge`` may write, for
    :func:`chromaflow.utils.outputs.check_outputs`."""
    return [(f"--{name}", getattr(args, name)) for name in ("out", "weights", "summary", "plot", "metrics")]


def add_output_arguments(p, out_help: str) -> None:
    """The output options ``genie3`` and ``genie3-merge`` share (both finish through :func:`finish_outputs`)."""
    p.add_argument("--out", required=True, help=out_help)
    p.add_argument(
        "--weights",
        help="also write the full regulator x target weight matrix (.tsv.gz: gzip; any other name: plain text)",
    )
    p.add_argument("--summary", help="summary JSON (edge count, top regulators)")
    p.add_argument("--plot", help="PNG: weight histogram (log) + rank plot")
    p.add_argument(
        "--top",
        type=int,
        default=1000,
        help="top-N edges used by --summary and, with --repeats, by the confidence column (default 1000)",
    )
    p.add_argument("--max-links", type=int, default=0, help="write only the first M links (0 = all)")
    add_run_options(p, metrics=True)
