"""Unit arithmetic of the benchmark report, checked against hand-computed cases."""

from __future__ import annotations


import pytest

from chromaflow.report import tasks, trace, units


def test_genome_hours_hand_computed():
    # 2.2 Mbp/s: 2.2e9 bp / 2.2e6 bp/s = 1000 s = 0.27778 h per 2.2 Gbp genome
    assert units.seconds_for_bp(2.2e9, 2.2e6) == pytest.approx(1000.0)
    assert units.genome_hours(2.2, 2.2e6) == pytest.approx(1000.0 / 3600.0)
    assert units.genome_hours(2.2, 2.2e6) == pytest.approx(0.2778, abs=5e-5)
    # 1 Gbp at 2.2e6 bp/s = 454.545 s = 0.126263 h
    assert units.hours_per_gbp(2.2e6) == pytest.approx(1e9 / 2.2e6 / 3600.0)
    # 1e9 bp at 1 Mbp/s = 1000 s = 0.27778 h
    assert units.hours_per_gbp(1e6) == pytest.approx(1000.0 / 3600.0)


def test_fleet_hours_is_n_t_over_k_without_ceiling():
    t = 1000.0 / 3600.0  # hours per genome at 2.2 Mbp/s, 2.2 Gbp
    assert units.fleet_hours(10, 2.2, 2.2e6, 4) == pytest.approx(10 * t / 4)  # 0.69444 h
    assert units.fleet_hours(10, 2.2, 2.2e6, 4) == pytest.approx(0.69444, abs=1e-5)
    # no ceiling: 3 genomes on 4 workers is 0.75 genome-times, not 1
    assert units.fleet_hours(3, 2.2, 2.2e6, 4) == pytest.approx(0.75 * t)


@pytest.mark.parametrize("rate", [None, 0, 0.0, -5, float("nan"), float("inf"), "x"])
def test_zero_or_missing_rate_is_na_not_a_crash(rate):
    assert units.hours_per_gbp(rate) is None
    assert units.genome_hours(2.2, rate) is None
    assert units.fleet_hours(10, 2.2, rate, 4) is None
    assert units.fmt_hours(units.genome_hours(2.2, rate)) == "n/a"
    assert units.fmt_rate(units.rate_bp_per_s(rate, 10)) == "n/a"


def test_prediction_counts_both_strands():
    # predict's bp/s counts + and - strand rows: a 2.2 Gbp genome is 4.4e9 bp of prediction.
    # 4.4e9 bp / 2.2e6 bp/s = 2000 s = 0.5556 h; 10 genomes on 4 GPUs = 10 * 0.5556 / 4 = 1.3889 h
    assert units.genome_hours(2.2, 2.2e6, strands=2) == pytest.approx(2000 / 3600)
    assert units.fleet_hours(10, 2.2, 2.2e6, 4, strands=2) == pytest.approx(1.38889, abs=1e-5)
    ex = tasks.extrapolate(
        [
            {"stage": "predict", "bp_per_s": 2.2e6, "bp": 1.0, "devices": ["cuda"]},
            {"stage": "fasta2h5", "bp_per_s": 2.2e6, "bp": 1.0, "devices": ["cpu"]},
        ],
        2.2,
        10,
        4,
    )
    p, f = ex["rows"]
    assert (p["strands"], f["strands"]) == (2, 1)
    assert p["hours_per_genome"] == pytest.approx(2 * f["hours_per_genome"])
    assert "reference" not in ex  # no typed peer figure (issue 15): peers are measured by benchmarks/run


def test_zero_workers_is_na():
    assert units.fleet_hours(10, 2.2, 2.2e6, 0) is None


def test_rate_and_formatting():
    assert units.rate_bp_per_s(2_000_000, 4.0) == 500_000.0
    assert units.rate_bp_per_s(100, 0) is None
    assert units.fmt_rate(2.2e6) == "2.2 Mbp/s"
    assert units.fmt_hours(1000 / 3600) == "0.2778 h"


def test_linear_fit_exact_line_and_too_few_points():
    fit = units.linear_fit([10, 20, 30], [1.5, 2.5, 3.5])  # y = 0.1 x + 0.5
    assert fit["slope_s_per_subsequence"] == pytest.approx(0.1)
    assert fit["intercept_s"] == pytest.approx(0.5)
    assert fit["r2"] == pytest.approx(1.0)
    assert units.linear_fit([10], [1.0]) is None
    assert units.linear_fit([10, 10], [1.0, 2.0]) is None  # one distinct size: no fit
    assert units.linear_fit([], []) is None


def test_trace_parsers():
    assert trace.parse_duration_s("250ms") == pytest.approx(0.25)
    assert trace.parse_duration_s("1.5s") == pytest.approx(1.5)
    assert trace.parse_duration_s("2m 3s") == pytest.approx(123)
    assert trace.parse_duration_s("1h 2m 3s") == pytest.approx(3723)
    assert trace.parse_duration_s("-") is None and trace.parse_duration_s("") is None
    assert trace.parse_memory_bytes("1.5 MB") == pytest.approx(1.5 * 2**20)
    assert trace.parse_memory_bytes("2 GB") == 2 * 2**30
    assert trace.parse_memory_bytes("0") == 0
    assert trace.parse_memory_bytes("-") is None
    assert trace.parse_percent("95.3%") == pytest.approx(95.3)
    assert trace.parse_percent("-") is None


def test_extrapolate_rows_and_na_reasons():
    stages = [
        {"stage": "predict", "bp_per_s": 2.2e6, "bp": 2.2e7, "devices": ["cuda"]},
        {"stage": "genie3", "bp_per_s": None, "bp": None, "devices": ["cpu"]},
        {"stage": "predict-merge", "bp_per_s": None, "bp": None, "devices": ["cpu"]},
    ]
    ex = tasks.extrapolate(stages, 2.2, 10, 4)
    p, g, m = ex["rows"]
    assert p["worker_kind"] == "GPUs"
    assert p["hours_per_genome"] == pytest.approx(2 * 0.27778, abs=1e-5)  # both strands
    assert p["hours_total"] == pytest.approx(2 * 0.69444, abs=1e-5)
    assert g["hours_total"] is None and "genes" in g["why_na"]
    assert m["hours_total"] is None and "no bp" in m["why_na"]
    assert "N × t_genome ÷ K" in ex["formula"] and "3600" in ex["formula"]
