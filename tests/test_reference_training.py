"""The reference engine's training step (llmcalc/costs/engine_time.py engine_training_step): its kernels counted from
the reference under autograd (llmcalc/reference/kernel_count.py count_training), against the kernels and the times
an H200 measured (benchmarks/gpu/h200-2026-12-01-training*.json) and an H100's (benchmarks/gpu/h100-2026-11-28.json);
the attention backward's kernel class fitted to its kernels' own time."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from llmcalc.costs.engine_fit import fit_reference
from llmcalc.costs.engine_time import engine_step, engine_training_step
from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.presets import load_preset
from llmcalc.inputs.time_models import load_engine_profile
from llmcalc.model.engine_profile import EngineHost, EngineKernels, EngineProfile, KernelCurve, TrainingKernels
from llmcalc.views.validate import scaled_copy
from llmcalc.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
GPU_DIR = ROOT / "benchmarks" / "gpu"
H200_STEPS = GPU_DIR / "h200-2026-12-01-training.json"
H200_PROFILES = GPU_DIR / "h200-2026-12-01-training-profiles.json"
H100_RUN = GPU_DIR / "h100-2026-11-28.json"
NO_KERNELS = EngineKernels(calls=0, launches=0, elementwise=0, elementwise_bytes=0, strided=0, strided_bytes=0,
                           scatters=0, scatter_bytes=0, reductions=0, reduction_bytes=0, matmuls=0, attention=0)


def measured_spec(cell: dict):
    """The model a campaign cell measured: the preset cut to its layers, its widths divided by its scale."""
    spec = load_preset(cell["preset"])
    return scaled_copy(spec, cell["layers"] if cell["layers"] < spec.n_layers else None, cell["scale"])


def cells(path: Path, keep=lambda c: True) -> list[dict]:
    return [c for c in json.loads(path.read_text())["training"] if "step_s" in c and keep(c)]


# ---- the kernels, counted -------------------------------------------------------------------------------------


def test_training_counts_are_the_kernels_the_h200_launched():
    """Per part of a training step of each of the five measured families, the counted kernels against those the
    GPU's profiler saw: the optimizer's exactly; the forward's and backward's from below (cuDNN's attention and
    the routers' sorts launch more kernels than aten calls) and within 40%; the backward's matmuls twice the
    forward's (each weight's input and weight gradients)."""
    pytest.importorskip("torch")
    from llmcalc.reference.kernel_count import count_training

    profiles = json.loads(H200_PROFILES.read_text())["training"]
    seen = set()
    for cell in cells(H200_STEPS, lambda c: (c["batch"], c["seq"]) == (1, 2048)):
        counted = count_training(measured_spec(cell), 1, 2048)
        real = profiles[f"{cell['preset']} 1x2048"]
        assert counted.optimizer.launches == real["optimizer"]["kernels"]
        for part in ("forward", "backward"):
            assert 0.6 * real[part]["kernels"] <= getattr(counted, part).launches <= real[part]["kernels"], part
        assert counted.backward.matmuls == 2 * counted.forward.matmuls
        assert counted.backward.attention == counted.forward.attention
        seen.add(cell["preset"])
    assert len(seen) == 5


def test_rms_norm_under_autograd_is_the_gpus_fused_kernel():
    """Under autograd F.rms_norm counts as torch's fused CUDA kernel: one row-wise kernel forward (x and the weight
    read, y and a 1/rms per row written), two backward; not the composite's element-wise passes."""
    torch = pytest.importorskip("torch")
    from torch._subclasses.fake_tensor import FakeTensorMode

    from llmcalc.reference.kernel_count import KernelCount, fused_norm

    with FakeTensorMode():
        x = torch.empty(64, 128, dtype=torch.bfloat16, requires_grad=True)
        norm = torch.nn.RMSNorm(128, dtype=torch.bfloat16)
        counter = KernelCount()
        with fused_norm(counter), counter:
            y = norm(x)
            forward = counter.result()
            y.backward(torch.empty_like(y))
    back = counter.result()
    assert (forward.reductions, forward.elementwise, forward.strided) == (1, 0, 0)
    assert forward.reduction_bytes == 2 * 64 * 128 * 2 + 128 * 2 + 64 * 4
    assert back.reductions - forward.reductions == 2
    assert back.reduction_bytes - forward.reduction_bytes == (3 + 2) * 64 * 128 * 2 + 2 * (128 * 2 + 64 * 4)


# ---- the step -------------------------------------------------------------------------------------------------


def toy_profile() -> EngineProfile:
    curve = KernelCurve(compute_efficiency=0.75, pad=32, memory_efficiency=0.85, fixed_s=4e-6)
    own = KernelCurve(memory_efficiency=0.9, fixed_s=1.2e-6)
    return EngineProfile(name="toy", gpu="h100-sxm", measured_on={}, host=EngineHost(
        call_s=5e-6, eager_kernel_s=0.0, replay_s=1.5e-5), kernels={
        "matmul": curve, "elementwise": own, "strided": own, "reduction": own,
        "attention_prefill": KernelCurve(compute_efficiency=0.67, pad=200, memory_efficiency=1.0, fixed_s=4e-5),
        "attention_backward": KernelCurve(compute_efficiency=0.5, pad=0, memory_efficiency=1.0, fixed_s=1e-5),
        "attention_decode": KernelCurve(memory_efficiency=0.84, fixed_s=9e-6)})


def test_backward_is_twice_each_matmul_and_the_core_on_its_own_class():
    """With no counted kernels: each weight matmul's backward takes twice its forward's time (input and weight
    gradients, each the forward's shape), the attention core's runs on attention_backward at flash's 2.5 × the
    forward's FLOPs, and the backward is its GPU time (no host bound) however many calls it dispatches."""
    spec, gpu = load_preset("llama3-8b"), load_gpu("h100-sxm")
    busy = EngineKernels(**{**NO_KERNELS.__dict__, "calls": 10**7})
    w = Workload(batch=1, seq=4096, train=True)
    step = engine_training_step(spec, gpu, w, toy_profile(), TrainingKernels(NO_KERNELS, busy, NO_KERNELS), 1, 4096)
    fwd, bwd = step.forward.ops, step.backward.ops
    for op in ("attention/proj", "ffn", "lm_head"):
        assert bwd[op] == pytest.approx(2 * fwd[op])
    core = step.backward.ops["attention/core"]
    flops = 4 * spec.attention.heads * spec.attention.head_dim * 4096 * 4097 / 2 * spec.n_layers
    assert core == pytest.approx(2.5 * flops / (gpu.peak("bf16") * 0.5) + spec.n_layers * 1e-5, rel=0.01)
    assert step.backward.host_s is None and step.backward.bound == "gpu"
    assert step.backward.seconds == pytest.approx(sum(bwd.values()))
    assert step.seconds == pytest.approx(step.forward.seconds + step.backward.seconds + step.optimizer.seconds)


def test_the_forward_is_inferences_prefill_with_every_positions_logits():
    """The training forward is the engine's eager prefill of the same tokens but for the head, which projects
    every position (its matmul goes from 1 row, reading the weights, to S rows, compute-bound)."""
    spec, gpu, profile = load_preset("llama3-8b"), load_gpu("h100-sxm"), toy_profile()
    parts = TrainingKernels(NO_KERNELS, NO_KERNELS, NO_KERNELS)
    train = engine_training_step(spec, gpu, Workload(batch=1, seq=2048, train=True), profile, parts, 1, 2048)
    prefill = engine_step(spec, gpu, Workload(batch=1, seq=2048, logits="last"), profile, NO_KERNELS, 1, 2048, 0)
    assert {op: t for op, t in train.forward.ops.items() if op != "lm_head"} == pytest.approx(
        {op: t for op, t in prefill.ops.items() if op != "lm_head"})
    head = 2 * 2048 * spec.vocab_size * spec.d_model / (gpu.peak("bf16") * 0.75)  # compute-bound at S rows
    assert head <= train.forward.ops["lm_head"] <= 1.05 * head and prefill.ops["lm_head"] < head / 5


@pytest.mark.parametrize("path,gpu,keep,within", [
    (H200_STEPS, "h200", lambda c: (c["batch"], c["seq"]) in ((1, 8192), (4, 2048)), 7),
    (H100_RUN, "h100-sxm", lambda c: True, 4)])
def test_engine_training_step_against_measured_steps(path, gpu, keep, within):
    """Against training steps measured on the GPU (never fitted on): every step within 25%, the median |error|
    within 10%, `within` cells within 15%, and the optimizer's update (memory-bound, counted) within 5%."""
    pytest.importorskip("torch")
    from llmcalc.reference.kernel_count import count_training

    g = load_gpu(gpu)
    profile = load_engine_profile(g)
    errors = []
    for cell in cells(path, keep):
        spec, b, s = measured_spec(cell), cell["batch"], cell["seq"]
        step = engine_training_step(spec, g, Workload(batch=b, seq=s, train=True), profile,
                                    count_training(spec, b, s), b, s)
        errors.append(step.seconds / cell["step_s"] - 1)
        assert abs(step.optimizer.seconds / cell["optimizer_s"] - 1) <= 0.05, cell["preset"]
    assert all(abs(e) <= 0.25 for e in errors), errors
    assert statistics.median(abs(e) for e in errors) <= 0.10
    assert sum(abs(e) <= 0.15 for e in errors) >= within


@pytest.mark.parametrize("path, gpu, preset, shape", [
    (H200_STEPS, "h200", "llama3-8b", (4, 2048)), (H200_STEPS, "h200", "mixtral-8x7b", (8, 1024)),
    (H200_STEPS, "h200", "gemma2-9b", (1, 4096)), (H100_RUN, "h100-sxm", "llama3-8b", (1, 8192))])
def test_train_engine_reference_against_a_measured_step(tmp_path, path, gpu, preset, shape):
    """`llmcalc train --engine reference` on a measured family (its scaled spec as a config file) against the step
    the GPU measured, within 15%; the report names the engine and sums its parts."""
    pytest.importorskip("torch")
    import yaml

    cell = cells(path, lambda c: (c["preset"], c["batch"], c["seq"]) == (preset, *shape))[0]
    config = tmp_path / "spec.yaml"
    config.write_text(yaml.safe_dump(measured_spec(cell).model_dump(mode="json"), sort_keys=False))
    done = subprocess.run([sys.executable, "-m", "llmcalc", "train", "--config", str(config), "--gpu", gpu,
                           "--engine", "reference", "--batch", str(shape[0]), "--seq", str(shape[1]), "-f", "json"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout)
    assert r["engine"] == "reference" and r["gpus"] == 1 and r["micro_batches"] == 1
    assert abs(r["forward_s"] + r["backward_s"] + r["optimizer_s"] - r["step_s"]) <= 1e-12 * r["step_s"]
    assert abs(r["step_s"] / cell["step_s"] - 1) <= 0.15, (r["step_s"], cell["step_s"])


def test_train_engine_reference_refuses_a_model_whose_backward_the_reference_cannot_run():
    """The reference's LSH attention merges its rounds in place, a kernel for inference alone: the training step is
    refused in one line naming the model, not a traceback from autograd."""
    pytest.importorskip("torch")
    from llmcalc import api
    from llmcalc.errors import UserError

    with pytest.raises(UserError, match="`model`: the reference cannot run .* backward") as e:
        api.train("reformer-decoder-example", "h200", batch=1, seq=512, engine="reference")
    assert "\n" not in str(e.value)


# ---- the attention backward's class ---------------------------------------------------------------------------


def test_the_attention_backward_fit_takes_its_kernels_own_time_where_measured():
    """A backward called alone pays a backward pass's start on the host; queued behind a sleeping kernel it is
    its kernels' time alone. Points whose isolated time carries a 400 µs start fit a fixed cost of about that;
    with the queued times the fit's fixed cost is the kernel's few µs."""
    data = json.loads((GPU_DIR / "h200-2026-11-28-curves.json").read_text())
    back = data["curves"]["attention_backward"]
    assert all("forward_backward_gpu_s" in p for p in back)
    env = {"device_name": "NVIDIA H200"}
    queued = fit_reference(data["curves"], env, load_gpu("h200"), None, "test")[0].kernels["attention_backward"]
    alone = [{k: v for k, v in p.items() if "gpu" not in k} for p in back]
    isolated = fit_reference(data["curves"] | {"attention_backward": alone}, env, load_gpu("h200"), None,
                             "test")[0].kernels["attention_backward"]
    assert queued.fixed_s < 2e-5 < 2e-4 < isolated.fixed_s


def test_train_shapes_option_refuses_a_bad_list_in_one_line():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_validation.py"), "run", "--device", "cpu",
                           "--out", "/dev/null", "--train-shapes", "1x2048,big"], capture_output=True, text=True)
    assert done.returncode != 0 and "--train-shapes" in done.stderr and len(done.stderr.strip().splitlines()) == 1
