"""File names built from data stay inside their output folder (issue 54, "Names that stay inside their folder").

Every name a command builds from data (seqids, dataset names, ...) goes through ``chromaflow.utils.outputs.safe_name``:
the rule itself, then the commands that build names from data, fed ``../``, ``/``, ``.``/``..``, a control character,
names longer than 255 bytes and Unicode: every output lies directly in its folder, nothing appears anywhere else, and
distinct names stay distinct. The seqids come from a FASTA (ASCII, at most 50 bytes, no control character: the
genome reader's rule), so the long, control-character and Unicode names are the model's dataset names.
"""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import h5py
import numpy as np
import pytest

from chromaflow.utils.errors import ChromaflowError
from chromaflow.bigwig.core import output_name
from chromaflow.utils.outputs import NAME_MAX_BYTES, safe_name
from chromaflow.variant.score import track_name
from helpers.cli import assert_one_line_error, run_in_process
from helpers.variant_files import CFG, SEQ, write_inputs

#: seqids that lead out of --tracks-dir (or into a subfolder), or that only a careless rule would confuse
SEQIDS = ["../esc", "../../up", "chrA/1", "x/y", "x~2Fy", "..", ".", "L" * 49 + "/"]
#: the model's dataset names: a path, a control character, Unicode, and two names over 255 bytes that differ at the end
DATASETS = ("../ds", "a/b", "t\x01x", "é/ü", "D" * 300, "D" * 299 + "E")


def _tree(root: Path) -> set[Path]:
    return set(root.rglob("*"))


def _name_ok(name: str) -> None:
    assert name not in ("", ".", "..") and "/" not in name and not name.startswith(".")
    assert len(name.encode()) <= NAME_MAX_BYTES
    assert all(ord(c) >= 0x20 and c != "\x7f" for c in name)


# --------------------------------------------------------------------------------------------------
# the rule
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text,want",
    [
        ("chr1", "chr1"),
        ("scaffold_12.3-x", "scaffold_12.3-x"),
        ("atac seq", "atac seq"),
        ("chrA/1", "chrA~2F1"),
        ("../esc", "~2E.~2Fesc"),
        ("..", "~2E."),
        (".", "~2E"),
        (".hidden", "~2Ehidden"),
        ("a~b", "a~7Eb"),
        ("t\tx\x01\x7f", "t~09x~01~7F"),
        ("c1\x85", "c1~C2~85"),
        ("line\u2028sep", "line~E2~80~A8sep"),
        ("é/ü", "é~2Fü"),
        ("e\u0301", "e\u0301"),  # Unicode kept as it is, not normalised (NFC would make it 'é')
        ("\udcff", "~FF"),  # an undecodable byte (surrogateescape): that byte
    ],
)
def test_safe_name_escapes_only_what_is_unsafe(text, want):
    assert safe_name(text, "x") == want


def test_safe_name_keeps_distinct_names_distinct():
    names = [*SEQIDS, *DATASETS, "a_b", "a~2Fb", "a%2Fb", "é", "e\u0301", "~", "~7E", "." * 3, "D" * 300 + "F"]
    names += ["L" * 250 + f"{i:04d}" for i in range(50)]  # long names that differ only past the cut
    safe = [safe_name(n, "x") for n in names]
    assert len(set(safe)) == len(names)
    for s in safe:
        _name_ok(s)
    long = safe_name("L" * 300, "x")
    assert len(long.encode()) == NAME_MAX_BYTES and long.startswith("L" * 100) and "~~" in long
    assert len(safe_name("é" * 300, "x", 64).encode()) <= 64  # cut at a character, never inside one
    safe_name("é" * 300, "x", 64).encode().decode("utf-8")


def test_safe_name_refuses_an_empty_name():
    with pytest.raises(ChromaflowError, match="g.fa: FASTA record '': an empty name cannot name an output file"):
        safe_name("", "g.fa: FASTA record ''")


# --------------------------------------------------------------------------------------------------
# variant-effect --tracks, its shards, variant-merge and variant-browser
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    """Inputs in <root>/in, one variant per seqid; runs go to <root>/a/b/<run> so that ``../`` and ``../../`` from
    a tracks folder still land under <root>, where the test looks."""
    root = tmp_path_factory.mktemp("safe_names")
    (root / "in").mkdir()
    s = SEQ["c1"]
    recs = "".join(f"{k}\t100\t.\t{s[99]}\t{'A' if s[99] != 'A' else 'C'}\t.\t.\t.\n" for k in SEQIDS)
    fa, model, vcf = write_inputs(
        root / "in", recs, seq={k: s for k in SEQIDS}, cfg=dataclasses.replace(CFG, datasets=DATASETS)
    )
    base = ["--vcf", vcf, "--fasta", fa, "--model", model, "--flank", 10, "--threads", 1, "--tracks", len(SEQIDS)]
    return dict(root=root, base=base, fasta=str(fa), model=str(model))


def _expected_names(v) -> set[str]:
    """The track names of every variant (one per seqid), ranks aside."""
    args = SimpleNamespace(fasta=v["fasta"], model=v["model"])
    names = set()
    for i, chrom in enumerate(SEQIDS):
        var = SimpleNamespace(chrom=chrom, pos=100)
        names |= {track_name(args, var, i, d, a) for d in DATASETS for a in ("ref", "alt")}
    return names


def _strip_rank(name: str) -> str:
    rank, rest = name.split("_", 1)
    assert rank.isdigit() and len(rank) == 3
    return rest


def test_variant_effect_tracks_stay_in_tracks_dir(variants):
    """Today a seqid '../esc' fails after all the scoring ('tr/001_..: output directory does not exist')."""
    root = variants["root"]
    run = root / "a" / "b" / "whole"
    run.mkdir(parents=True)
    before = _tree(root)
    run_in_process("variant-effect", *variants["base"], "--out", run / "e.tsv", "--tracks-dir", run / "tr")
    made = _tree(root) - before
    tracks = {p for p in made if p.parent == run / "tr"}
    assert made == {run / "e.tsv", run / "tr"} | tracks, sorted(map(str, made - tracks))
    assert len(tracks) == len(SEQIDS) * len(DATASETS) * 2
    for p in tracks:
        _name_ok(p.name)
        assert p.is_file() and p.stat().st_size > 0
    assert {_strip_rank(p.name) for p in tracks} == _expected_names(variants)


def test_shards_merge_and_browser_stay_in_their_folders(variants, tmp_path):
    """Today a shard's candidate '../esc_100_1....bw' is written beside --tracks-dir, outside it."""
    root = variants["root"]
    work = root / "a" / "b" / "shards"
    work.mkdir(parents=True)
    before = _tree(root)
    for i in (1, 2):
        run_in_process(
            "variant-effect", *variants["base"], "--shard", f"{i}/2", "--out", work / f"s{i}.tsv.gz",
            "--tracks-dir", work / f"t{i}",
        )  # fmt: skip
    made = _tree(root) - before
    for i in (1, 2):
        cands = {p for p in made if p.parent == work / f"t{i}"}
        assert work / f"t{i}" / f"shard{i}of2.candidates.json" in cands
        for p in cands:
            _name_ok(p.name)
    inside = {p for p in made if p.parent in (work / "t1", work / "t2")}
    assert made - inside == {work / "t1", work / "t2", work / "s1.tsv.gz", work / "s2.tsv.gz"}
    merged = work / "merged"
    run_in_process(
        "variant-merge", work / "s1.tsv.gz", work / "s2.tsv.gz", "--out", work / "e.tsv.gz",
        "--candidates", work / "t1" / "shard1of2.candidates.json", work / "t2" / "shard2of2.candidates.json",
        "--tracks-dir", merged,
    )  # fmt: skip
    merged_tracks = set(merged.iterdir())
    assert _tree(root) - before - made == {work / "e.tsv.gz", merged} | merged_tracks
    assert len(merged_tracks) == len(SEQIDS) * len(DATASETS) * 2
    assert {_strip_rank(p.name) for p in merged_tracks} == _expected_names(variants)
    # variant-browser: every track in the session, its path relative to the browser folder, inside the tracks folder
    browser = work / "browser"
    browser.mkdir()
    (browser / "igv_session.xml").write_text(
        '<Session genome="chrom.sizes">\n    <Resources>\n    </Resources>\n</Session>\n'
    )
    (browser / "trackDb.txt").write_text("track x\ntype bigWig\n")
    run_in_process("variant-browser", *sorted(merged_tracks), "--browser-dir", browser, "--name", "asm")
    paths = [r.get("path") for r in ET.parse(browser / "igv_session.xml").getroot().iter("Resource")]
    assert len(paths) == len(merged_tracks)
    assert {(browser / p).resolve() for p in paths} == {p.resolve() for p in merged_tracks}


def test_shard_candidates_of_ordinary_datasets_stay_in_tracks_dir(tmp_path):
    """Today a shard's candidates of seqids '../esc' and '../../up' (the model's datasets ordinary names) are
    written beside --tracks-dir and two levels above it, with exit 0."""
    seqids = ["../esc", "../../up"]
    s = SEQ["c1"]
    recs = "".join(f"{k}\t100\t.\t{s[99]}\t{'A' if s[99] != 'A' else 'C'}\t.\t.\t.\n" for k in seqids)
    (tmp_path / "in").mkdir()
    fa, model, vcf = write_inputs(tmp_path / "in", recs, seq={k: s for k in seqids})
    work = tmp_path / "a" / "b" / "w"
    work.mkdir(parents=True)
    before = _tree(tmp_path)
    run_in_process(
        "variant-effect", "--vcf", vcf, "--fasta", fa, "--model", model, "--flank", 10, "--threads", 1,
        "--tracks", len(seqids), "--shard", "1/1", "--out", work / "s1.tsv", "--tracks-dir", work / "tr",
    )  # fmt: skip
    made = _tree(tmp_path) - before
    tracks = {p for p in made if p.parent == work / "tr"}
    assert made - tracks == {work / "s1.tsv", work / "tr"}
    assert len(tracks) == len(seqids) * len(CFG.datasets) * 2 + 1  # and the candidates JSON
    for p in tracks:
        _name_ok(p.name)


def test_variant_merge_refuses_a_candidate_path_outside_its_folder(variants, tmp_path):
    """A candidates JSON (hand-edited, or of another tool) naming '../x.bw' would be read from outside the shard's
    folder; it is refused with one line naming the JSON."""
    d = tmp_path / "t"
    d.mkdir()
    (tmp_path / "x.bw").write_bytes(b"")
    table = tmp_path / "s1.tsv"
    head = "#chromaflow variant-effect shard 1/1: rows 1-1 of 1, tracks 1\nCHROM\tPOS\tID\tREF\tALT\tnote\n"
    table.write_text(head + "c\t1\t.\tA\tC\t.\n")
    cand = d / "shard1of1.candidates.json"
    doc = {"shard": "1/1", "tracks": 1, "datasets": ["x"], "candidates": [
        {"index": 0, "chrom": "c", "pos": 1, "key": 1.0, "files": ["../x.bw"]}]}  # fmt: skip
    cand.write_text(json.dumps(doc))
    out = tmp_path / "out"
    out.mkdir()
    proc = run_in_process(
        "variant-merge", table, "--out", out / "e.tsv", "--candidates", cand, "--tracks-dir", out / "tr", check=False
    )
    assert_one_line_error(proc, "variant-merge", str(cand), "'../x.bw'", "not a file name beside the JSON")
    assert not (out / "tr").exists() or not any((out / "tr").iterdir())
    assert not (out / "e.tsv").exists()


# --------------------------------------------------------------------------------------------------
# bigwig: the dataset names of a predictions file
# --------------------------------------------------------------------------------------------------
def _predictions(path: Path, names: list[bytes]) -> Path:
    L = 100
    with h5py.File(path, "w") as h5:
        h5["data/seqids"] = np.array([b"c1", b"c1"], dtype="S50")
        h5["data/start_ends"] = np.array([[0, L], [L, 0]], dtype=np.int64)
        h5["prediction/predictions"] = np.random.default_rng(0).integers(0, 50, (2, L, len(names))).astype(np.int32)
        h5["prediction/datasets"] = np.array(names, dtype=f"S{max(map(len, names))}")
    return path


def test_bigwig_dataset_names_stay_in_outdir(tmp_path):
    """Today a dataset name over 255 bytes fails with 'File name too long'."""
    names = ["..", ".hidden", "D" * 300, "D" * 299 + "E", "é", "ü", "x~2Fy"]
    pred = _predictions(tmp_path / "p.h5", [n.encode() for n in names])
    out = tmp_path / "a" / "tracks"
    before = _tree(tmp_path)
    run_in_process("bigwig", "--predictions", pred, "--outdir", out, "--basename", "b", "--strand", "all")
    made = _tree(tmp_path) - before
    assert all(p.parent == out for p in made - {out, out.parent})
    tracks = sorted(p.name for p in made if p.suffix == ".bw")
    assert len(tracks) == len(names) * 3
    for n in tracks:
        _name_ok(n)
    assert set(tracks) == {output_name("b", n, s, False, None, "bigwig") for n in names for s in ("avg", "+", "-")}
    session = ET.parse(out / "igv_session.xml").getroot()
    assert {r.get("path") for r in session.iter("Resource")} == set(tracks)


@pytest.mark.parametrize("bad,needle", [(b"atac/seq", "holds '/'"), (b"../up", "holds '/'"), (b"t\tx", "control")])
def test_bigwig_refuses_a_dataset_name_with_a_path_or_control_character(tmp_path, bad, needle):
    """A dataset name is also a hub label: '/' and control characters are refused up front (one line naming the
    file and the name), nothing written."""
    pred = _predictions(tmp_path / "p.h5", [bad, b"h3k4me3"])
    out = tmp_path / "out"
    proc = run_in_process("bigwig", "--predictions", pred, "--outdir", out, "--basename", "b", check=False)
    assert_one_line_error(proc, "bigwig", str(pred), repr(bad.decode()), needle)
    assert not out.exists() or not any(out.iterdir())


def test_bigwig_basename_is_at_most_100_bytes(tmp_path):
    """--basename leaves the dataset name its share of the 200 bytes of a track name: a longer one is one line."""
    pred = _predictions(tmp_path / "p.h5", [b"atacseq"])
    proc = run_in_process(
        "bigwig", "--predictions", pred, "--outdir", tmp_path / "o", "--basename", "b" * 101, check=False
    )
    assert_one_line_error(proc, "bigwig", "--basename", "101 bytes, at most 100")
    assert not (tmp_path / "o").exists()
    run_in_process("bigwig", "--predictions", pred, "--outdir", tmp_path / "o", "--basename", "b" * 100)
    assert (tmp_path / "o" / f"{'b' * 100}_atacseq_avg_strand.bw").is_file()
