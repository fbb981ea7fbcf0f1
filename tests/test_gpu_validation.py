"""The GPU validation campaign's script (benchmarks/gpu_validation.py), run as a CPU smoke run: the same code path
as on a GPU at tiny shapes, its JSON, and the report that docs/validation.md is generated from."""

import json

import pytest
from conftest import benchmark_script

pytest.importorskip("torch")



def script():
    return benchmark_script("benchmarks/gpu_validation.py", "gpu_validation")


def test_cpu_smoke_run_and_its_report(tmp_path):
    g = script()
    out = tmp_path / "results.json"
    profiles = tmp_path / "profiles.json"
    g.main(["run", "--device", "cpu", "--out", str(out), "--no-calibrate", "--models", "llama3-8b", "gemma2-9b",
            "--profiles", str(profiles)])
    data = json.loads(out.read_text())
    assert {c["preset"] for c in data["training"]} == {p for p, *_ in g.TRAINING}
    assert all(c["step_s"] >= c["forward_s"] > 0 and c["optimizer_s"] > 0 for c in data["training"])
    ops = json.loads(profiles.read_text())
    assert ops and all(p["prefill"]["aten_calls"] > 0 for p in ops.values() if "prefill" in p)
    assert data["env"]["device"] == "cpu" and data["env"]["torch"]
    check = data["env"]["serving_check"]  # serving kernels (ring cache, absorbed MLA step) against counted ones
    assert all(v["serving"] < 0.05 for v in check.values()), check
    cells = [c for m in data["models"] for c in m["cells"]]
    assert {m["layers"] for m in data["models"]} == {g.CPU_LAYERS}
    assert all(c["prefill_s"] > 0 and c["peak_bytes"] is None for c in cells if "prefill_s" in c)
    assert all(c["decode_s"] > 0 and c["decode_mode"] == "eager" for c in cells if "decode_s" in c)
    assert any(c["pass"] == 2 and "prefill_s" in c for c in cells)  # larger prefills run in the second pass

    page = tmp_path / "page.md"
    page.write_text(f"# title\n\n{g.BEGIN}\nold\n{g.END}\ntail\n")
    g.main(["report", str(out), "--write", str(page)])
    text = page.read_text()
    assert text.startswith("# title") and text.endswith(f"{g.END}\ntail\n") and "old" not in text
    assert "all equal" in text  # params, KV bytes and FLOPs equal the reference's under FakeTensorMode
    assert "### llama3-8b" in text and "### gemma2-9b" in text and "| 2 × 48 |" in text


def test_merged_cells_keep_what_either_pass_measured():
    g = script()
    cells = [{"batch": 8, "seq": 4096, "pass": 1, "decode_s": 0.01, "prefill_left_out": "too big"},
             {"batch": 8, "seq": 4096, "pass": 2, "prefill_s": 1.0, "peak_bytes": 5},
             {"batch": 64, "seq": 32768, "pass": 1, "skipped": "does not fit"}]
    merged = g.merged(cells)
    assert merged[0] == {"batch": 8, "seq": 4096, "decode_s": 0.01, "prefill_s": 1.0, "peak_bytes": 5}
    assert merged[1]["skipped"] == "does not fit"


def test_fit_check_and_layers_follow_the_memory_estimates():
    g = script()
    spec = g.load_preset("mixtral-8x7b")
    h100, h200 = 85_520_000_000, 150_109_880_320
    assert g.layers_that_fit(spec, h200) == 32  # 93 GB of bf16 weights in 70% of an H200
    assert g.layers_that_fit(spec, h100) < 32
    fits = g.fit_check(spec, 64, 4096, h200)
    assert fits["decode"] is None and "prefill" in fits["prefill"]  # 64 × 4k: the decode step fits, the prefill not


def test_curves_subcommand_writes_the_named_curves(tmp_path):
    g = script()
    out = tmp_path / "curves.json"
    g.main(["curves", "--device", "cpu", "--out", str(out), "--names", "graph,host,strided,scatter"])
    data = json.loads(out.read_text())
    assert data["env"]["device"] == "cpu"
    assert {p["op"] for p in data["curves"]["strided"]} == {"row_scale", "column_scale", "rope_half", "cache_write"}
    assert all(p["seconds"] > 0 for p in data["curves"]["scatter"])
