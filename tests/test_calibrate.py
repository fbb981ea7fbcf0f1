"""`llmcalc calibrate`: the fit (llmcalc/costs/calibration.py) recovers known figures from timings the time model's
own op form generates; the harness (llmcalc/reference/calibrate.py) runs on the CPU; the command writes a profile
that latency loads, and refuses bad input in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import run_cli

from llmcalc.costs.calibration import (
    BF16,
    FP8,
    attention_bytes,
    attention_flops,
    fit,
    gemm_bytes,
    gemm_flops,
    gemm_shapes,
    kernel_fixed_s,
    op_time,
    plan,
)
from llmcalc.errors import UserError
from llmcalc.inputs.gpus import load_gpu, preset_for_device
from llmcalc.inputs.presets import load_preset
from llmcalc.inputs.time_models import PROFILE_FIELDS, base_profile, load_time_model
from llmcalc.model.time_model import TimeModel

H100 = load_gpu("h100-sxm")
ROOT_PROFILES = Path(__file__).resolve().parents[1] / "presets" / "calibration"
LLAMA3 = load_preset("llama3-8b")


def synthetic(truth: dict, overlap: float, gpu=H100, world: int = 2) -> dict:
    """Raw timings as the harness records them, generated noise-free by the time model's op form at `truth`."""
    bw = gpu.bandwidth * truth["memory_efficiency"]
    ks, pad = truth["kernel_s"], truth["matmul_pad_rows"]
    gemm = []
    for g in gemm_shapes(LLAMA3):
        for m in (2**i for i in range(15)):
            for dtype, eff, operand in (("bf16", truth["compute_efficiency"], BF16), ("fp8", truth["fp8"], FP8)):
                t = op_time(gemm_flops(m, g.n, g.k, pad), gemm_bytes(m, g.n, g.k, operand), gpu.peak(dtype) * eff,
                            bw, ks, overlap)
                gemm.append({"name": g.name, "dtype": dtype, "m": m, "n": g.n, "k": g.k, "seconds": t})
    attention = [{"phase": "prefill", "length": s, "heads": 32, "kv_heads": 8, "head_dim": 128, "gqa": True,
                  "seconds": op_time(attention_flops(32, 8, 128, s), attention_bytes(32, 8, 128, s),
                                     gpu.peak("bf16") * truth["attention"], bw, ks, overlap)}
                 for s in (512 * 2**i for i in range(7))]
    link = gpu.link_one_way * truth["comm_efficiency"]
    collectives = [{"op": "all_reduce", "bytes": b, "world": world,
                    "seconds": truth["collective_s"] + 2 * (world - 1) * b / world / link}
                   for b in (4**i * 1024 for i in range(11))]
    return {"device": "cuda", "device_name": "synthetic H100", "date": "2026-01-01", "torch": "x", "cuda": "y",
            "model": "llama3-8b", "smoke": False, "quick": False, "copy": {"bytes": 2 << 30, "seconds": (2 << 30) / bw},
            "tiny": {"elements": 16, "seconds": ks}, "gemm": gemm, "attention": attention,
            "attention_backend": "flash attention", "collectives": collectives, "comm": "NCCL test",
            "comm_note": None, "notes": []}


TRUTH = {"compute_efficiency": 0.78, "matmul_pad_rows": 96.0, "memory_efficiency": 0.84, "kernel_s": 6e-6,
         "fp8": 0.55, "attention": 0.6, "comm_efficiency": 0.7, "collective_s": 2.5e-5}


def test_a_run_that_measured_kernel_curves_too_fits_its_serving_profile():
    """calibrate --engine reference records each curve's points and, under `seconds`, the wall time each curve took;
    the serving fit reads the same file (a refusal of that dict ended the CPU smoke run of the reference engine)."""
    from llmcalc.views.calibrate import fit_serving_profile

    raw = synthetic(TRUTH, 0.5) | {"curves": {"gemm": [], "seconds": {"gemm": 1.5, "graph": 0.25}}}
    tm, _, _ = fit_serving_profile(raw, H100)
    assert tm.gpu == H100.name and 0 < tm.compute_efficiency <= 1


@pytest.mark.parametrize("overlap", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("pad", [0.0, 96.0, 37.25])
def test_fit_recovers_the_figures_that_generated_the_timings(overlap, pad):
    truth = TRUTH | {"matmul_pad_rows": pad}
    tm, notes = fit(synthetic(truth, overlap), H100, TimeModel(overlap=overlap), "a base")
    assert tm.compute_efficiency == pytest.approx(truth["compute_efficiency"], rel=2e-3)
    assert tm.matmul_pad_rows == pytest.approx(pad, abs=0.5)
    assert tm.memory_efficiency == pytest.approx(truth["memory_efficiency"], rel=2e-3)
    assert tm.kernel_s == pytest.approx(truth["kernel_s"], rel=2e-3)
    assert tm.fp8_efficiency == pytest.approx(truth["fp8"], rel=2e-3)
    assert tm.attention_efficiency == pytest.approx(truth["attention"], rel=2e-3)
    assert tm.comm_efficiency == pytest.approx(truth["comm_efficiency"], rel=2e-3)
    assert tm.collective_s == pytest.approx(truth["collective_s"], rel=2e-3)
    assert "median error of the op form 0.0%" in notes[-1]


def test_kernel_cost_inside_a_cuda_graph_is_the_profiles_and_the_isolated_call_is_what_the_fits_subtract():
    """On cuda the harness also replays tiny kernels from a CUDA graph: that per-kernel cost is the profile's
    kernel_s (a decode step is replayed so), while the GEMM and attention fits still subtract the isolated call's
    time (each of their runs is one isolated call), so they recover the same efficiencies."""
    raw = synthetic(TRUTH, 0.5) | {"graph_tiny": {"elements": 16, "kernels": 1000, "seconds_per_kernel": 2.1e-6}}
    tm, _ = fit(raw, H100, TimeModel(overlap=0.5), "a base")
    assert tm.kernel_s == pytest.approx(2.1e-6)
    assert "CUDA graph" in tm.sources["kernel_s"] and "6.0 µs" in tm.sources["kernel_s"]
    assert tm.compute_efficiency == pytest.approx(TRUTH["compute_efficiency"], rel=2e-3)
    assert tm.attention_efficiency == pytest.approx(TRUTH["attention"], rel=2e-3)


def _graph_curves(truth: dict, overlap: float, fixed: float, gpu=H100) -> list[dict]:
    """Weight matmuls of M = 1 … 64 replayed from a CUDA graph, their times the op form's at `truth` plus a fixed
    `fixed` seconds each, as the GPU campaign's kernel curves record them; and one eager run that must not count."""
    bw = gpu.bandwidth * truth["memory_efficiency"]
    out = []
    for g in gemm_shapes(LLAMA3):
        for m in (1, 2, 4, 8, 16, 32, 64):
            for dtype, eff, operand in (("bf16", truth["compute_efficiency"], BF16), ("fp8", truth["fp8"], FP8)):
                t = op_time(gemm_flops(m, g.n, g.k, truth["matmul_pad_rows"]), gemm_bytes(m, g.n, g.k, operand),
                            gpu.peak(dtype) * eff, bw, fixed, overlap)
                out.append({"name": g.name, "dtype": dtype, "m": m, "n": g.n, "k": g.k, "seconds": t, "how": "graph"})
    return out + [dict(out[0], seconds=1.0, how="eager")]


def test_kernel_cost_is_a_real_kernels_where_the_run_timed_matmuls_from_a_graph():
    """Where the run's kernel curves hold weight matmuls replayed from a CUDA graph, kernel_s is the fixed part of
    the small ones (M ≤ 16) under the profile's own op form, not a tiny add's: the fixed cost that generated them,
    whatever the add took; eager runs and larger M do not count."""
    graph = {"elements": 16, "kernels": 1000, "seconds_per_kernel": 0.9e-6}
    raw = synthetic(TRUTH, 0.5) | {"graph_tiny": graph, "curves": {"gemm": _graph_curves(TRUTH, 0.5, 3.2e-6)}}
    tm, _ = fit(raw, H100, TimeModel(overlap=0.5), "a base")
    assert tm.kernel_s == pytest.approx(3.2e-6, rel=2e-3)
    assert "replayed from a CUDA graph" in tm.sources["kernel_s"] and "0.9 µs" in tm.sources["kernel_s"]
    assert tm.compute_efficiency == pytest.approx(TRUTH["compute_efficiency"], rel=2e-3)
    assert kernel_fixed_s([], H100, tm) is None
    assert kernel_fixed_s(raw["curves"]["gemm"], H100, tm)[1] == 2 * len(gemm_shapes(LLAMA3)) * 5


def test_kernel_cost_of_a_gpu_without_a_bf16_peak_measures_its_16_bit_matmuls_at_the_fp16_one():
    """A GPU file with no bf16 peak (tensor cores of fp16 only) is fitted as `fit` fits it, at its fp16 peak: the
    fixed cost is the same one the same timings give under a bf16 peak of that value, not a refusal."""
    raw = synthetic(TRUTH, 0.5) | {"curves": {"gemm": _graph_curves(TRUTH, 0.5, 3.2e-6)}}
    tm, _ = fit(raw, H100, TimeModel(overlap=0.5), "a base")
    bf16 = [x for x in raw["curves"]["gemm"] if x["dtype"] == "bf16"]
    fp16_only = H100.model_copy(update={"peak_tflops": H100.peak_tflops.model_copy(
        update={"bf16": None, "fp16": H100.peak_tflops.bf16, "fp8": None})})
    assert kernel_fixed_s(bf16, fp16_only, tm)[0] == pytest.approx(kernel_fixed_s(bf16, H100, tm)[0], rel=1e-12)


def test_the_bundled_h200_kernel_cost_is_the_one_its_campaign_curves_give():
    """presets/calibration/h200.yaml's kernel_s is what kernel_fixed_s reads off the H200 campaign's kernel curves
    (benchmarks/gpu/h200-2026-11-28-curves.json) at the profile's other figures, to its 3 significant digits."""
    h200 = load_gpu("h200")
    tm = load_time_model("calibrated", h200)
    curves = json.loads((ROOT_PROFILES.parents[1] / "benchmarks" / "gpu" / "h200-2026-11-28-curves.json").read_text())
    seconds, runs = kernel_fixed_s(curves["curves"]["gemm"], h200, tm)
    assert runs == 275 and tm.kernel_s == pytest.approx(seconds, rel=5e-3)


def test_an_isolated_add_slower_than_every_measured_call_is_capped_at_the_fastest_call():
    """On a loaded CPU the isolated add can take longer than a GEMM (CI once measured so): no call costs less than
    its fixed part, so the fits subtract at most the fastest call's time and still find an efficiency."""
    raw = synthetic(TRUTH, 0.5)
    fastest = min(x["seconds"] for x in raw["gemm"] + raw["attention"])
    raw["tiny"]["seconds"] = 50 * fastest
    tm, notes = fit(raw, H100, TimeModel(overlap=0.5), "a base")
    assert tm.compute_efficiency > 0
    assert any("longer than the fastest measured call" in n for n in notes)


def test_gemms_no_slower_than_the_fastest_call_are_fitted_without_a_fixed_cost():
    """On a loaded CPU every tiny GEMM can take the same time, the largest no longer than the fastest call plus
    its memory time (CI measured so): the fits then subtract no fixed cost, and say so."""
    raw = synthetic(TRUTH, 0.5)
    for x in raw["gemm"] + raw["attention"]:
        x["seconds"] = 3.5e-5
    raw["tiny"]["seconds"] = 1e-3
    tm, notes = fit(raw, H100, TimeModel(overlap=0.5), "a base")
    assert tm.compute_efficiency > 0
    assert any("subtract no fixed cost" in n for n in notes)


def test_a_smoke_run_whose_copy_is_slower_than_its_gemms_keeps_the_base_gemm_figures():
    """A loaded CPU can copy so slowly that every GEMM's memory time exceeds its measured time: a smoke run then
    keeps the base profile's GEMM figures (it covers the code path); a GPU's run still refuses."""
    raw = synthetic(TRUTH, 0.5) | {"smoke": True}
    raw["copy"] = {"bytes": raw["copy"]["bytes"], "seconds": raw["copy"]["seconds"] * 1e6}
    base = TimeModel(overlap=0.5)
    tm, _ = fit(raw, H100, base, "a base")
    assert tm.compute_efficiency == base.compute_efficiency and "kept from a base" in tm.sources["compute_efficiency"]
    with pytest.raises(UserError):
        fit(raw | {"smoke": False}, H100, base, "a base")


def test_fit_keeps_what_it_cannot_measure_and_says_where_each_figure_comes_from():
    base, name = base_profile(H100)
    raw = synthetic(TRUTH, base.overlap) | {"collectives": [], "comm_note": "one GPU visible: no collective measured"}
    tm, _ = fit(raw, H100, base, name)
    for field in ("overlap", "step_s", "comm_efficiency", "collective_s"):
        assert getattr(tm, field) == getattr(base, field)
        assert tm.sources[field].startswith("kept from presets/calibration/h100-sxm.yaml ("), tm.sources[field]
    assert "one GPU visible" in tm.sources["collective_s"] and "not measurable" in tm.sources["overlap"]
    for field in ("compute_efficiency", "fp8_efficiency", "attention_efficiency", "matmul_pad_rows",
                  "memory_efficiency", "kernel_s"):
        assert tm.sources[field].startswith("measured by llmcalc calibrate on synthetic H100, 2026-01-01, torch x, "
                                            "CUDA y: "), tm.sources[field]
    # a GPU without an fp8 peak keeps no fp8 figure; one without a bundled profile keeps the roofline's
    a100 = load_gpu("a100-80gb")
    tm, _ = fit(synthetic(TRUTH, 1.0), a100, *base_profile(a100))
    assert tm.fp8_efficiency is None and "fp8_efficiency" not in tm.sources
    roofline, why = base_profile(load_gpu("h100-sxm").model_copy(update={"name": "my-gpu"}))  # no bundled profile
    assert roofline.overlap == 0 and "roofline" in why


def test_fit_clips_to_the_time_model_ranges_and_says_so():
    """Timings faster than the preset's datasheet (a wrong --gpu) give shares above 1: clipped, and noted."""
    l4 = load_gpu("l4")  # far lower peaks and bandwidth than the H100 the timings come from
    tm, _ = fit(synthetic(TRUTH, 0.0), l4, TimeModel(), "a base")
    assert tm.memory_efficiency == 1.0 and "clipped from" in tm.sources["memory_efficiency"]
    TimeModel.model_validate(tm.model_dump())


def test_plan_takes_the_weight_shapes_of_the_model():
    assert [(g.name, g.n, g.k) for g in gemm_shapes(LLAMA3)] == [
        ("q/o", 4096, 4096), ("k/v", 1024, 4096), ("gate/up", 14336, 4096), ("down", 4096, 14336)]
    cuda, quick, cpu = plan(LLAMA3, "cuda"), plan(LLAMA3, "cuda", quick=True), plan(LLAMA3, "cpu")
    assert cuda.rows == [2**i for i in range(15)] and cuda.prefill == [512 * 2**i for i in range(7)]
    assert quick.rows[0] == 1 and quick.rows[-1] == 16384 and len(quick.rows) == 8
    assert (cuda.heads, cuda.kv_heads, cuda.head_dim) == (32, 8, 128)
    assert cpu.smoke and max(cpu.rows) == 64 and max(cpu.prefill) == 256 and cpu.copy_bytes <= 8 << 20
    assert all(g.n % 16 == 0 and g.k % 16 == 0 for g in cpu.gemms)


def test_attention_flops_count_causal_pairs_as_llmcalc_does():
    s = 4096
    assert attention_flops(32, 8, 128, s) == 4 * 32 * 128 * s * (s + 1) // 2
    assert attention_flops(32, 8, 128, s) == sum(LLAMA3.attention.core(s, 0, None, "causal").values())


@pytest.mark.parametrize("name, preset", [("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H200", "h200"),
                                          ("NVIDIA A100-SXM4-80GB", "a100-80gb"), ("NVIDIA H100 PCIe", "h100-pcie"),
                                          ("NVIDIA L40S", "l40s"), ("NVIDIA GB300", "gb300"),
                                          ("NVIDIA B300 SXM6 AC", "b300"), ("Tesla T4", None)])
def test_device_names_map_to_gpu_presets(name, preset):
    assert preset_for_device(name) == preset


def test_calibrate_on_cpu_writes_a_smoke_profile_no_gpu_loads(tmp_path):
    """A CPU smoke run's profile is labelled `gpu: cpu` (its figures are no GPU's): latency refuses it on a GPU in
    one line; refitting its raw timings for a GPU preset (--from-raw --gpu) gives a profile latency loads."""
    pytest.importorskip("torch")
    out, raw = tmp_path / "profile.yaml", tmp_path / "raw.json"
    r = subprocess.run([sys.executable, "-m", "llmcalc", "calibrate", "--device", "cpu", "--out", str(out),
                        "--raw", str(raw)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    text = out.read_text(encoding="utf-8")
    assert "CPU smoke run" in text and text.startswith("# CPU smoke-run profile")
    data = yaml.safe_load(text)
    assert list(data) == [k for k in PROFILE_FIELDS if k in data] and data["name"] == "calibrated"
    assert data["gpu"] == "cpu" and set(data["sources"]) == set(data) - {"name", "gpu", "sources"}
    refused = run_cli("latency", "--preset", "llama2-7b", "--gpu", "h100-sxm", "--calibration", str(out))
    assert refused.returncode == 2 and "smoke run" in refused.stderr and len(refused.stderr.splitlines()) == 1
    timings = json.loads(raw.read_text(encoding="utf-8"))
    assert {x["dtype"] for x in timings["gemm"]} >= {"bf16"} and timings["attention"] and timings["smoke"]
    refit = tmp_path / "h100.yaml"
    r = run_cli("calibrate", "--from-raw", str(raw), "--gpu", "h100-sxm", "--out", str(refit))
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(refit.read_text(encoding="utf-8"))["gpu"] == "cpu"  # still a smoke run's figures
    tm = load_time_model("calibrated", load_gpu("a100-80gb"), calibration=ROOT_PROFILES / "a100-80gb.yaml")
    assert tm.gpu == "a100-80gb"


def test_a_profile_for_another_gpu_is_refused_in_one_line():
    lat = run_cli("latency", "--preset", "llama2-7b", "--gpu", "a100-80gb", "--calibration",
                  str(ROOT_PROFILES / "h100-sxm.yaml"))
    assert lat.returncode == 2 and "a profile for h100-sxm, not a100-80gb" in lat.stderr
    assert len(lat.stderr.splitlines()) == 1


def test_an_existing_out_file_is_left_as_it_is(tmp_path):
    out = tmp_path / "mine.yaml"
    out.write_text("my own profile\n", encoding="utf-8")
    before = out.stat().st_mtime_ns
    r = run_cli("calibrate", "--device", "cpu", "--out", str(out))
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--out" in r.stderr and "--force" in r.stderr
    assert out.read_text(encoding="utf-8") == "my own profile\n" and out.stat().st_mtime_ns == before


def test_cuda_without_a_gpu_is_one_line():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    r = run_cli("calibrate", "--device", "cuda")
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "no CUDA GPU" in r.stderr and "--device cpu" in r.stderr


def test_without_torch_bad_input_is_named_first_then_torch():
    def run(*args):
        code = ("import sys\nsys.modules['torch'] = None\nfrom llmcalc.cli import main\n"
                f"sys.argv = ['llmcalc', *{list(args)!r}]\nmain()")
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)

    for args, said in ((["--gpu", "nope"], "unknown GPU"), (["-p", "nope"], "unknown preset"), ([], "needs PyTorch")):
        r = run("calibrate", "--device", "cpu", *args)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and said in r.stderr, r.stderr


def test_the_fit_and_the_command_module_import_no_torch():
    code = ("import llmcalc.costs.calibration, llmcalc.views.calibrate, llmcalc.cli.calibrate, sys\n"
            "print(' '.join(sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert "torch" not in loaded and "llmcalc.reference.calibrate" not in loaded


# ---- the harness on the CPU: every path but CUDA events and the device name ---------------------------------


def test_sdpa_repeats_kv_heads_where_gqa_is_refused():
    torch = pytest.importorskip("torch")
    from llmcalc.reference.calibrate import sdpa

    q, k, v = torch.randn(1, 4, 8, 16), torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 16)
    torch.testing.assert_close(sdpa(q, k, v, True, gqa=False)(), sdpa(q, k, v, True, gqa=True)())


def test_collectives_run_over_two_processes_with_gloo():
    """The multi-GPU path (spawn + torch.distributed) as it runs with NCCL, here with gloo on the CPU."""
    pytest.importorskip("torch")
    from llmcalc.reference.calibrate import collectives

    out = collectives(2, "gloo", "cpu", [1024, 65536], warmup=1, runs=2)
    reduce = [x for x in out if x["op"] == "all_reduce"]
    assert [x["bytes"] for x in reduce] == [1024, 65536] and all(x["seconds"] > 0 and x["world"] == 2 for x in out)


def test_a_raw_file_of_too_many_objects_is_refused_before_it_is_parsed(tmp_path):
    """`--from-raw` of 64 MiB of `{},` took 1.7 GB and 6.5 s to refuse; the objects are counted first now."""
    from llmcalc.inputs.files import MAX_CONTAINERS

    raw = tmp_path / "raw.json"
    raw.write_text('{"gemm": [' + "{}," * MAX_CONTAINERS + "{}]}")
    r = run_cli("calibrate", "--from-raw", str(raw), "--gpu", "h200")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--from-raw" in r.stderr and f"{MAX_CONTAINERS + 3:,} JSON objects and arrays" in r.stderr
