"""docs/accuracy.md is current, and the published timings it reports hold together: benchmarks/accuracy/evaluate.py
regenerates the page byte for byte; the table subset has enough rows; every row runs an llmcalc preset on a GPU
preset; the roofline is a lower bound on the measured time for almost every exact row. The evaluation runs once per
module."""

from __future__ import annotations

import functools
from pathlib import Path
from types import SimpleNamespace

from conftest import benchmark_script

from llmcalc.inputs.gpus import gpu_names
from llmcalc.inputs.presets import preset_names

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "benchmarks" / "accuracy" / "evaluate.py"
LOWER_BOUND_SHARE = 0.95
"""The share of exact (not approx) rows whose roofline ratio must be ≥ 1."""


def ev():
    """benchmarks/accuracy/evaluate.py as a module (the folder is no package)."""
    return benchmark_script("benchmarks/accuracy/evaluate.py", "accuracy_evaluate")


@functools.cache
def evaluation():
    """(points, rows by time model) of published.yaml under the page's time models."""
    points = ev().load_points()
    return points, ev().evaluate_models(ev().usable_pairs(points))


def roofline_rows():
    return evaluation()[1]["roofline"]


def test_page_is_current():
    points, rows_by_model = evaluation()
    page = ev().PAGE
    assert page == ROOT / "docs" / "accuracy.md"
    fresh = ev().markdown(rows_by_model, points).encode("utf-8")
    assert page.exists(), f"docs/accuracy.md is missing: run {ev().REGENERATE}"
    assert page.read_bytes() == fresh, f"docs/accuracy.md is stale: run {ev().REGENERATE}"


def test_table_subset_has_30_rows():
    points, _ = evaluation()
    splits = ev().assign_splits(points)
    table = [r for r in roofline_rows() if splits[r.pair.id] == "table"]
    assert len(table) >= 30, f"{len(table)} rows in the table subset"


def test_every_row_runs_presets():
    names, gpus = set(preset_names()), set(gpu_names())
    rows = roofline_rows()
    assert rows
    bad = [(r.pair.id, r.pair.inputs.model, r.pair.inputs.gpu) for r in rows
           if r.pair.inputs.model not in names or r.pair.inputs.gpu not in gpus]
    assert bad == []


def test_roofline_is_a_lower_bound():
    exact = [r for r in roofline_rows() if not r.pair.approx]
    below = sorted((round(r.ratio, 3), r.pair.id, r.pair.quantity) for r in exact if r.ratio < 1)
    share = 1 - len(below) / len(exact)
    assert share >= LOWER_BOUND_SHARE, f"ratio ≥ 1 in {share:.1%} of {len(exact)} exact rows; below 1: {below}"


def test_a_second_time_model_is_a_second_column():
    """A time model is any callable (spec, gpu, workload) -> ttft_s, decode_s, total_s: passed next to the
    roofline, it gets its own columns; a model that takes twice the roofline's time halves every ratio."""
    points, rows_by_model = evaluation()

    def slower(spec, gpu, w):
        rep = ev().latency(spec, gpu, w)
        return SimpleNamespace(ttft_s=2 * rep.ttft_s, decode_s=2 * rep.decode_s, total_s=2 * rep.total_s, fits=rep.fits)

    some = [r.pair for r in rows_by_model["roofline"][:12]]
    twice = ev().evaluate_models(some, {"roofline": None, "slower": slower})
    assert [round(a.ratio / b.ratio, 9) for a, b in zip(twice["roofline"], twice["slower"])] == [2.0] * len(some)
    page = ev().markdown(twice, points)
    assert "roofline median" in page and "slower median" in page and "| ratio slower |" in page
