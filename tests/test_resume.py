"""Kill the real pipeline in the middle of prediction (SIGTERM, then SIGKILL of the Nextflow JVM), rerun with
``-resume``, and check that finished tasks are cached, the rest rerun, and the final outputs are identical to
an uninterrupted run (the session's ``test_run``)."""
from __future__ import annotations

import gzip
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import h5py
import numpy as np
import pyBigWig
import pytest

from pipeline_utils import MAIN_NF, run_nextflow

pytestmark = pytest.mark.pipeline


def _wait_for(proc: subprocess.Popen, log: Path, pattern: str, timeout: float) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if log.exists() and re.search(pattern, log.read_text()):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.2)
    return False


def _h5_content(path: Path) -> dict:
    out = {}
    with h5py.File(path) as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out


def _bw_content(path: Path) -> dict:
    bw = pyBigWig.open(str(path))
    try:
        return {c: bw.intervals(c) for c in bw.chroms()}
    finally:
        bw.close()


def test_kill_during_prediction_then_resume(tmp_path, test_run, nextflow_bin):
    _, reference_out, _ = test_run
    outdir = tmp_path / "results"
    log = tmp_path / "first.log"
    env = dict(os.environ, NXF_ANSI_LOG="false", NXF_OFFLINE="true")
    with open(log, "w") as fh:
        proc = subprocess.Popen(["nextflow", "run", str(MAIN_NF), "-ansi-log", "false", "-profile", "test",
                                 "--outdir", str(outdir)], cwd=tmp_path, stdout=fh, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
    try:
        assert _wait_for(proc, log, r"Submitted process > CHROMAFLOW:PREDICT", 600), log.read_text()
        time.sleep(1.0)
        assert proc.poll() is None, "the run finished before it could be interrupted"
        proc.send_signal(signal.SIGTERM)           # what a scheduler does first ...
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()                              # ... and then SIGKILL of the JVM
            proc.wait(timeout=30)
    finally:
        # the task processes the killed JVM left behind (local executor) are test debris: stop them
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    first = log.read_text()
    assert "chromaflow: done" not in first
    predicted_first = len(re.findall(r"Submitted process > CHROMAFLOW:PREDICT \(", first))

    res = run_nextflow(["-profile", "test", "--outdir", str(outdir), "-resume"], cwd=tmp_path)
    second = res.stdout
    # FASTA→h5 had finished before the kill: it must come from the cache, not run again
    assert re.search(r"Cached process > CHROMAFLOW:FASTA2H5 \(asmA\)", second), second
    assert re.search(r"Cached process > CHROMAFLOW:FASTA2H5 \(asmB\)", second), second
    assert "Cached process > CHROMAFLOW:MAKE_TEST_MODEL" in second
    # the interrupted work was redone
    assert re.search(r"Submitted process > CHROMAFLOW:(PREDICT|PREDICT_MERGE|BIGWIG) ", second), second
    assert predicted_first >= 1

    # final outputs identical to the uninterrupted run
    for asm in ("asmA", "asmB"):
        for rel in (f"{asm}/h5/{asm}.h5", f"{asm}/predictions/{asm}_predictions.h5"):
            a, b = _h5_content(outdir / rel), _h5_content(reference_out / rel)
            assert a.keys() == b.keys(), rel
            for k in a:
                np.testing.assert_array_equal(a[k], b[k], err_msg=f"{rel}:{k}")
        tracks = sorted(p.name for p in (reference_out / asm / "tracks").glob("*.bw"))
        assert tracks == sorted(p.name for p in (outdir / asm / "tracks").glob("*.bw"))
        for name in tracks:
            assert _bw_content(outdir / asm / "tracks" / name) == _bw_content(reference_out / asm / "tracks" / name)
    links = "asmA/network/asmA.genie3_links.tsv.gz"
    assert gzip.decompress((outdir / links).read_bytes()) == gzip.decompress((reference_out / links).read_bytes())
    # no temporary/partial file was published
    assert not [p for p in outdir.rglob("*") if p.name.endswith(".part")]
