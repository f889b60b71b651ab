"""FASTAs as other tools write them (issue 54): a plain-gzip FASTA with an index file beside it (a plain gzip cannot
have one) is one line naming bgzip where a shard would read it through the index; a UTF-8 byte-order mark before
the first header is skipped by the reader, and the plan scans such a file, saying why."""

from __future__ import annotations

import gzip

import pytest

from chromaflow.utils.errors import ChromaflowError
from chromaflow.genome.faidx import plan_index, read_index
from chromaflow.genome.fasta import FastaReader

TEXT = b">chr1 first\nACGTACGTAC\nACGTNN\n>chr2\nggggcccc\n"


def test_a_plain_gzip_fasta_read_by_index_is_one_line_naming_bgzip(tmp_path):
    """Before: 'gzip (not bgzip) FASTA cannot be read by index (...)', with neither the fix nor the way out."""
    fa = tmp_path / "g.fa.gz"
    fa.write_bytes(gzip.compress(TEXT, mtime=0))
    (tmp_path / "g.fa.gz.fai").write_text("chr1\t16\t13\t10\t11\nchr2\t8\t37\t8\t9\n")
    with pytest.raises(ChromaflowError) as exc:
        read_index(str(fa))
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(f"{fa}: gzip, not bgzip: ")
    assert "recompress with bgzip" in msg and "--index none" in msg
    # the plan scans it (it cannot be indexed), and the reader reads it
    assert plan_index(str(fa)) == (None, {"index": "scan", "index_reason": "gzip (not bgzip) FASTA cannot be indexed"})
    assert [r.seqid for r in FastaReader(fa)] == ["chr1", "chr2"]


def _records(path, block_size):
    return [(r.seqid, r.line, bytes(r.seq)) for r in FastaReader(path, block_size=block_size)]


@pytest.mark.parametrize("crlf", [False, True], ids=["lf", "crlf"])
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("block_size", [1, 2, 3, 4, 5, 1 << 20])
def test_a_byte_order_mark_is_skipped(tmp_path, gz, crlf, block_size):
    """Before: 'line 1: first line does not start with '>' (not a FASTA file?)'."""
    plain = tmp_path / "p.fa"
    plain.write_bytes(TEXT)
    data = b"\xef\xbb\xbf" + (TEXT.replace(b"\n", b"\r\n") if crlf else TEXT)
    odd = tmp_path / ("bom.fa.gz" if gz else "bom.fa")
    odd.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    assert (
        _records(odd, block_size)
        == _records(plain, block_size)
        == [
            ("chr1", 1, b"ACGTACGTACACGTNN"),
            ("chr2", 4, b"ggggcccc"),
        ]
    )


@pytest.mark.parametrize(
    "data,needle",
    [
        (b"\xef\xbb\xbf", "no FASTA records"),
        (b"\xef\xbb\xbfACGT\n", "line 1: first line does not start with '>'"),
        (b"\xef\xbb>a\nACGT\n", "line 1: first line does not start with '>'"),  # a cut mark is no mark
    ],
)
def test_only_a_whole_mark_before_a_header_is_skipped(tmp_path, data, needle):
    fa = tmp_path / "x.fa"
    fa.write_bytes(data)
    with pytest.raises(ChromaflowError, match=needle):
        list(FastaReader(fa, block_size=1))


def test_the_plan_scans_a_fasta_with_a_byte_order_mark_and_says_why(tmp_path):
    fa = tmp_path / "bom.fa"
    fa.write_bytes(b"\xef\xbb\xbf" + TEXT)
    idx, how = plan_index(str(fa))
    assert idx is None and how == {"index": "scan", "index_reason": how["index_reason"]}
    assert "byte-order mark" in how["index_reason"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bom.fa"]  # no index left beside it
