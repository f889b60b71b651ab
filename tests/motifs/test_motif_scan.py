"""Motif reading (JASPAR, MEME, pyjaspar's bundled database), the TF-motif table, and the MOODS scan of
``chromaflow.motifs.scan`` against a brute-force log-odds scan written out in numpy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers.motif_files import JASPAR, MEME

from chromaflow.utils.errors import ChromaflowError
from chromaflow.motifs.motifs import Motif, load_motifs, read_tf_motifs
from chromaflow.motifs.scan import Scanner

pytest.importorskip("MOODS")

BASES = {ord(c): i for i, c in enumerate("ACGT")}


def brute_force_hits(scanner: Scanner, seq: bytes) -> list[list[int]]:
    """Every start where the motif or its reverse complement scores >= the threshold, no window covering a
    non-ACGT base (scores: the same log-odds matrices, summed in numpy)."""
    s = seq.upper()
    code = np.array([BASES.get(b, -1) for b in s])
    out = []
    for lo, th, L in zip(scanner.matrices, scanner.thresholds, scanner.lengths):
        M = np.array(lo)  # (4, L)
        R = M[::-1, ::-1]  # reverse complement: A<->T, C<->G, columns reversed
        starts = []
        for p in range(len(s) - L + 1):
            w = code[p : p + L]
            if (w < 0).any():
                continue
            f = M[w, np.arange(L)].sum()
            r = R[w, np.arange(L)].sum()
            if f >= th - 1e-9 or r >= th - 1e-9:
                starts.append(p)
        out.append(starts)
    return out


@pytest.fixture(scope="module")
def scanner():
    rng = np.random.default_rng(5)
    motifs = [Motif(f"M{L}", f"m{L}", rng.dirichlet([0.4] * 4, size=L).T * 30) for L in (5, 6, 9, 14)]
    return Scanner(motifs, [0.3, 0.2, 0.2, 0.3], 1e-2)


@pytest.mark.parametrize("seed", range(6))
def test_scan_equals_brute_force(scanner, seed):
    """Random sequences with N runs and lower case: the same hits (MOODS alone misses hits that end at the last
    base or before an N; the scanner works around it)."""
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(60, 400))
    seq = bytearray(rng.choice(list(b"ACGTacgt"), size=n).astype(np.uint8).tobytes())
    for _ in range(3):
        k, m = int(rng.integers(0, n - 4)), int(rng.integers(1, 4))
        seq[k : k + m] = b"N" * m
    got = [h.tolist() for h in scanner.scan(bytes(seq))]
    assert got == brute_force_hits(scanner, bytes(seq))


def test_hit_at_the_last_base(scanner):
    L = scanner.lengths[0]
    best = "".join("ACGT"[int(i)] for i in np.argmax(np.array(scanner.matrices[0]), axis=0)).encode()
    for seq in (b"T" * 10 + best, b"T" * 10 + best + b"N" + b"T" * 10):
        got = scanner.scan(seq)[0].tolist()
        assert 10 in got and got == brute_force_hits(scanner, seq)[0]
    assert L == 5


def test_jaspar_and_meme_files_agree(tmp_path):
    (tmp_path / "m.jaspar").write_text(JASPAR)
    (tmp_path / "m.meme").write_text(MEME)
    a, b = load_motifs(str(tmp_path / "m.jaspar")), load_motifs(str(tmp_path / "m.meme"))
    assert [m.id for m in a] == [m.id for m in b] == ["CF1.1", "CF2.1"]
    assert [m.name for m in a] == ["alpha", "beta"]
    for x, y in zip(a, b):
        np.testing.assert_allclose(x.counts, y.counts, atol=1e-9)


def test_pyjaspar_bundled_database(tmp_path):
    """jaspar:<collection>/<tax group>: pyjaspar's offline database (a small tax group: fetching costs ~10 ms a
    matrix, jaspar:CORE/plants ~10 s on a loaded CI machine); the matrices written as a JASPAR file read back equal."""
    from Bio import motifs as biomotifs
    from pyjaspar import jaspardb

    ms = load_motifs("jaspar:CORE/urochordates")
    ref = {m.matrix_id: m for m in jaspardb().fetch_motifs(collection="CORE", tax_group=["urochordates"])}
    assert len(ms) > 10 and [m.id for m in ms] == list(ref)
    path = tmp_path / "db.jaspar"
    path.write_text(biomotifs.write([ref[m.id] for m in ms], "jaspar"))
    back = load_motifs(str(path))
    for x, y in zip(ms, back):
        assert (x.id, x.name) == (y.id, y.name)
        np.testing.assert_array_equal(x.counts, y.counts)


def _pyjaspar_reference(spec: str):
    """What ``load_motifs(spec)`` gave when it read pyjaspar's ``fetch_motifs`` (before the bulk reader): the
    (id, name, counts, family, class) of each motif, or the error's message."""
    from pyjaspar import jaspardb

    from chromaflow.motifs.motifs import _from_bio, _with_family

    body, _, release = spec[len("jaspar:") :].partition("@")
    collection, _, tax = body.partition("/")
    kw = {"collection": collection, **({"tax_group": [tax]} if tax else {})}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = jaspardb(release=release).fetch_motifs(**kw)
    try:
        ms = [_with_family(_from_bio(m, m.matrix_id, f"--motifs {spec}"), m.tf_family, m.tf_class) for m in found]
    except ChromaflowError as exc:
        return str(exc)
    if not ms:
        return "empty"
    return [(m.id, m.name, m.counts.tolist(), m.family, m.tf_class) for m in ms]


def _bulk(spec: str):
    try:
        return [(m.id, m.name, m.counts.tolist(), m.family, m.tf_class) for m in load_motifs(spec)]
    except ChromaflowError as exc:
        return "empty" if "no motifs in pyjaspar's" in str(exc) else str(exc)


def test_bulk_jaspar_reader_equals_pyjaspars_fetch_motifs():
    """The bulk reader of pyjaspar's database (motifs._jaspar_fetch) gives what pyjaspar's own fetch_motifs gives:
    the same matrices (latest versions only), order, names, counts, families, classes and errors, for every
    collection and tax group of every bundled release that pyjaspar reads in a fraction of a second (under 60
    matrices a tax group, 150 a collection; all of them: 20 s), and jaspar:CORE/plants of the newest
    release (the pipeline's default; ~2 s of pyjaspar)."""
    from pyjaspar import jaspardb

    releases = jaspardb().get_releases()
    specs = [f"jaspar:CORE/plants@{releases[0]}"]
    for release in releases:
        cur = jaspardb(release=release).conn.cursor()
        groups = cur.execute(
            "select m.COLLECTION, a.VAL, count(*) from MATRIX m, MATRIX_ANNOTATION a "
            "where a.ID = m.ID and a.TAG = 'tax_group' group by 1, 2"
        ).fetchall()
        specs += [f"jaspar:{c}/{t}@{release}" for c, t, n in groups if n < 60]
        sizes = cur.execute("select COLLECTION, count(*) from MATRIX group by 1").fetchall()
        specs += [f"jaspar:{c}@{release}" for c, n in sizes if n < 150]
    for spec in specs:
        assert _bulk(spec) == _pyjaspar_reference(spec), spec
    assert len(specs) > 20 and len(releases) >= 7


def test_pyjaspar_unknown_group():
    with pytest.raises(ChromaflowError, match="no motifs in pyjaspar's"):
        load_motifs("jaspar:CORE/nosuchgroup")


@pytest.mark.parametrize(
    "text,needles",
    [
        ("", ["empty"]),
        ("hello\n", ["not a JASPAR"]),
        (">CF1.1 a\nA [ 1 2 ]\nC [ 1 2 ]\nG [ 1 ]\nT [ 1 2 ]\n", ["malformed"]),
        (JASPAR + JASPAR.split(">CF2.1")[0], ["'CF1.1' appears twice"]),
    ],
)
def test_bad_motif_file(tmp_path, text, needles):
    p = tmp_path / "m.jaspar"
    p.write_text(text)
    with pytest.raises(ChromaflowError) as exc:
        load_motifs(str(p))
    for n in needles:
        assert n in str(exc.value) and "\n" not in str(exc.value)


def test_tf_table(tmp_path):
    p = tmp_path / "m.jaspar"
    p.write_text(JASPAR)
    motifs = load_motifs(str(p))
    t = tmp_path / "tf.tsv"
    t.write_text("regulator\tmotif\nTF1\tCF1.1\nTF1\tbeta\nTF2\tNA\nTF3\t\n")
    assert read_tf_motifs(str(t), motifs) == {"TF1": [0, 1], "TF2": [], "TF3": []}
    t.write_text("TF1\tCF1.1\nTF2\tCF9.1\n")
    with pytest.raises(ChromaflowError, match=r"line 2: motif 'CF9.1' is not among"):
        read_tf_motifs(str(t), motifs)
