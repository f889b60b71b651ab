"""VCFs as other tools write them (issue 54): plain gzip (not bgzip) read in order where no region is asked for and
refused with one line where ``--region`` needs an index; a UTF-8 byte-order mark (with CRLF) accepted; a bgzip VCF
without an index read without htslib's ``[E::idx_find_and_load]`` line on stderr."""

from __future__ import annotations

import gzip

import pysam
import pytest
from helpers.cli import assert_nothing_left, assert_one_line_error, chromaflow, run_in_process
from helpers.variant_files import SEQ, write_inputs

from chromaflow.utils.errors import ChromaflowError
from chromaflow.variant.vcf import read_variants

RECORDS = (
    "c1\t5\ta\tG\tA\t.\t.\t.\nc1\t40\tb\tA\tC,T\t.\t.\t.\nc2\t10\tc\tA\t<DEL>\t.\t.\t.\nc2\t100\td\tC\tG\t.\t.\t.\n"
)
BOM = b"\xef\xbb\xbf"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("vcfin")
    records = "".join(f"{c}\t{p}\t{i}\t{SEQ[c][int(p) - 1]}\t{rest}" for c, p, i, _, rest in
                      (ln.split("\t", 4) for ln in RECORDS.splitlines(keepends=True)))  # fmt: skip
    fa, model, vcf = write_inputs(d, records)
    text = vcf.read_bytes()
    files = {"plain": vcf}
    files["gzip"] = d / "gzip.vcf.gz"
    files["gzip"].write_bytes(gzip.compress(text, mtime=0))
    files["bgzip"] = d / "bgzip.vcf.gz"  # no index beside it
    pysam.tabix_compress(str(vcf), str(files["bgzip"]), force=True)
    files["bom"] = d / "bom.vcf"
    files["bom"].write_bytes(BOM + text)
    files["bom_crlf"] = d / "bom_crlf.vcf"
    files["bom_crlf"].write_bytes(BOM + text.replace(b"\n", b"\r\n"))
    return dict(dir=d, fasta=fa, model=model, text=text, **files)


def _rows(path, region=None):
    return [(v.chrom, v.pos, v.id, v.ref, v.alt, v.skip) for v in read_variants(str(path), region)]


@pytest.mark.parametrize("kind", ["gzip", "bgzip", "bom", "bom_crlf"])
def test_vcf_variants_read_as_the_plain_file_with_nothing_on_stderr(inputs, kind, capfd):
    """Before: plain gzip ended in a 20-line traceback (``NotImplementedError: seek not implemented in files
    compressed by method 1``), a byte-order mark in 'cannot read as VCF/BCF', and bgzip without an index printed
    htslib's ``[E::idx_find_and_load] Could not retrieve index file`` (fd 2, past Python's sys.stderr)."""
    want = _rows(inputs["plain"])
    assert len(want) == 5
    capfd.readouterr()
    assert _rows(inputs[kind]) == want
    assert capfd.readouterr().err == ""


def test_a_region_of_a_plain_gzip_vcf_is_one_line_naming_bgzip(inputs, tmp_path):
    with pytest.raises(ChromaflowError) as exc:
        read_variants(str(inputs["gzip"]), "c1")
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith(f"{inputs['gzip']}: gzip, not bgzip: ") and "recompress with bgzip" in msg
    out = tmp_path / "plan.json"
    proc = chromaflow("variant-plan", "--vcf", inputs["gzip"], "--region", "c1", "--out", out)
    assert_one_line_error(proc, "variant-plan", "gzip, not bgzip", "bgzip -c", "tabix -p vcf")
    assert_nothing_left(tmp_path)


def test_a_region_of_a_bgzip_vcf_with_its_index_still_works(inputs, tmp_path):
    indexed = tmp_path / "i.vcf.gz"
    pysam.tabix_compress(str(inputs["plain"]), str(indexed))
    pysam.tabix_index(str(indexed), preset="vcf")
    assert _rows(indexed, "c1:30-50") == [r for r in _rows(inputs["plain"]) if r[:2] == ("c1", 40)]


def test_a_byte_order_mark_inside_a_gzip_vcf_is_one_line(tmp_path, inputs):
    odd = tmp_path / "bom.vcf.gz"
    odd.write_bytes(gzip.compress(BOM + inputs["text"], mtime=0))
    with pytest.raises(ChromaflowError, match="starts with a UTF-8 byte-order mark") as exc:
        read_variants(str(odd))
    assert "\n" not in str(exc.value) and str(odd) in str(exc.value)


@pytest.mark.parametrize("kind", ["gzip", "bgzip"])
def test_variant_plan_of_gzip_and_unindexed_bgzip_is_quiet(inputs, tmp_path, kind):
    """The command as the pipeline runs it (the VCF staged without an index): exit 0, not a byte on stderr."""
    out = tmp_path / "plan.json"
    proc = chromaflow("variant-plan", "--vcf", inputs[kind], "--out", out)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert '"variants": 5' in out.read_text()


def test_variant_effect_of_a_plain_gzip_vcf_equals_the_plain_vcf(inputs, tmp_path):
    tables = {}
    for kind in ("plain", "gzip"):
        out = tmp_path / f"{kind}.tsv"
        run_in_process("variant-effect", "--vcf", inputs[kind], "--fasta", inputs["fasta"], "--model",
                       inputs["model"], "--flank", 10, "--threads", 1, "--out", out)  # fmt: skip
        tables[kind] = [ln for ln in out.read_text().splitlines() if not ln.startswith("#")]
    assert len(tables["plain"]) == 6 and tables["gzip"] == tables["plain"]
