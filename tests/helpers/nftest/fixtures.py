"""The committed inputs of the nf-test module specs (tests/data/nftest/), made as the pipeline makes them.

nf-core's module tests read shared test data instead of running the upstream modules in every spec; ours did run
MAKE_TEST_MODEL (and FASTA2H5 → PREDICT) in the setup of a dozen specs, a Nextflow task each (~3 CPU-s apiece) in
every run of the suite. The two files here are what those setups produced, byte for byte:

* ``chromaflow_tiny_seed0.ckpt``: ``chromaflow make-test-model --seed 0`` (MAKE_TEST_MODEL's command and name);
* ``asmA_predictions.h5``: ``fasta2h5`` of assets/test/asmA.fa then ``predict`` with that checkpoint, with the test
  profile's settings (conf/test.config: subsequence length 2000; the model named as PREDICT stages it).

``tests/pipeline/test_nftest_fixtures.py`` checks both against the snapshots of the modules that make them
(make_test_model's and predict's nf-test specs), so a change to either module fails there until this is re-run::

    python tests/helpers/nftest/fixtures.py        # rewrites tests/data/nftest/
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "tests" / "data" / "nftest"
CKPT = "chromaflow_tiny_seed0.ckpt"
PREDICTIONS = "asmA_predictions.h5"
#: conf/test.config's subsequence_length (FASTA2H5's --subsequence-length in the specs)
SUBSEQUENCE_LENGTH = 2000


def make(out: Path = OUT) -> None:
    """Write both files into ``out`` (made in a scratch folder, then moved in)."""
    env = dict(os.environ, CHROMAFLOW_PROGRESS="0")

    def run(*args, cwd):
        subprocess.run([sys.executable, "-m", "chromaflow", *map(str, args)], cwd=cwd, env=env, check=True)

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        run("make-test-model", "--out", CKPT, "--seed", 0, cwd=t)
        run(
            "fasta2h5",
            "--fasta",
            ROOT / "assets" / "test" / "asmA.fa",
            "--species",
            "Testus_primus",
            "--out",
            "asmA.h5",
            "--subsequence-length",
            SUBSEQUENCE_LENGTH,
            cwd=t,
        )
        run("predict", "--h5", "asmA.h5", "--model", CKPT, "--out", PREDICTIONS, "--threads", 1, cwd=t)
        for name in (CKPT, PREDICTIONS):
            shutil.copyfile(t / name, out / name)


if __name__ == "__main__":
    make(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
    print(f"wrote {OUT / CKPT} and {OUT / PREDICTIONS}")
