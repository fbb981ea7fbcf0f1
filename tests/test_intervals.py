"""Error bands (presets/bands/intervals.yaml, benchmarks/accuracy/bands.py, docs/intervals.md): the bundled bands are
well formed and the page states them; `--interval` puts each time figure's band around it exactly as the file
says (read here with plain YAML), the engine's own or every engine's, and nothing without the flag."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
import yaml

from conftest import benchmark_script

ROOT = Path(__file__).parents[1]
BANDS = yaml.safe_load((ROOT / "presets" / "bands" / "intervals.yaml").read_text())["bands"]
BASE = ("-p", "llama3-8b", "--gpu", "h100-sxm")


def test_bands_are_well_formed_and_the_page_states_each():
    page = (ROOT / "docs" / "intervals.md").read_text(encoding="utf-8")
    assert {"latency", "serve", "train"} <= set(BANDS)
    for cmd, by in BANDS.items():
        for key, figures in by.items():
            for figure, b in figures.items():
                assert 0 < b["low"] <= b["high"] and b["held_out_inside"] <= b["held_out_rows"], (cmd, key, figure)
                assert b["table_rows"] >= 5
                n = b["table_rows"]
                i = max(1, (n + 1) // 10)  # the i-th smallest and largest of n: (n + 1 − 2i)/(n + 1) of new runs
                assert b["expected_coverage"] == round((n + 1 - 2 * i) / (n + 1), 3), (cmd, key, figure)
                assert re.search(rf"\| {cmd} \| {re.escape(key)} \| {figure} \| {b['low']:.2f}–{b['high']:.2f} \|",
                                 page), (cmd, key, figure)


def test_latency_ranges_are_the_band_around_each_figure(cli_json):
    plain = cli_json("latency", *BASE)
    got = cli_json("latency", *BASE, "--interval")
    assert plain["ttft_s_range"] is None and plain["tpot_s_range"] is None
    band = BANDS["latency"][got["time_model"]]
    assert got["ttft_s_range"] == pytest.approx([got["ttft_s"] * band["ttft_s"]["low"],
                                                 got["ttft_s"] * band["ttft_s"]["high"]], rel=1e-12)
    assert got["tokens_per_s_range"] == pytest.approx([got["tokens_per_s"] / band["tokens_per_s"]["high"],
                                                       got["tokens_per_s"] / band["tokens_per_s"]["low"]], rel=1e-12)
    assert any("held-out runs" in n for n in got["notes"])


def test_serve_ranges_take_the_engines_band_or_every_engines(cli_json):
    args = (*BASE, "--rate", "4", "--requests", "50", "--interval")
    for engine in ("trtllm", "reference"):
        got = cli_json("serve", *args, "--engine", engine)
        band = BANDS["serve"].get(engine, {}).get("ttft_s") or BANDS["serve"]["all"]["ttft_s"]
        p50 = got["ttft_s"]["p50"]
        assert got["ttft_s_range"] == pytest.approx([p50 * band["low"], p50 * band["high"]], rel=1e-12)
        assert got["output_tokens_per_s_range"][0] <= got["output_tokens_per_s_range"][1]
    assert any("every engine" in n for n in got["notes"])


def test_train_ranges_around_the_step(cli_json):
    got = cli_json("train", "-p", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--batch", "64", "--seq", "4096",
                   "--zero", "1", "--auto", "--interval")
    band = BANDS["train"][got["time_model"]]["step_s"]
    assert got["step_s_range"] == pytest.approx([got["step_s"] * band["low"], got["step_s"] * band["high"]],
                                                rel=1e-12)


def test_a_band_holds_the_share_of_new_runs_it_states():
    """bands.py's band: the i-th smallest and largest of n table ratios, i = max(1, ⌊(n + 1)/10⌋). Drawn from one
    distribution, a new ratio falls in it (n + 1 − 2i)/(n + 1) of the time (order statistics of n + 1 exchangeable
    draws), at least 80% from n = 9 on: checked on 20,000 seeded draws per size."""
    bands = benchmark_script("benchmarks/accuracy/bands.py", "accuracy_bands")
    b = bands.band([float(x) for x in range(1, 20)], [])  # n = 19: the 2nd and the 18th
    assert (b["low"], b["high"], b["expected_coverage"]) == (2.0, 18.0, 0.8)
    assert bands.band([1.0, 2.0, 3.0, 4.0], []) is None
    rng = random.Random(0)
    for n in (5, 8, 9, 23, 60):
        inside = 0
        for _ in range(20_000):
            draws = [rng.lognormvariate(0, 0.5) for _ in range(n + 1)]
            b = bands.band(draws[:n], draws[n:])
            inside += b["held_out_inside"]
        assert inside / 20_000 == pytest.approx(b["expected_coverage"], abs=0.01), n
        assert n < 9 or b["expected_coverage"] >= 0.8
