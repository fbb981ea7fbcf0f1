"""Attention kernels as data (presets/kernels/attention.yaml) and the training step's attention core: the figures
against the FlashAttention-3 paper's charts, the GPU presets' architectures, the backward timed as the kernel runs
it, and `train --attention-impl` in a subprocess (exit codes, notes, JSON)."""

from __future__ import annotations

import json

import pytest

from llmcalc.costs.flops import flops
from llmcalc.costs.training import training_step
from llmcalc.inputs.gpus import gpu_names, load_gpu
from llmcalc.inputs.kernels import attention_kernels, with_attention_kernel
from llmcalc.inputs.presets import load_preset
from llmcalc.inputs.time_models import load_time_model
from llmcalc.model.time_model import ROOFLINE
from llmcalc.workload import Workload
from tests.conftest import run_cli

H100_BF16 = 989.4
"""The H100 SXM5's dense bf16 peak, TFLOP/s (the Hopper whitepaper), the paper's GPU."""
PAPER = {  # FlashAttention-3 (Shah et al. 2024), head dim 128, 16k, H100 SXM5: TFLOP/s
    "fa2": {"causal": 335, "forward": 370, "backward": 322},
    "cudnn": {"causal": 539, "forward": 595, "backward": 516},
    "fa3": {"causal": 616, "forward": 648, "backward": 561},
}
"""Figure 5 (forward, with and without the causal mask) and Figure 6 (backward, no mask) of the paper."""


@pytest.mark.parametrize("name", sorted(PAPER))
def test_hopper_figures_are_the_papers(name):
    k = attention_kernels()[name].on("hopper")
    paper = PAPER[name]
    assert k.forward * H100_BF16 == pytest.approx(paper["causal"], abs=0.5)
    assert k.backward == pytest.approx(paper["backward"] / paper["forward"], abs=0.0005)


def test_every_gpu_names_its_architecture():
    arch = {name: load_gpu(name).architecture for name in gpu_names()}
    assert all(arch.values()), [n for n, a in arch.items() if not a]
    assert {n for n, a in arch.items() if a == "hopper"} == {"h100-sxm", "h100-pcie", "h200", "h800", "h20"}
    assert arch["a100-80gb"] == "ampere" and arch["b200"] == "blackwell" and arch["mi300x"] == "cdna3"


def test_the_backward_of_the_core_is_its_kernels():
    """Two kernels differ only in the attention core, so the steps' difference is the core's alone: forward
    c / e, backward 2.5·c / (e·r) for c its FLOPs on one GPU at the peak (a compute-bound core at 8k tokens),
    e the kernel's forward share and r its backward ratio. The FLOPs are `flops`' (FlopCounterMode-checked)."""
    spec, gpu = load_preset("llama3-8b"), load_gpu("h100-sxm")
    w = Workload(train=True, batch=8, seq=8192, micro_batch=1)
    tm = load_time_model("calibrated", gpu)
    a, b = (with_attention_kernel(tm, k, gpu) for k in ("fa2", "fa3"))
    ra, rb = (training_step(spec, gpu, w, t, check_memory=False) for t in (a, b))
    counted = flops(spec, Workload(batch=8, seq=8192, logits="all"))
    core = sum(r.prefill for r in counted.breakdown if r.component.startswith("attention/core"))
    peak = gpu.peak("bf16")

    def core_time(t):
        return core / peak / t.attention_efficiency * (1 + 2.5 / t.attention_backward)

    assert ra.forward_s + ra.backward_s - rb.forward_s - rb.backward_s == pytest.approx(
        core_time(a) - core_time(b), rel=0.02)
    assert ra.mfu < rb.mfu and ra.model_flops == rb.model_flops


def test_the_roofline_takes_no_kernel_and_counts_the_recompute():
    """The roofline is a bound: no kernel's shortfall (backward ratio 1), but the flash backward's FLOPs."""
    gpu = load_gpu("h100-sxm")
    assert with_attention_kernel(ROOFLINE, "fa2", gpu) is ROOFLINE
    assert ROOFLINE.attention_backward == 1.0


def test_no_figure_on_the_architecture_keeps_the_profile():
    gpu = load_gpu("b200")
    tm = load_time_model("calibrated", gpu)
    kept = with_attention_kernel(tm, "fa3", gpu)
    assert (kept.attention_efficiency, kept.attention_backward, kept.attention_kernel) == (
        tm.attention_efficiency, tm.attention_backward, None)
    assert "no published figure on blackwell" in kept.sources["attention_kernel"]


def test_train_attention_impl_in_a_subprocess():
    base = ("train", "-p", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--batch", "16", "--micro-batch", "1",
            "--seq", "16384", "--recompute", "full", "--zero", "3", "--format", "json")
    runs = {k: run_cli(*base, "--attention-impl", k) for k in ("cudnn", "fa2", "profile")}
    assert all(r.returncode == 0 for r in runs.values()), {k: r.stderr for k, r in runs.items()}
    data = {k: json.loads(r.stdout) for k, r in runs.items()}
    assert data["cudnn"] == json.loads(run_cli(*base).stdout)  # cudnn is the default
    assert [data[k]["attention_kernel"] for k in ("cudnn", "fa2", "profile")] == ["cudnn", "fa2", None]
    assert data["fa2"]["step_s"] > data["cudnn"]["step_s"] > data["profile"]["step_s"]
    assert any("the fa2 kernel, forward at 0.339" in n for n in data["fa2"]["notes"])

    bad = run_cli(*base, "--attention-impl", "fa4")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        "error: --attention-impl: unknown attention kernel 'fa4'; did you mean 'fa3'? use one of cudnn, fa2, fa3, "
        "profile"]
