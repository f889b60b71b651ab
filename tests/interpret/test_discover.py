"""``chromaflow discover-motifs`` (issue 53, item 2): TF-MoDISco on contributions, patterns matched to JASPAR.

Truth is planted (benchmarks/harness/contrib.py): three JASPAR plant motifs of three families carry contributions, a
fourth family's motif is in every region without any. The planted motifs must come back as significant top matches and
the decoy must not; with the contributions shuffled over the regions (a broken attribution) no planted family may come
back. The outputs are checked against routes written here: the MEME file against modisco's own results file trimmed
here, p-values against TOMTOM run here on the MEME file and pyjaspar's matrices, q-values against scipy's
Benjamini-Hochberg; the report is one file with every logo inside; the same input gives the same bytes; bad inputs are
one line and no output.
"""

from __future__ import annotations

import csv
from html.parser import HTMLParser
from pathlib import Path

import h5py
import numpy as np
import pytest

from helpers.cli import assert_one_line_error, chromaflow, run_in_process
from benchmarks.harness.contrib import jaspar_ppm, planted

#: MADS (AGL15), WRKY (WRKY40), bHLH (MYC2) carry contributions; ARF25 (ARF) is planted without any
PLANTED = {"MA0548.3": "Type II", "MA1085.3": "WRKY", "MA0566.2": "bHLH"}
DECOY = ("MA1690.2", "ARF")
OUTPUTS = ("motifs.meme", "matches.tsv", "report.html", "modisco.h5")


def _discover(contrib: Path, out: Path, *extra, cwd: Path | None = None) -> None:
    chromaflow(
        "discover-motifs", "--contributions", contrib, "--outdir", out, "--threads", 2, *extra, check=True, cwd=cwd
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("discover")
    out = {}
    for name, shuffle in (("planted", False), ("shuffled", True)):
        h5 = d / f"{name}.h5"
        planted(h5, list(PLANTED), DECOY[0], n=300, width=200, seed=3, shuffle=shuffle)
        _discover(h5, d / name)
        out[name] = d / name
    out["contrib"] = d / "planted.h5"
    return out


def _matches(folder: Path) -> list[dict]:
    with open(folder / "matches.tsv", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def _significant_families(folder: Path) -> set[str]:
    return {r["tf_family"] for r in _matches(folder) if float(r["qvalue"]) < 0.05}


def test_planted_motifs_are_found_and_the_decoy_is_not(runs):
    rows = _matches(runs["planted"])
    significant = [r for r in rows if float(r["qvalue"]) < 0.05]
    best = {r["jaspar_id"] for r in significant if r["rank"] == "1"}
    for motif, family in PLANTED.items():
        assert motif in best, f"{motif} ({family}) is no pattern's best significant match: {sorted(best)}"
    assert DECOY[1] not in {r["tf_family"] for r in significant}, "the decoy (no contribution) was discovered"
    # every pattern that carries a planted motif is a positive one: its bases raise the target
    assert {r["metacluster"] for r in significant if r["jaspar_id"] in PLANTED} == {"pos"}


def test_shuffled_contributions_recover_no_planted_motif(runs):
    families = _significant_families(runs["shuffled"])
    assert not families & set(PLANTED.values()), f"planted families found in shuffled contributions: {families}"


def _trimmed(ppm: np.ndarray, cwm: np.ndarray) -> np.ndarray:
    score = np.abs(cwm).sum(axis=1)
    keep = np.flatnonzero(score >= 0.3 * score.max())
    return ppm[keep[0] : keep[-1] + 1]


def _meme(path: Path) -> dict[str, tuple[int, np.ndarray]]:
    """motif -> (nsites, PPM (w, 4)) read here (MEME minimal format)."""
    out, name, nsites, rows = {}, None, 0, []
    for line in path.read_text().splitlines() + [""]:
        if line.startswith("MOTIF "):
            name = line.split()[1]
        elif line.startswith("letter-probability"):
            nsites = int(line.split("nsites=")[1].split()[0])
            rows = []
        elif name and line.strip() and line[0] in "0123456789. ":
            rows.append([float(x) for x in line.split()])
        elif name and not line.strip() and rows:
            out[name] = (nsites, np.array(rows))
            name, rows = None, []
    return out


def test_meme_file_is_modisco_patterns_trimmed(runs):
    meme = _meme(runs["planted"] / "motifs.meme")
    expected = {}
    with h5py.File(runs["planted"] / "modisco.h5") as f:
        for group in ("pos_patterns", "neg_patterns"):
            for key in f.get(group, {}):
                p = f[group][key]
                ppm = _trimmed(p["sequence"][:], p["contrib_scores"][:])
                expected[f"{group}.{key}"] = (int(p["seqlets"]["n_seqlets"][0]), ppm)
    assert sorted(meme) == sorted(expected) and len(meme) >= 3
    for name, (nsites, ppm) in expected.items():
        assert meme[name][0] == nsites
        np.testing.assert_allclose(meme[name][1], ppm, atol=5e-7)
    assert {r["motif"]: int(r["n_seqlets"]) for r in _matches(runs["planted"])} == {
        k: v[0] for k, v in expected.items()
    }


def test_pvalues_are_tomtoms_and_qvalues_benjamini_hochberg(runs):
    from memelite.tomtom import tomtom
    from pyjaspar import jaspardb
    from scipy.stats import false_discovery_control

    db = jaspardb().fetch_motifs(collection="CORE", tax_group=["plants"])
    ids = [m.matrix_id for m in db]
    targets = [jaspar_ppm(i) for i in ids]
    meme = _meme(runs["planted"] / "motifs.meme")
    names = sorted(meme)
    p = tomtom([np.ascontiguousarray(meme[n][1].T) for n in names], targets)[0]
    rows = _matches(runs["planted"])
    assert rows
    for r in rows:
        i, j = names.index(r["motif"]), ids.index(r["jaspar_id"])
        order = np.argsort(p[i], kind="stable")
        assert ids[order[int(r["rank"]) - 1]] == r["jaspar_id"] or p[i][order[int(r["rank"]) - 1]] == p[i][j]
        assert float(r["pvalue"]) == pytest.approx(p[i][j], rel=1e-3)
        assert float(r["qvalue"]) == pytest.approx(false_discovery_control(p[i])[j], rel=1e-3)
        assert r["jaspar_name"] == db[j].name and r["tf_family"] == (";".join(db[j].tf_family) or "NA")


class _Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.src: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.src.append(a.get("src", ""))
        for key in ("href", "src"):
            if tag != "img" and a.get(key):
                self.links.append(a[key])


def test_report_is_one_file_with_every_logo(runs):
    text = (runs["planted"] / "report.html").read_text()
    page = _Images()
    page.feed(text)
    patterns = {r["motif"] for r in _matches(runs["planted"])}
    assert all(name in text for name in patterns)
    assert len(page.src) == len(patterns) * (2 + 3)  # CWM, its reverse complement, 3 matches
    assert all(s.startswith("data:image/png;base64,") for s in page.src) and not page.links


def test_modisco_kernels_are_cached_for_the_next_run(runs):
    """discover-motifs turns on numba's on-disk cache for TF-MoDISco's kernels (interpret.discover.
    cache_modisco_kernels): every kernel of its modules can be cached here, and the planted run (a child process,
    fixture ``runs``) left the cache entries of the kernels modisco's own precompile list names, where numba looks
    for them, so the next run loads them instead of compiling (~15 CPU-s a run). What the cached code computes is
    what the planted tests check (the same motifs, TOMTOM's p-values)."""
    import modiscolite.precompile as pre

    from chromaflow.interpret.discover import MODISCO_KERNEL_MODULES, cache_modisco_kernels

    names = cache_modisco_kernels()
    assert len(names) >= 25 and {n.split(".")[0] for n in names} == set(MODISCO_KERNEL_MODULES), names
    listed = [d for group in pre._kernels() for d, _ in group]
    assert len(listed) >= 10
    for d in listed:
        index = Path(d._cache._cache_file._index_path)  # numba's index of the kernel's compiled versions
        assert index.is_file(), (d.py_func.__qualname__, index)


def test_same_input_same_bytes(tmp_path):
    h5 = tmp_path / "small.h5"
    planted(h5, ["MA0548.3"], DECOY[0], n=80, width=120, seed=1)
    # run where the working directory holds a folder named coverage: numba's probe for coverage.py must not take it
    (tmp_path / "coverage").mkdir()
    _discover(h5, tmp_path / "a", cwd=tmp_path)
    run_in_process("discover-motifs", "--contributions", h5, "--outdir", tmp_path / "b", "--threads", 1)
    for name in OUTPUTS:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def _bad_file(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"{kind}.h5"
    if kind == "text":
        path.write_text("not hdf5\n")
    elif kind == "zero":
        planted(path, ["MA0548.3"], DECOY[0], n=20, width=60)
        with h5py.File(path, "r+") as f:
            f["hypothetical"][...] = 0
    elif kind == "format":
        with h5py.File(path, "w") as f:
            f.attrs["format"] = "something-else/1"
    elif kind == "empty":
        with h5py.File(path, "w") as f:
            f.attrs["format"] = "chromaflow-contributions/1"
            f.create_dataset("onehot", shape=(0, 4, 50), dtype="f4")
            f.create_dataset("hypothetical", shape=(0, 4, 50), dtype="f4")
    elif kind == "nan":
        planted(path, ["MA0548.3"], DECOY[0], n=20, width=60)
        with h5py.File(path, "r+") as f:
            f["hypothetical"][0, 0, 0] = np.nan
    else:
        planted(path, ["MA0548.3"], DECOY[0], n=20, width=60)
    return path


@pytest.mark.parametrize(
    "kind, extra, needles",
    [
        ("missing", [], ["--contributions does not exist"]),
        ("text", [], ["not an HDF5 file"]),
        ("format", [], ["format 'something-else/1'"]),
        ("empty", [], ["no contributions"]),
        ("zero", [], ["contribution is zero"]),
        ("nan", [], ["NaN"]),
        ("ok", ["--window", "500"], ["--window 500", "wider than the contributions' 60 bases"]),
        ("ok", ["--motif-db", "BADDB"], ["BADDB", "not a JASPAR"]),
        ("ok", ["--jaspar", "NOPE/plants"], ["no motifs", "'NOPE'"]),
        ("ok", ["--max-seqlets", "0"], ["--max-seqlets must be >= 1"]),
    ],
)
def test_bad_inputs_are_one_line_and_leave_nothing(tmp_path, kind, extra, needles):
    contrib = tmp_path / "missing.h5" if kind == "missing" else _bad_file(tmp_path, kind)
    extra = [str(tmp_path / "bad.meme") if e == "BADDB" else e for e in extra]
    (tmp_path / "bad.meme").write_text("MOTIF?\nthis is no motif file\n")
    out = tmp_path / "out"
    proc = run_in_process("discover-motifs", "--contributions", contrib, "--outdir", out, *extra, check=False)
    assert_one_line_error(proc, "discover-motifs", *[n.replace("BADDB", str(tmp_path / "bad.meme")) for n in needles])
    assert not out.exists()


def test_two_databases_are_refused_by_the_parser(tmp_path):
    proc = chromaflow(
        "discover-motifs", "--contributions", tmp_path / "x.h5", "--outdir", tmp_path / "o",
        "--jaspar", "CORE/plants", "--motif-db", tmp_path / "m.meme",
    )  # fmt: skip
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr
