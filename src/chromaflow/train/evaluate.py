"""Predmoter's test mode: per file and per dataset, the mean Poisson loss and the mean per-chunk Pearson's r; the core
of ``chromaflow evaluate`` (its command: cli_evaluate.py; :class:`EvaluateOptions`, :func:`run`).

Each file is evaluated on its own with the datasets it holds (among the model's), after the chunk filter (and the
blacklist when asked), exactly as in training (FORMATS.md §7.2–7.3, §7.5). Chunks are streamed in batches; only
the row sums and two small plot samples are kept, so memory does not grow with the file.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np
import torch

from ..utils.cli_options import resolve_threads
from ..utils.errors import ChromaflowError
from ..utils.metrics import StageMetrics
from ..model.options import check_device
from ..utils.outputs import NAME_MAX_BYTES, check_outputs, safe_name
from ..utils.progress import Progress
from ..genome.h5rows import read_rows
from .data import StreamingDataset, scan_file
from .losses import row_stats


@dataclass
class FileResult:
    """One file's evaluation: its path and stem, chunks evaluated, the model datasets it holds, the metrics row
    (``values``: total_avg_val_loss, ..., <dataset>_avg_val_accuracy) and per dataset the plot material: the best
    region (seqid, start, end, observed, predicted) and a scatter sample (observed, predicted)."""

    path: str
    stem: str
    chunks: int
    datasets: tuple[str, ...]  # the model's datasets this file holds
    values: dict[str, float]  # total_avg_val_loss, ..., <ds>_avg_val_accuracy
    # plot material per dataset: best region (seqid, start, end, strand, observed, predicted) and a scatter sample
    regions: dict[str, tuple] = field(default_factory=dict)
    samples: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


def stem_of(path: str) -> str:
    """Predmoter's file label: the basename cut at its first '.'."""
    return os.path.basename(path).split(".", 1)[0]


def plot_name(stem: str, dataset: str, model: str) -> str:
    """The file name of a file's plot of one dataset: ``<stem>_<dataset>.png``, made safe by
    :func:`chromaflow.utils.outputs.safe_name` (the dataset name is the checkpoint ``model``'s)."""
    return safe_name(f"{stem}_{dataset}", f"{model}: dataset {dataset!r}", NAME_MAX_BYTES - len(".png")) + ".png"


def columns(datasets: tuple[str, ...]) -> list[str]:
    """The columns of the evaluation table: file, the total loss and accuracy, then loss and accuracy per dataset."""
    cols = ["file", "total_avg_val_loss", "total_avg_val_accuracy"]
    for d in datasets:
        cols += [f"{d}_avg_val_loss", f"{d}_avg_val_accuracy"]
    return cols


def evaluate_file(
    model,
    model_datasets: tuple[str, ...],
    path: str,
    *,
    batch_size: int,
    device: torch.device,
    blacklist: bool = False,
    sample_per_dataset: int = 100_000,
    progress: bool | None = None,
) -> FileResult:
    """Evaluate ``model`` on the kept chunks of the h5 at ``path`` (the N filter, and the blacklist with
    ``blacklist``) in batches of ``batch_size`` on ``device``: loss and Pearson correlation per dataset it holds, and
    the plot material. ChromaflowError if its chunk length does not suit the model or no chunk is left."""
    info = scan_file(path, model_datasets, blacklist=blacklist)
    model.cfg.check_length(info.length, path)
    if len(info.keep) == 0:
        raise ChromaflowError(f"{path}: no chunk is left after the chunk filter{' and blacklist' if blacklist else ''}")
    ds = StreamingDataset([info], model_datasets)
    tally = _Tally(path, info, model_datasets, sample_per_dataset)
    n = len(ds)
    with Progress(n, f"evaluate {stem_of(path)}", " chunks", enabled=progress) as bar, torch.no_grad():
        for a in range(0, n, batch_size):
            items = [ds[i] for i in range(a, min(n, a + batch_size))]
            x = torch.from_numpy(np.stack([it[0] for it in items])).to(device=device, dtype=torch.float32)
            y = torch.from_numpy(np.stack([it[1] for it in items])).to(device)
            p = model(x).to(torch.float32)
            tally.add(a, x, y, p, len(items))
            bar.update(len(items))
    ds.close()
    return tally.result()


class _Tally:
    """What one file's evaluation keeps of its batches: per dataset the loss / Pearson sums and chunk counts, the
    chunk with the most signal (plot region) and a strided sample of positions (scatter plot)."""

    def __init__(self, path: str, info, model_datasets: tuple[str, ...], sample_per_dataset: int):
        import h5py

        self.path, self.info, self.model_datasets = path, info, model_datasets
        self.present = [j for j, d in enumerate(model_datasets) if d in info.datasets]
        self.sums = np.zeros((3, len(model_datasets)), dtype=np.float64)  # loss, Pearson, chunks
        with h5py.File(path, "r") as fh:
            self.seqids = [s.decode("ascii", "replace") for s in read_rows(fh["data/seqids"])]
            self.start_ends = read_rows(fh["data/start_ends"]).astype(np.int64)
        self.best: dict[int, tuple] = {}
        self.stride = max(1, int(math.ceil(len(info.keep) * info.length / max(sample_per_dataset, 1))))
        self.samples: dict[int, tuple[list, list]] = {j: ([], []) for j in self.present}

    def add(self, a: int, x, y, p, n_items: int) -> None:
        """One batch: chunks a..a+n_items of the kept chunks, inputs x, targets y, predicted log rates p."""
        sums, present, info, stride = self.sums, self.present, self.info, self.stride
        loss_rows, pearson, used = row_stats(p, y, x)
        for j in present:
            sums[0, j] += float(loss_rows[:, j].double().sum())
            sums[1, j] += float(torch.nan_to_num(pearson[:, j].double()).sum())
            sums[2, j] += n_items
        rate = torch.exp(p).cpu().numpy()
        yy = y.cpu().numpy()
        valid = (x != 0).any(dim=2).cpu().numpy()
        for k in range(n_items):
            row = int(info.keep[a + k])
            nv = int(valid[k].sum())
            a0, b0 = int(self.start_ends[row, 0]), int(self.start_ends[row, 1])
            for j in present:
                obs = yy[k, :nv, j]
                score = (a0 < b0, float(obs.sum()))
                if j not in self.best or score > self.best[j][0]:
                    self.best[j] = (score, self.seqids[row], a0, b0, obs.copy(), rate[k, :nv, j].copy())
                off = (row * info.length) % stride
                self.samples[j][0].append(obs[off::stride])
                self.samples[j][1].append(rate[k, off:nv:stride, j])

    def result(self) -> FileResult:
        """The file's :class:`FileResult`: loss and accuracy means, over the datasets it holds and per dataset (NaN
        for a dataset it lacks), with each dataset's best region and scatter sample."""
        sums, present, model_datasets = self.sums, self.present, self.model_datasets
        values: dict[str, float] = {}
        total = sums[2, present].sum()
        values["total_avg_val_loss"] = sums[0, present].sum() / total
        values["total_avg_val_accuracy"] = sums[1, present].sum() / total
        for j, d in enumerate(model_datasets):
            c = sums[2, j]
            values[f"{d}_avg_val_loss"] = sums[0, j] / c if c else math.nan
            values[f"{d}_avg_val_accuracy"] = sums[1, j] / c if c else math.nan
        res = FileResult(
            path=self.path,
            stem=stem_of(self.path),
            chunks=len(self.info.keep),
            datasets=self.info.datasets,
            values=values,
        )
        for j in present:
            d = model_datasets[j]
            _, seqid, a0, b0, obs, pred = self.best[j]
            res.regions[d] = (seqid, a0, b0, obs, pred)
            res.samples[d] = (np.concatenate(self.samples[j][0]), np.concatenate(self.samples[j][1]))
        return res


def write_tsv(path: str, results: list[FileResult], model_datasets: tuple[str, ...]) -> None:
    """Write the evaluation table of ``results`` (one row per file, :func:`columns`) to ``path`` atomically (gzip when
    ``path`` ends in ``.gz``: :func:`chromaflow.utils.outputs.wants_gzip`)."""
    from ..utils.outputs import atomic_output, write_table_text

    cols = columns(model_datasets)
    lines = ["\t".join(cols)]
    for r in results:
        lines.append("\t".join([r.stem] + [repr(float(r.values[c])) for c in cols[1:]]))
    with atomic_output(path) as tmp:
        write_table_text(tmp, path, "\n".join(lines) + "\n")


def plot_file(result: FileResult, dataset: str, out_png: str, model_name: str) -> None:
    """Two panels: observed and predicted coverage along the file's chunk with the most signal (plus strand
    preferred, genomic coordinates), and predicted vs observed over a strided sample of all valid positions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..utils.outputs import atomic_output

    seqid, a0, b0, obs, pred = result.regions[dataset]
    so, sp = result.samples[dataset]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.2), gridspec_kw={"width_ratios": [2.2, 1]})
    if a0 < b0:
        pos = a0 + np.arange(len(obs))
        strand = "+"
    else:  # minus row: position p holds genomic a0-1-p
        pos = a0 - 1 - np.arange(len(obs))
        strand = "-"
    ax1.fill_between(pos, obs, step="mid", color="0.6", alpha=0.7, label="observed (mean of replicates)")
    ax1.plot(pos, pred, color="tab:red", lw=0.8, label="predicted")
    ax1.set_xlabel(f"{seqid} ({strand} strand) position, bp")
    ax1.set_ylabel(f"{dataset} coverage")
    ax1.set_title(f"{result.stem}: {dataset}, chunk {seqid}:{min(a0, b0) + 1}-{max(a0, b0)} (most signal)")
    ax1.legend(loc="upper right", fontsize=8, frameon=False)
    ax1.margins(x=0)
    if so.size:
        hb = ax2.hexbin(np.log1p(so), np.log1p(sp), gridsize=60, bins="log", cmap="viridis", mincnt=1)
        fig.colorbar(hb, ax=ax2, label="positions (log)")
        lim = max(np.log1p(so).max(), np.log1p(sp).max()) * 1.02 + 1e-6
        ax2.plot([0, lim], [0, lim], color="0.3", lw=0.6, ls="--")
        r_all = float(np.corrcoef(so, sp)[0, 1]) if so.std() > 0 and sp.std() > 0 else float("nan")
    else:
        r_all = float("nan")
    acc = result.values[f"{dataset}_avg_val_accuracy"]
    loss = result.values[f"{dataset}_avg_val_loss"]
    ax2.set_xlabel("observed, log(1 + coverage)")
    ax2.set_ylabel("predicted, log(1 + rate)")
    ax2.set_title(
        f"mean per-chunk r = {acc:.4f}; pooled r = {r_all:.4f}\nloss = {loss:.4f}; "
        f"{result.chunks} chunks, {so.size} positions shown",
        fontsize=9,
    )
    fig.suptitle(f"model {model_name}", fontsize=8, x=0.01, ha="left")
    fig.tight_layout()
    with atomic_output(out_png, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


@dataclass
class EvaluateOptions:
    """What ``evaluate`` reads and writes: the command's options, one field each (``None`` where an option is not
    given). :meth:`validate` checks them once (one line naming the option); :func:`run` calls it, so a library caller
    gets the same checks as the command line."""

    model: str
    h5: list[str]
    out: str
    plots: str | None = None
    batch_size: int = 10
    blacklist: bool = False
    device: str = "auto"
    threads: int = 0
    metrics: str | None = None

    def validate(self) -> list[str]:
        """Check the options' own rules: a batch size >= 1 and one file label per h5 file (:func:`stem_of`; a file
        given twice is one label).

        Returns
        -------
        list of str
            The file labels, in the order of the files.

        Raises
        ------
        ChromaflowError
            One line naming the option (or the h5 file) at fault.
        """
        check_device(self.device)
        if isinstance(self.h5, str) or not self.h5:
            raise ChromaflowError(f"--h5: expected a list of one or more genome h5 files, got {self.h5!r}")
        if self.batch_size < 1:
            raise ChromaflowError(f"--batch-size must be >= 1, got {self.batch_size}")
        stems: dict[str, str] = {}
        for h5 in self.h5:
            s = stem_of(h5)
            if s in stems and stems[s] != h5:
                raise ChromaflowError(
                    f"{h5}: same file label {s!r} as {stems[s]} (labels are names cut at the first '.')"
                )
            stems[s] = h5
        return list(stems)


def run(options: EvaluateOptions) -> int:
    """Evaluate the checkpoint on each h5 file: the metrics TSV and, with ``options.plots``, the plots.

    Parameters
    ----------
    options : EvaluateOptions
        The run's options; validated here (:meth:`EvaluateOptions.validate`).

    Returns
    -------
    int
        The exit status (0); a bad option, input or output raises a one-line
        :class:`~chromaflow.utils.errors.ChromaflowError`.
    """
    from ..model.checkpoint import build_model, load_checkpoint

    stems = options.validate()
    if options.device == "cuda" and not torch.cuda.is_available():
        raise ChromaflowError("--device cuda: no CUDA device is available")
    device = torch.device(
        "cuda" if options.device == "cuda" or (options.device == "auto" and torch.cuda.is_available()) else "cpu"
    )
    threads = resolve_threads(options.threads)
    torch.set_num_threads(threads)
    stage = StageMetrics(
        "evaluate", options.metrics, threads=threads, device=str(device), batch_size=options.batch_size
    )
    with stage as m:
        ckpt = load_checkpoint(options.model)
        datasets = tuple(ckpt.datasets)
        pngs = (
            [os.path.join(options.plots, plot_name(s, d, options.model)) for s in stems for d in datasets]
            if options.plots
            else []
        )
        check_outputs(
            [("--out", options.out), ("--metrics", options.metrics)] + [("--plots", p) for p in pngs],
            [("--model", options.model)] + [("--h5", h5) for h5 in options.h5],
            [("--plots", options.plots)],
        )
        model = build_model(ckpt).to(device)
        results = [
            evaluate_file(
                model, datasets, h5, batch_size=options.batch_size, device=device, blacklist=options.blacklist
            )
            for h5 in options.h5
        ]
        write_tsv(options.out, results, datasets)
        plots = _write_plots(results, options.plots, options.model) if options.plots else []
        m.set(
            subsequences=sum(r.chunks for r in results),
            files=len(results),
            plots=len(plots),
            datasets=list(datasets),
            results={r.stem: r.values for r in results},
        )
    return 0


def _write_plots(results: list[FileResult], folder: str, model: str) -> list[str]:
    """The plots of every file and dataset (:func:`plot_file`) in ``folder``; returns their paths."""
    plots = []
    for r in results:
        for d in r.datasets:
            png = os.path.join(folder, plot_name(r.stem, d, model))
            plot_file(r, d, png, os.path.basename(model))
            plots.append(png)
    return plots
