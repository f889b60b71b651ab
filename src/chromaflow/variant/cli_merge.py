"""``chromaflow variant-merge``: join the shard tables of ``variant-effect --shard`` into the table of an unsharded
run, byte for byte, and pick the overall ``--tracks`` strongest variants from the shards' candidates.

Each shard table starts with its shard line (:data:`chromaflow.variant.score.SHARD_LINE`: shard i/n, its rows of the
whole VCF, its --tracks); the parts must be shards 1..n of one split, given in order, with the same header, each
holding the rows its line names. The merged table is the header once and the parts' rows in order, gzipped as
``variant-effect`` gzips (mtime 0, no name), so it is the unsharded run's file. The shards' candidates (each shard's
own --tracks strongest, which hold the overall N strongest: a variant among the N strongest of the whole VCF is
among the N strongest of its shard) are ranked together exactly as an unsharded run ranks (largest key first, ties
in VCF order) and the first N copied to ``--tracks-dir`` under the unsharded run's names. The counts the metrics
JSON reports (variants, scored, skipped by reason) are counted from the merged rows' notes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import zlib
from collections import Counter
from pathlib import Path

from ..utils.cli_options import add_run_options
from ..utils.errors import ChromaflowError
from ..utils.metrics import StageMetrics
from ..utils.outputs import atomic_output, check_outputs, naming_errors
from .score import write_table  # the unsharded run's writer (gzip mtime 0, no name): the same bytes

_SHARD = re.compile(r"#chromaflow variant-effect shard (\d+)/(\d+): rows (\d+)-(\d+) of (\d+), tracks (\d+)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): the shard tables, the output table, the track candidates and their folder."""
    p.add_argument(
        "parts", nargs="+", metavar="PART", help="the shard tables of variant-effect --shard (shards 1..n, in order)"
    )
    p.add_argument("--out", required=True, help="merged effects table (.tsv.gz: gzip; any other name: plain text)")
    p.add_argument(
        "--candidates",
        nargs="*",
        default=[],
        metavar="JSON",
        help="the shards' track candidates (<tracks-dir>/shard<i>of<n>.candidates.json, any order; "
        "their bigWigs beside them): needed when the shards ran with --tracks N > 0",
    )
    p.add_argument(
        "--tracks-dir",
        default=None,
        metavar="DIR",
        help="folder for the N strongest variants' bigWigs (created); needed with candidates",
    )
    add_run_options(p, metrics=True, force=True)


def _read_table(path: str) -> str:
    if not os.path.isfile(path):
        raise ChromaflowError(f"{path}: PART does not exist or is not a file")
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        return data.decode()
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise ChromaflowError(f"{path}: cannot read as a variant-effect table: {exc}") from None


def _parse_parts(paths: list[str]) -> tuple[str, list[str], int, int]:
    """(header, rows in order, total rows, --tracks) of the shard tables, every check a one-line error."""
    header, rows, expect_lo, count, total, tracks = None, [], 1, None, None, None
    for k, path in enumerate(paths, 1):
        lines = _read_table(path).splitlines()
        m = _SHARD.fullmatch(lines[0]) if lines else None
        if m is None:
            raise ChromaflowError(f"{path}: no shard line on line 1 (not a table of chromaflow variant-effect --shard)")
        i, n, lo, hi, tot, trk = (int(x) for x in m.groups())
        if count is None:
            count, total, tracks = n, tot, trk
        if (n, tot, trk) != (count, total, tracks):
            raise ChromaflowError(
                f"{path}: shard {i}/{n} of {tot} rows with tracks {trk} does not belong with "
                f"{paths[0]} (shards of {count}, {total} rows, tracks {tracks})"
            )
        if i != k or lo != expect_lo:
            raise ChromaflowError(
                f"{path}: PART {k} is shard {i}/{n} (rows {lo}-{hi}); expected shard {k}/{count} "
                f"starting at row {expect_lo} (give the shards in order, each once)"
            )
        if len(lines) < 2 or not lines[1].startswith("CHROM\tPOS\t"):
            raise ChromaflowError(f"{path}: line 2 is not the table header (CHROM POS ID REF ALT ...)")
        if header is None:
            header = lines[1]
        elif lines[1] != header:
            raise ChromaflowError(f"{path}: header differs from {paths[0]}'s (other model datasets?)")
        if len(lines) - 2 != hi - lo + 1:
            raise ChromaflowError(
                f"{path}: {len(lines) - 2} rows, its shard line names {hi - lo + 1} (rows {lo}-{hi}): truncated table?"
            )
        rows += lines[2:]
        expect_lo = hi + 1
    if len(paths) != count:
        raise ChromaflowError(
            f"{paths[-1]}: {len(paths)} PARTs given, the shards are {count} (missing shards {len(paths) + 1}..{count})"
        )
    assert header is not None and total is not None and tracks is not None  # set by the first part
    return header, rows, total, tracks


def _file_name(path: str, name) -> str:
    """``name``, a bigWig of the candidates JSON ``path``: a file name beside it, as variant-effect writes them
    (:func:`chromaflow.variant.score.track_name`), never a path that leads elsewhere."""
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\0" in name:
        raise ChromaflowError(f"{path}: candidate bigWig {name!r} is not a file name beside the JSON")
    return name


def _read_candidates(paths: list[str], count: int, tracks: int) -> list[tuple]:
    """Every shard's candidates: (key, index, chrom, pos, [bigWig paths])."""
    seen: dict[int, str] = {}
    out: list[tuple] = []
    for path in paths:
        try:
            with open(path) as fh:
                doc = json.load(fh)
            i, n = (int(x) for x in doc["shard"].split("/"))
            got_tracks = int(doc["tracks"])
            cands = [
                (
                    float(c["key"]),
                    int(c["index"]),
                    str(c["chrom"]),
                    int(c["pos"]),
                    [os.path.join(os.path.dirname(path), _file_name(path, f)) for f in c["files"]],
                )
                for c in doc["candidates"]
            ]
        except FileNotFoundError:
            raise ChromaflowError(f"{path}: --candidates does not exist") from None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ChromaflowError(
                f"{path}: not a variant-effect candidates JSON ({type(exc).__name__}: {exc})"
            ) from None
        if n != count or got_tracks != tracks:
            raise ChromaflowError(
                f"{path}: shard {i}/{n} with tracks {got_tracks}; the PARTs are {count} shards with tracks {tracks}"
            )
        if i in seen:
            raise ChromaflowError(f"{path}: shard {i}/{n} given twice (also {seen[i]})")
        seen[i] = path
        for c in cands:
            for f in c[4]:
                if not os.path.isfile(f):
                    raise ChromaflowError(f"{path}: candidate bigWig {f} does not exist")
        out += cands
    if tracks and len(seen) != count:
        missing = sorted(set(range(1, count + 1)) - set(seen))
        raise ChromaflowError(
            f"--candidates: the shards ran with --tracks {tracks}, candidates of shard "
            f"{missing[0]}/{count} missing ({len(missing)} shards without candidates)"
        )
    return out


def run(args: argparse.Namespace) -> int:
    """Run the command: join the shard tables into the table of an unsharded run and write the tracks of the overall
    strongest variants; returns the exit status."""
    check_outputs(
        [("--out", args.out), ("--metrics", args.metrics)],
        [("PART", p) for p in args.parts] + [("--candidates", c) for c in args.candidates],
        outdirs=[("--tracks-dir", args.tracks_dir)] if args.tracks_dir else [],
    )
    if os.path.exists(args.out) and not args.force:
        raise ChromaflowError(f"{args.out}: output exists (use --force to overwrite)")
    if args.candidates and not args.tracks_dir:
        raise ChromaflowError("--candidates needs --tracks-dir (where the bigWigs go)")
    with StageMetrics("variant-merge", args.metrics, threads=1) as metrics:
        header, rows, total, tracks = _parse_parts(args.parts)
        if len(rows) != total:
            raise ChromaflowError(f"{args.parts[-1]}: the shards hold {len(rows)} rows, their shard lines say {total}")
        cands = _read_candidates(args.candidates, len(args.parts), tracks) if tracks or args.candidates else []
        chosen = sorted(cands, key=lambda c: (-c[0], c[1]))[:tracks]
        files = []
        if chosen:
            Path(args.tracks_dir).mkdir(parents=True, exist_ok=True)
        for rank, (_key, _index, _chrom, _pos, srcs) in enumerate(chosen, 1):
            for src in srcs:
                name = os.path.join(args.tracks_dir, f"{rank:03d}_{os.path.basename(src)}")
                with atomic_output(name, force=True, suffix=".bw") as tmp, naming_errors(name):
                    shutil.copyfile(src, tmp)
                files.append(name)
        write_table(args.out, "\n".join([header] + rows) + "\n", args.force)
        notes = [r.rsplit("\t", 1)[-1] for r in rows]
        skipped = Counter(n for n in notes if n.startswith("skipped"))
        metrics.set(
            variants=len(rows),
            scored=len(rows) - sum(skipped.values()),
            skipped=sum(skipped.values()),
            skipped_by_reason=dict(sorted(skipped.items())),
            shards=len(args.parts),
            tracks=files,
        )
    return 0
