"""``variant-effect --shard`` + ``variant-merge`` (and ``variant-plan``): the merged shards are the unsharded run's
table byte for byte, and the merged top ``--tracks`` are its bigWigs (names and bytes), for several shard counts,
more shards than variants included; bad shard options and bad parts are one line each."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from helpers.cli import assert_one_line_error, run_in_process
from helpers.variant_files import SEQ, write_inputs

# 8 (variant, ALT) rows: SNVs, a multi-allelic record, an insertion, a deletion, a symbolic ALT (skipped), an ALT
# longer than a window holds (skipped at scoring); (CHROM, POS, ID, REF length, ALT or "+<inserted bases>")
SPEC = [
    ("c1", 5, "a", 1, "A"),
    ("c1", 40, "b", 1, "C,G,T"),
    ("c1", 300, "c", 1, "+GGGG"),
    ("c1", 450, "d", 7, "-"),
    ("c2", 10, "e", 1, "<DEL>"),
    ("c2", 100, "f", 1, "A"),
    ("c2", 120, "g", 1, "+" + "C" * 120),
]


def _record(chrom, pos, vid, r, alt):
    ref = SEQ[chrom][pos - 1 : pos - 1 + r]
    if alt.startswith("+"):
        alt = ref + alt[1:]
    elif alt == "-":
        alt = ref[0]
    else:  # SNVs: the listed bases other than REF, and one more
        alt = (
            ",".join([a for a in alt.split(",") if a != ref] or ["T" if ref != "T" else "G"]) if "<" not in alt else alt
        )
    return f"{chrom}\t{pos}\t{vid}\t{ref}\t{alt}\t.\t.\t.\n"


TRACKS = 3


def _table(path: Path) -> bytes:
    return path.read_bytes()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("vshard")
    fa, model, vcf = write_inputs(d, "".join(_record(*r) for r in SPEC))
    base = ["--vcf", vcf, "--fasta", fa, "--model", model, "--flank", 10, "--threads", 1, "--tracks", TRACKS]
    whole = d / "whole"
    whole.mkdir()
    run_in_process(
        "variant-effect", *base, "--out", whole / "e.tsv.gz", "--tracks-dir", whole / "t", "--metrics", whole / "m.json"
    )
    return dict(dir=d, base=base, whole=whole, vcf=vcf)


def _shards(inputs, tmp_path, n, tracks_dir=None):
    parts = []
    for i in range(1, n + 1):
        out = tmp_path / f"s{i}.tsv.gz"
        run_in_process(
            "variant-effect",
            *inputs["base"],
            "--out",
            out,
            "--shard",
            f"{i}/{n}",
            "--tracks-dir",
            tracks_dir or tmp_path / "cand",
        )
        parts.append(out)
    return parts


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8, 13])
def test_merged_shards_are_the_unsharded_run(inputs, tmp_path, n):
    whole = inputs["whole"]
    parts = _shards(inputs, tmp_path, n)
    cands = sorted(str(p) for p in (tmp_path / "cand").glob("*.candidates.json"))
    assert len(cands) == n
    run_in_process(
        "variant-merge",
        *parts,
        "--out",
        tmp_path / "m.tsv.gz",
        "--candidates",
        *cands,
        "--tracks-dir",
        tmp_path / "t",
        "--metrics",
        tmp_path / "m.json",
    )
    assert _table(tmp_path / "m.tsv.gz") == _table(whole / "e.tsv.gz")
    want = sorted(p.name for p in (whole / "t").iterdir())
    assert len(want) == TRACKS * 2 * 2  # ref and alt of 2 datasets
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == want
    for name in want:
        assert (tmp_path / "t" / name).read_bytes() == (whole / "t" / name).read_bytes(), name
    got, ref = (json.loads(p.read_text()) for p in (tmp_path / "m.json", whole / "m.json"))
    for k in ("variants", "scored", "skipped", "skipped_by_reason"):
        assert got[k] == ref[k], k
    assert ref["skipped"] == 2 and ref["variants"] == 8
    assert [Path(t).name for t in got["tracks"]] == [Path(t).name for t in ref["tracks"]]


def test_shard_tables_hold_their_rows(inputs, tmp_path):
    """A shard's table: its shard line, the header, and rows [(i-1)*T//n, i*T//n) of the whole table."""
    parts = _shards(inputs, tmp_path, 4)
    whole = gzip.decompress((inputs["whole"] / "e.tsv.gz").read_bytes()).decode().splitlines()
    lines = [gzip.decompress(p.read_bytes()).decode().splitlines() for p in parts]
    assert lines[1][0] == "#chromaflow variant-effect shard 2/4: rows 3-4 of 8, tracks 3"
    assert all(ln[1] == whole[0] for ln in lines)
    assert [len(ln) - 2 for ln in lines] == [2, 2, 2, 2]
    assert sum((ln[2:] for ln in lines), []) == whole[1:]


def test_plan_counts_rows_and_splits(inputs, tmp_path):
    out = tmp_path / "plan.json"
    run_in_process("variant-plan", "--vcf", inputs["vcf"], "--shard-size", 3, "--out", out)
    plan = json.loads(out.read_text())
    assert (plan["variants"], plan["shard_count"]) == (8, 3)
    assert [s["shard"] for s in plan["shards"]] == ["1/3", "2/3", "3/3"]
    assert [s["rows"] for s in plan["shards"]] == [[0, 2], [2, 5], [5, 8]]
    run_in_process("variant-plan", "--vcf", inputs["vcf"], "--shard-size", 100, "--out", out)
    assert json.loads(out.read_text())["shard_count"] == 1


@pytest.mark.parametrize(
    "shard, needle",
    [("0/3", "--shard '0/3'"), ("4/3", "--shard '4/3'"), ("1-3", "expected I/N"), ("a/b", "expected I/N")],
)
def test_bad_shard_option_is_one_line(inputs, tmp_path, shard, needle):
    proc = run_in_process(
        "variant-effect",
        *inputs["base"],
        "--out",
        tmp_path / "o.tsv",
        "--tracks-dir",
        tmp_path / "t",
        "--shard",
        shard,
        check=False,
    )
    assert_one_line_error(proc, "variant-effect", needle)
    assert list(tmp_path.iterdir()) == []


def test_bad_shard_size_is_one_line(inputs, tmp_path):
    proc = run_in_process("variant-plan", "--vcf", inputs["vcf"], "--shard-size", 0, check=False)
    assert_one_line_error(proc, "variant-plan", "--shard-size must be >= 1")


@pytest.fixture(scope="module")
def three(inputs, tmp_path_factory):
    d = tmp_path_factory.mktemp("three")
    parts = _shards(inputs, d, 3)
    return parts, sorted((d / "cand").glob("*.candidates.json"))


@pytest.mark.parametrize("case", ["order", "missing", "unsharded", "missing_candidates", "truncated"])
def test_bad_parts_are_one_line(inputs, three, tmp_path, case):
    parts, cands = three
    cand_args = ["--candidates", *cands, "--tracks-dir", tmp_path / "t"]
    if case == "order":
        args, needles = [parts[1], parts[0], parts[2], *cand_args], ["PART 1 is shard 2/3", "in order"]
    elif case == "missing":
        args, needles = [parts[0], parts[1], *cand_args], ["2 PARTs given, the shards are 3"]
    elif case == "unsharded":
        args, needles = [inputs["whole"] / "e.tsv.gz"], ["no shard line on line 1"]
    elif case == "missing_candidates":
        args, needles = (
            [*parts, "--candidates", cands[0], cands[2], "--tracks-dir", tmp_path / "t"],
            ["candidates of shard 2/3 missing"],
        )
    else:
        text = gzip.decompress(parts[2].read_bytes()).decode()
        bad = tmp_path / "cut.tsv"
        bad.write_text(text.rsplit("\n", 2)[0] + "\n")
        args, needles = [parts[0], parts[1], bad, *cand_args], ["cut.tsv", "truncated table?"]
    proc = run_in_process("variant-merge", *args, "--out", tmp_path / "m.tsv.gz", check=False)
    assert_one_line_error(proc, "variant-merge", *needles)
    # nothing written (the --tracks-dir folder is created once the output checks pass, as for variant-effect)
    assert not (tmp_path / "m.tsv.gz").exists() and not any((tmp_path / "t").glob("*"))
