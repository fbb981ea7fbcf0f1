"""benchmarks/accuracy/training.yaml and its split (benchmarks/accuracy/training.py): every row names a preset, a
GPU and a source; ids are unique; the table / held-out split is the sha256 rule per source, fixed by the ids alone;
at least 90% of the evaluated rows keep the roofline a lower bound."""

from __future__ import annotations


from conftest import benchmark_script

from llmcalc.inputs.gpus import gpu_names
from llmcalc.inputs.presets import preset_names



def tr():
    return benchmark_script("benchmarks/accuracy/training.py", "accuracy_training")


def test_rows_are_well_formed():
    rows = tr().load_rows()
    assert len({r["id"] for r in rows}) == len(rows)
    assert len({tr().publication(r) for r in rows}) >= 8
    for r in rows:
        assert r["model"] in preset_names() and r["gpu"] in gpu_names(), r["id"]
        assert r["source"].get("commit") or r["source"].get("paper"), r["id"]
        assert r["gpus"] % (r["tp"] * r["pp"] * r.get("cp", 1)) == 0, r["id"]


def test_split_is_fixed_by_ids_and_sources():
    rows = tr().load_rows()
    split = tr().subset_of(rows)
    assert split == tr().subset_of(list(reversed(rows)))
    by: dict[str, list[str]] = {}
    for r in rows:
        by.setdefault(tr().publication(r), []).append(split[r["id"]])
    for src, subsets in by.items():
        n, k = len(subsets), subsets.count("table")
        assert k == min(max(round(tr().TABLE_SHARE * n), 1), n - 1), src


def test_weighted_quantile():
    q = tr().quantile
    assert q([1, 2, 3], 0.5) == 2
    assert q([1, 2, 3, 10], 0.5, [1, 1, 1, 3]) == 3
