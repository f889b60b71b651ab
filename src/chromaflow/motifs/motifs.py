"""Motifs (position count matrices) from a JASPAR or MEME file, or from pyjaspar's bundled JASPAR database, and
the TF -> motif table.

* ``jaspar:<COLLECTION>/<tax group>[@<release>]`` (e.g. ``jaspar:CORE/plants``, ``jaspar:CORE/plants@JASPAR2024``):
  the matrices of pyjaspar's bundled SQLite database, offline.
* a file holding ``MEME version`` : MEME minimal format (letter-probability matrices, counts = probability x nsites,
  nsites 20 when absent), parsed by Biopython.
* else a file starting with ``>``: JASPAR format (``>ID name`` then four ``A [ ... ]`` rows), parsed by Biopython.

A motif is named by its id (JASPAR matrix id, MEME motif id); the TF table may also use a motif's name where it
is unique. Files and the TF table are UTF-8 (a byte-order mark is skipped). RNA motifs are read with U as T (MEME
``ALPHABET= ACGU``, JASPAR ``U [ ... ]`` rows; the letters in either case): the genome holds T where the RNA holds
U, so the matrix is the same.
"""

from __future__ import annotations

import io
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..utils.errors import ChromaflowError

DEFAULT_MEME_NSITES = 20


@dataclass(frozen=True)
class Motif:
    """A motif: its ``id``, ``name`` and ``counts``, (4, L) float64, rows A C G T; ``family`` and ``tf_class``: the
    TF family and class JASPAR gives (``;``-joined where several; empty for a motif file's motifs)."""

    id: str
    name: str
    counts: np.ndarray  # (4, L) float64, rows A C G T
    family: str = ""
    tf_class: str = ""

    @property
    def length(self) -> int:
        """Motif length L: the columns of ``counts``."""
        return int(self.counts.shape[1])


def _from_bio(m, motif_id: str, where: str, scale: float | None = None) -> Motif:
    rows = "ACGU" if "U" in str(m.alphabet) else "ACGT"  # an RNA motif (MEME ALPHABET= ACGU): U is T
    counts = np.array([[float(x) for x in m.counts[b]] for b in rows], dtype=np.float64)
    return _from_rows(counts, motif_id, str(m.name or motif_id), where, scale)


def _from_rows(counts: np.ndarray, motif_id: str, name: str, where: str, scale: float | None = None) -> Motif:
    """A :class:`Motif` from its (4, L) counts, rows A C G T, checked (``where`` names the source in errors)."""
    name = str(name or motif_id)
    if counts.ndim != 2 or counts.shape[1] == 0:
        raise ChromaflowError(f"{where}: motif {motif_id!r} has no columns")
    if not np.isfinite(counts).all() or (counts < 0).any():
        raise ChromaflowError(f"{where}: motif {motif_id!r} holds negative or non-numeric counts")
    if (counts.sum(axis=0) <= 0).any():
        raise ChromaflowError(f"{where}: motif {motif_id!r} has a column without counts")
    if scale is not None:
        counts = counts / counts.sum(axis=0, keepdims=True) * scale
    return Motif(motif_id, name, counts)


def _jaspar_db(spec: str, option: str = "--motifs") -> list[Motif]:
    body = spec[len("jaspar:") :]
    release = None
    if "@" in body:
        body, release = body.split("@", 1)
    collection, _, tax = body.partition("/")
    if not collection:
        raise ChromaflowError(
            f"{option} {spec}: expected jaspar:<COLLECTION>[/<tax group>][@<release>], e.g. jaspar:CORE/plants"
        )
    try:
        from pyjaspar import jaspardb
    except ImportError:  # pragma: no cover - pinned dependency
        raise ChromaflowError(f"{option} jaspar:...: the pyjaspar package is not installed") from None
    try:
        db = jaspardb(release=release) if release else jaspardb()
    except Exception as exc:
        raise ChromaflowError(f"{option} {spec}: pyjaspar has no release {release!r} ({exc})") from None
    kw: dict[str, str | list[str]] = {"collection": collection}
    if tax:
        kw["tax_group"] = [tax]
    with warnings.catch_warnings():  # pyjaspar warns on an empty selection: the error below says it
        warnings.simplefilter("ignore")
        motifs = _jaspar_fetch(db, kw, f"{option} {spec}")
    if not motifs:
        raise ChromaflowError(
            f"{option} {spec}: no motifs in pyjaspar's {db.release} for collection {collection!r}"
            + (f", tax group {tax!r}" if tax else "")
        )
    return motifs


def _jaspar_fetch(db, kw: dict, where: str) -> list[Motif]:
    """The latest version of every matrix pyjaspar's ``db.fetch_motifs(**kw)`` selects, in its order, with its
    counts, name, family and class: what ``fetch_motifs`` gives, read in four queries instead of ~10 a matrix.

    Not pyjaspar's ``fetch_motifs`` itself: it costs ~2 CPU-s for ``jaspar:CORE/plants`` (927 matrices), on every
    ``discover-motifs`` and ``motif-prior`` run, because it reads each matrix with one query per row of counts and
    per table, and scans the whole annotation table (no index on its ID) twice a matrix. The selection stays
    pyjaspar's (its own query, ``_fetch_internal_id_list`` with ``all_versions``), the latest-version rule its
    ``_is_latest_version`` (no newer VERSION of the same BASE_ID) as one pass over the matrix table;
    ``tests/motifs/test_motif_scan.py`` compares the result with ``fetch_motifs`` on 20+ selections over every
    bundled release, errors included. Falls back to ``fetch_motifs`` where pyjaspar lacks the private method (another
    version)."""
    select = getattr(db, "_fetch_internal_id_list", None)
    if select is None:  # pragma: no cover - pinned pyjaspar has it
        found = db.fetch_motifs(**kw)
        return [_with_family(_from_bio(m, m.matrix_id, where), m.tf_family, m.tf_class) for m in found]
    cur = db.conn.cursor()
    matrices = {r[0]: r[1:] for r in cur.execute("select ID, BASE_ID, VERSION, NAME from MATRIX")}
    newest: dict[str, int] = {}
    for base, version, _ in matrices.values():
        newest[base] = max(version, newest.get(base, version))
    ids = [i for i in select(all_versions=True, **kw) if matrices[i][1] == newest[matrices[i][0]]]
    counts: dict[int, dict[str, list[tuple[int, float]]]] = {i: {b: [] for b in "ACGT"} for i in ids}
    for k in range(0, len(ids), 500):  # the table's primary key (ID, row, col) serves each chunk
        part = ids[k : k + 500]
        sql = f"select ID, row, col, val from MATRIX_DATA where ID in ({','.join('?' * len(part))})"
        for i, row, col, val in cur.execute(sql, part):
            if row in counts[i]:
                counts[i][row].append((col, val))
    notes: dict[int, dict[str, list[str]]] = {i: {"family": [], "class": []} for i in ids}
    for i, tag, val in cur.execute("select ID, TAG, VAL from MATRIX_ANNOTATION order by rowid"):
        if i in notes and tag in notes[i]:
            notes[i][tag].append(val)
    motifs = []
    for i in ids:
        base, version, name = matrices[i]
        matrix_id = f"{base}.{version}"
        rows = np.array([[float(v) for _, v in sorted(counts[i][b])] for b in "ACGT"], dtype=np.float64)
        motif = _from_rows(rows, matrix_id, name, where)
        motifs.append(_with_family(motif, notes[i]["family"], notes[i]["class"]))
    return motifs


def _with_family(motif: Motif, family, tf_class) -> Motif:
    """``motif`` with JASPAR's TF family and class of it (lists in pyjaspar's records and its database, ``;``-joined
    here)."""

    def joined(v) -> str:
        return ";".join(str(x) for x in v) if isinstance(v, (list, tuple)) else str(v or "")

    return Motif(motif.id, motif.name, motif.counts, joined(family), joined(tf_class))


def load_motifs(spec: str, option: str = "--motifs", allow_empty: bool = False) -> list[Motif]:
    """The motifs of ``spec`` (a file or ``jaspar:...``), ids unique, in file (or database) order; ``option``: the
    command's option that named a ``jaspar:`` spec, for its errors (a file's errors name the file). ``allow_empty``:
    a MEME file with its header and no motif gives none (what discover-motifs writes when it learned none) instead
    of an error."""
    motifs = _jaspar_db(spec, option) if spec.startswith("jaspar:") else _motif_file(spec, allow_empty)
    seen: set[str] = set()
    for m in motifs:
        if m.id in seen:
            raise ChromaflowError(f"{spec}: motif id {m.id!r} appears twice")
        seen.add(m.id)
    return motifs


#: MEME's alphabet line; DNA and RNA in either case are read (Biopython takes upper-case ACGT and ACGU only)
_MEME_ALPHABET = re.compile(r"^(ALPHABET\s*=\s*)(acgt|acgu)[ \t]*$", re.IGNORECASE | re.MULTILINE)
#: a JASPAR count row's letter (``A [ ... ]``), in either case; U (RNA) is read as T
_JASPAR_ROW = re.compile(r"^([ \t]*)([ACGTUacgtu])([ \t]*\[)", re.MULTILINE)


def _motif_file(spec: str, allow_empty: bool = False) -> list[Motif]:
    """The motifs of a JASPAR or MEME file (UTF-8, a byte-order mark skipped; RNA letters: U read as T)."""
    try:
        text = Path(spec).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ChromaflowError(f"{spec}: motif file does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ChromaflowError(f"{spec}: cannot read motif file ({getattr(exc, 'strerror', None) or exc})") from None
    from Bio import motifs as biomotifs

    stripped = text.lstrip()
    try:
        if "MEME version" in text:
            text = _MEME_ALPHABET.sub(lambda m: m.group(1) + m.group(2).upper(), text)
            motifs = []
            for m in biomotifs.parse(io.StringIO(text), "minimal"):
                nsites = float(getattr(m, "num_occurrences", 0) or DEFAULT_MEME_NSITES)
                motifs.append(_from_bio(m, m.name, spec, scale=nsites))
        elif stripped.startswith(">"):
            text = _JASPAR_ROW.sub(lambda m: m.group(1) + m.group(2).upper().replace("U", "T") + m.group(3), text)
            motifs = [_from_bio(m, m.matrix_id, spec) for m in biomotifs.parse(io.StringIO(text), "jaspar")]
        elif not stripped:
            raise ChromaflowError(f"{spec}: motif file is empty")
        else:
            raise ChromaflowError(f"{spec}: not a JASPAR (starts with '>') or MEME ('MEME version') motif file")
    except ChromaflowError:
        raise
    except Exception as exc:  # Biopython's parsers raise ValueError, IndexError, ... on malformed input
        msg = " ".join(str(exc).split()) or type(exc).__name__
        raise ChromaflowError(f"{spec}: malformed motif file ({msg})") from None
    if not motifs and not (allow_empty and "MEME version" in text):
        raise ChromaflowError(f"{spec}: no motifs in the file")
    return motifs


def read_tf_motifs(path: str, motifs: list[Motif]) -> dict[str, list[int]]:
    """{TF: indices into ``motifs``} from a two-column TSV ``TF<TAB>motif`` (one line per pair; a TF may have several
    motifs; an empty motif column or ``NA`` lists a TF without a motif; ``#`` comments and a header line
    ``regulator<TAB>motif`` / ``tf<TAB>motif`` are skipped). A motif is its id, else its name if unique."""
    by_id = {m.id: i for i, m in enumerate(motifs)}
    by_name: dict[str, list[int]] = {}
    for i, m in enumerate(motifs):
        by_name.setdefault(m.name, []).append(i)
    lines = _read_lines(path, "TF-motif table")
    out: dict[str, list[int]] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.rstrip("\r").split("\t")
        if n == 1 and [c.strip().lower() for c in cols[:2]] in (["regulator", "motif"], ["tf", "motif"]):
            continue
        if len(cols) > 2 or not cols[0].strip():
            raise ChromaflowError(f"{path} line {n}: expected 'TF<TAB>motif' (2 tab-separated columns)")
        tf = cols[0].strip()
        key = cols[1].strip() if len(cols) == 2 else ""
        lst = out.setdefault(tf, [])
        if key in ("", "NA"):
            continue
        if key in by_id:
            i = by_id[key]
        elif len(by_name.get(key, [])) == 1:
            i = by_name[key][0]
        elif key in by_name:
            raise ChromaflowError(f"{path} line {n}: motif name {key!r} names {len(by_name[key])} motifs; use an id")
        else:
            raise ChromaflowError(
                f"{path} line {n}: motif {key!r} is not among the --motifs (neither an id nor a name)"
            )
        if i not in lst:
            lst.append(i)
    if not out:
        raise ChromaflowError(f"{path}: no TF lines in the TF-motif table")
    return out


def _read_lines(path: str, what: str) -> list[str]:
    try:
        return Path(path).read_text(encoding="utf-8-sig").splitlines()
    except FileNotFoundError:
        raise ChromaflowError(f"{path}: {what} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ChromaflowError(f"{path}: cannot read {what} ({getattr(exc, 'strerror', None) or exc})") from None


def family_key(family: str) -> str:
    """The form two TF family names are compared in (``--tf-families`` against JASPAR's and the matches' families):
    whitespace runs collapsed to one space and case-folded, so ``"Type  II"`` and ``"type II"`` are one family."""
    return " ".join(family.split()).casefold()


def read_matched_families(path: str, motifs: list[Motif], max_qvalue: float) -> dict[int, set[str]]:
    """{motif index: TF families (case-folded)} from ``discover-motifs``' matches.tsv: the families of each
    discovered motif's matches with q-value below ``max_qvalue`` (a ``;``-joined family counts each part; ``NA``
    none). Every motif the table names must be among ``motifs`` (the same run's motifs.meme)."""
    by_id = {m.id: i for i, m in enumerate(motifs)}
    lines = _read_lines(path, "matches table")
    head = lines[0].split("\t") if lines else []
    need = ("motif", "tf_family", "qvalue")
    if any(c not in head for c in need):
        raise ChromaflowError(f"{path} line 1: not a discover-motifs matches table (needs {', '.join(need)})")
    mi, fi, qi = (head.index(c) for c in need)
    out: dict[int, set[str]] = {}
    for n, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        cols = line.rstrip("\r").split("\t")
        if len(cols) != len(head):
            raise ChromaflowError(f"{path} line {n}: {len(cols)} columns, the header has {len(head)}")
        if cols[mi] not in by_id:
            raise ChromaflowError(f"{path} line {n}: motif {cols[mi]!r} is not among the --motifs")
        try:
            q = float(cols[qi])
        except ValueError:
            raise ChromaflowError(f"{path} line {n}: qvalue {cols[qi]!r} is not a number") from None
        fams = out.setdefault(by_id[cols[mi]], set())
        if q < max_qvalue and cols[fi] not in ("", "NA"):
            fams.update(family_key(f) for f in cols[fi].split(";") if f.strip())
    return out


def read_tf_families(path: str, families: dict[int, set[str]]) -> tuple[dict[str, list[int]], set[str]]:
    """{TF: indices of the motifs whose matched families (:func:`read_matched_families`) include the TF's family}
    from a two-column TSV ``TF<TAB>family`` (JASPAR's family names, case and spacing ignored; a TF may have several
    lines; an empty family or ``NA`` lists a TF without one; ``#`` comments and a header ``regulator<TAB>family`` /
    ``tf<TAB>family`` are skipped), and the TFs with a family that no discovered motif matches.

    Those get prior 0, not NA: the learned motifs are the model's vocabulary of sites that open chromatin, and none
    of them is of the TF's family, as a TF whose JASPAR motif hits no promoter gets 0 (in the planted chain,
    benchmarks/harness/chain_run.py, NA for the decoy family's TFs cost 0.06 AUPR against the planted JASPAR
    matrices, 0 recovered it). A TF without a family is NA (nothing is known)."""
    out: dict[str, list[int]] = {}
    with_family: set[str] = set()
    for n, line in enumerate(_read_lines(path, "TF-family table"), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.rstrip("\r").split("\t")
        if n == 1 and [c.strip().lower() for c in cols[:2]] in (["regulator", "family"], ["tf", "family"]):
            continue
        if len(cols) > 2 or not cols[0].strip():
            raise ChromaflowError(f"{path} line {n}: expected 'TF<TAB>family' (2 tab-separated columns)")
        lst = out.setdefault(cols[0].strip(), [])
        family = cols[1].strip() if len(cols) == 2 else ""
        if family in ("", "NA"):
            continue
        with_family.add(cols[0].strip())
        key = family_key(family)
        lst += [i for i in sorted(families) if key in families[i] and i not in lst]
    if not out:
        raise ChromaflowError(f"{path}: no TF lines in the TF-family table")
    return out, {tf for tf in with_family if not out[tf]}
