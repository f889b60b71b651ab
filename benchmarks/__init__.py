"""chromaflow's benchmarks: ``harness`` (measuring, comparing, rendering) and ``stages`` (one module a stage).

Run as ``benchmarks/run`` and ``benchmarks/render`` (launchers that put this checkout on ``PYTHONPATH``), or
``python -m benchmarks.harness.main`` from the repository root after ``source scripts/env.sh``."""
