"""`llmcalc train` (llmcalc/costs/training.py): closed-form checks of the step time against `flops --train`, the
pipeline bubble, MFU under the roofline, monotonicity in the GPU count, and the command's exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from llmcalc.costs.flops import flops
from llmcalc.costs.training import forward_costs, training_step
from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.presets import load_preset
from llmcalc.inputs.time_models import load_time_model
from llmcalc.model.time_model import ROOFLINE
from llmcalc.workload import Layout, Workload
from tests.conftest import run_cli

ROOT = Path(__file__).parents[1]


LLAMA2_7B_PASSES = 2 * 2 * 4096 + 2 * 3 * 4096 + 3 * 11008 + 2 * 64 * 128
"""Elements one llama2-7b layer's element-wise passes read and write a token, forward: two RMSNorms (4096 in and
out), two residual adds (2 · 4096 in, 4096 out), SwiGLU (2 · 11008 in, 11008 out), RoPE on 32 + 32 heads of 128."""


def passes_s(tokens: int, bandwidth: float = 2039e9, passes: int = 3) -> float:
    """Roofline seconds of llama2-7b's 32 layers' element-wise passes over `tokens` tokens in bf16: forward once,
    backward twice (`passes` 3), at the bandwidth · memory_efficiency (an A100 80GB's 2,039 GB/s by default)."""
    return passes * 32 * tokens * LLAMA2_7B_PASSES * 2 / (bandwidth * ROOFLINE.memory_efficiency)


def step(preset="llama2-7b", gpu="a100-80gb", **kw):
    """The step's time alone: these checks are of the time formula, at sizes some of which no GPU holds."""
    layout = Layout(**{k: kw.pop(k) for k in ("tp", "pp", "dp") if k in kw})
    w = Workload(train=True, layout=layout, **{"batch": 8, "seq": 4096, **kw})
    return training_step(load_preset(preset), load_gpu(gpu), w, check_memory=False)


def test_forward_is_flops_forward_with_all_logits():
    """The timed forward's FLOPs are `flops`'s prefill with every position's logits, exactly."""
    spec = load_preset("llama2-7b")
    w = Workload(batch=2, seq=1024, train=True)
    timed = sum(c[0] for c in forward_costs(spec, w, 2).values())
    assert timed == flops(spec, Workload(batch=2, seq=1024, logits="all")).prefill_flops


def test_compute_bound_step_is_train_flops_at_peak():
    """One GPU, roofline: a 7B model on 32k tokens is compute-bound, so the step is `flops --train`'s hardware
    FLOPs (causal; the flash backward's score recompute included, nothing else redone: the work the kernels do)
    over peak · efficiency, plus the element-wise passes at the bandwidth, plus the other memory-bound ops
    (embedding, optimizer), under 3%; MFU counts the model FLOPs."""
    r = step(batch=8, seq=4096)
    counted = flops(load_preset("llama2-7b"), Workload(batch=8, seq=4096))
    train = counted.train_flops
    bound = counted.train_hardware_flops / (312e12 * ROOFLINE.compute_efficiency) + passes_s(8 * 4096)
    assert train < counted.train_hardware_flops
    assert bound <= r.step_s <= 1.03 * bound
    assert r.mfu == pytest.approx(train / (r.step_s * 312e12))


def test_recompute_adds_its_flops_time():
    """Full recomputation adds the recomputed FLOPs at the same rate: step grows by ≈ the hardware FLOPs it adds
    (both count the flash kernel's own backward recompute, which the time takes as part of the backward), and by
    the layers' element-wise passes once more."""
    none, full = step(recompute="none"), step(recompute="full")
    extra = (full.hardware_flops - none.hardware_flops) / (312e12 * ROOFLINE.compute_efficiency)
    extra += passes_s(8 * 4096, passes=1)
    assert full.model_flops == none.model_flops < full.hardware_flops
    assert full.step_s - none.step_s == pytest.approx(extra, rel=0.03)


@pytest.mark.parametrize("pp,micro", [(2, 1), (4, 1), (4, 2)])
def test_bubble_is_pp_minus_one_over_m(pp, micro):
    r = step(pp=pp, batch=16, micro_batch=micro)
    m = 16 // micro
    assert r.micro_batches == m
    assert r.bubble_fraction == (pp - 1) / m
    work = r.forward_s + r.backward_s + r.recompute_s + r.tp_comm_s + r.pp_comm_s
    assert r.pp_bubble_s == pytest.approx(work * (pp - 1) / m)
    parts = work + r.pp_bubble_s + r.dp_comm_s + r.optimizer_s + r.overhead_s
    assert parts == pytest.approx(r.step_s)


@pytest.mark.parametrize("kw", [{}, {"tp": 4}, {"pp": 4, "micro_batch": 1}, {"dp": 8, "batch": 64},
                                {"recompute": "selective", "dp": 2}, {"compute_dtype": "fp8"}])
def test_mfu_is_at_most_the_roofline_efficiency(kw):
    r = step(**{"gpu": "h100-sxm", **kw})
    assert 0 < r.mfu <= r.hfu <= ROOFLINE.compute_efficiency


def test_more_gpus_never_slower_at_fixed_global_batch():
    """Fixed global batch; more data-parallel replicas: the compute part and the step shrink (or stay)."""
    runs = [step(dp=dp, batch=64, micro_batch=1) for dp in (1, 2, 4, 8)]
    for a, b in zip(runs, runs[1:]):
        assert b.forward_s + b.backward_s < a.forward_s + a.backward_s
        assert b.step_s <= a.step_s
    assert runs[-1].dp_comm_total_s > 0 and runs[0].dp_comm_total_s == 0


def test_dp_reduction_hides_under_the_last_backward_in_the_roofline():
    r = step(dp=8, batch=64, micro_batch=1)
    window = r.backward_s / r.micro_batches
    assert r.dp_comm_s == pytest.approx(max(0.0, r.dp_comm_total_s - window))


@pytest.mark.parametrize("share", [0.0, 0.12, 1.0])
def test_dp_reduction_runs_beside_the_backward_at_comm_overlap(share):
    """The reduction runs on its own stream beside the last backward: the compute keeps all but the SMs the
    communication holds, so comm_overlap of the shorter of the two is exposed (1: none hidden, the sum)."""
    g = load_gpu("h100-sxm")
    tm = load_time_model("calibrated", g).model_copy(update={"comm_overlap": share})
    w = Workload(train=True, batch=64, seq=4096, micro_batch=1, layout=Layout(dp=8))
    r = training_step(load_preset("llama2-7b"), g, w, tm, check_memory=False)
    window, d = r.backward_s / r.micro_batches, r.dp_comm_total_s
    assert 0 < d < window  # the window is the longer here: share · D exposed
    assert r.dp_comm_s == pytest.approx(share * d, rel=1e-12)


def llmcalc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "llmcalc", *args], capture_output=True, text=True, timeout=900,
                          cwd=ROOT)


def test_cli_json():
    out = llmcalc("train", "--preset", "llama2-7b", "--gpu", "a100-80gb", "--gpus", "8", "--batch", "512",
                  "--seq", "4096", "--zero", "1", "--micro-batch", "2", "--format", "json")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    for field in ("step_s", "tokens_per_s", "tokens_per_s_per_gpu", "model_flops", "hardware_flops", "mfu", "hfu",
                  "forward_s", "backward_s", "recompute_s", "tp_comm_s", "dp_comm_s", "pp_bubble_s", "optimizer_s",
                  "time_model", "notes", "formula"):
        assert field in r
    assert (r["dp"], r["tp"]) == (8, 1)


def test_cli_bad_micro_batch_is_exit_2_one_line():
    out = llmcalc("train", "--preset", "llama2-7b", "--gpu", "a100-80gb", "--dp", "8", "--batch", "512",
                  "--micro-batch", "3")
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "--micro-batch" in out.stderr


def test_cli_eager_passes_take_longer_and_say_so_and_a_wrong_mode_is_exit_2():
    """`--fusion eager` times Llama's element-wise passes as PyTorch's own ops (3.2 × the fused bytes): a longer
    forward and backward, nothing else changed, `fusion` in JSON and a note; an unknown mode is one line, exit 2."""
    args = ("train", "--preset", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--batch", "16", "--seq", "8192",
            "--micro-batch", "1", "--zero", "3", "--format", "json")
    fused, eager = (json.loads(llmcalc(*args, "--fusion", mode).stdout) for mode in ("fused", "eager"))
    assert (fused["fusion"], eager["fusion"]) == ("fused", "eager")
    assert eager["forward_s"] > fused["forward_s"] and eager["backward_s"] > fused["backward_s"]
    assert eager["model_flops"] == fused["model_flops"] and eager["dp_comm_total_s"] == fused["dp_comm_total_s"]
    assert any("eager element-wise passes" in n for n in eager["notes"])
    assert not any("eager element-wise passes" in n for n in fused["notes"])
    bad = llmcalc(*args[:-2], "--fusion", "compiled")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--fusion" in bad.stderr


# ---- memory: train refuses a step `memory --train` puts over the GPU, or with --auto lowers the micro-batch -----

TRAIN = ["-p", "llama2-7b", "--gpu", "a100-80gb", "--gpus", "8", "--batch", "512", "--seq", "4096"]


def memory_train(*args: str) -> int:
    """The most-loaded GPU's bytes as `llmcalc memory --train` reports them."""
    done = subprocess.run([sys.executable, "-m", "llmcalc", "memory", "--train", "-f", "json", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["total_bytes"]


def test_a_step_over_the_gpus_memory_is_refused_naming_the_micro_batch_that_fits():
    done = subprocess.run([sys.executable, "-m", "llmcalc", "train", *TRAIN, "--zero", "1"], capture_output=True,
                          text=True, cwd=ROOT, timeout=900)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1
    assert "--micro-batch" in done.stderr and "micro-batch 2 fits" in done.stderr and "--auto" in done.stderr
    usable = int(80 * 2**30 * 0.9)  # the A100-80GB's 80 GiB, 10% reserved
    common = ["-p", "llama2-7b", "--batch", "512", "--seq", "4096", "--dp", "8", "--zero", "1"]
    assert memory_train(*common) > usable  # the whole share of 64 at once
    assert memory_train(*common, "--micro-batch", "2") <= usable < memory_train(*common, "--micro-batch", "4")


def test_auto_takes_the_largest_micro_batch_that_fits_and_says_so():
    done = subprocess.run([sys.executable, "-m", "llmcalc", "train", *TRAIN, "--zero", "1", "--auto", "-f", "json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout)
    assert r["micro_batch"] == 2 and r["micro_batches"] == 32
    assert r["peak_memory_bytes"] == memory_train("-p", "llama2-7b", "--batch", "512", "--seq", "4096", "--dp", "8",
                                                  "--zero", "1", "--micro-batch", "2")
    assert r["peak_memory_bytes"] <= r["usable_bytes"] == int(80 * 2**30 * 0.9)
    assert any("--auto chose micro-batch 2" in n for n in r["notes"])


def test_when_no_micro_batch_fits_the_refusal_names_the_next_change_that_does():
    """ZeRO-0 AdamW keeps 16 bytes a parameter (108 GB for 6.7B): no micro-batch fits on 80 GB, so the refusal
    names the first of recomputation and ZeRO that does."""
    done = subprocess.run([sys.executable, "-m", "llmcalc", "train", *TRAIN, "--auto"], capture_output=True,
                          text=True, cwd=ROOT, timeout=900)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "no micro-batch fits" in done.stderr and "--zero 1 with micro-batch 2 fits" in done.stderr


def test_sequence_parallelism_splits_the_activations_not_the_time():
    """`train --sp`: the memory check takes `memory --train --sp`'s figure (the activations tp keeps whole split
    over the tp GPUs); the step time differs by the norms' and residual adds' passes alone, which sp splits over
    the tp GPUs (2 RMSNorms of 8192 in and out and 2 adds of 3 · 8192 a token, 80 layers, forward and twice
    backward); a step that fits only with it says so, and --sp without --tp is one line, exit 2."""
    args = ("-p", "llama3.1-70b", "--gpu", "h100-sxm", "--tp", "8", "--dp", "4", "--batch", "64", "--seq", "8192",
            "--micro-batch", "1", "--zero", "2")
    refused = run_cli("train", *args)
    assert refused.returncode == 2 and "--sp with micro-batch 1 fits" in refused.stderr
    run = run_cli("train", *args, "--sp", "--time-model", "roofline", "--format", "json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    memory = json.loads(run_cli("memory", "-p", "llama3.1-70b", "--train", "--tp", "8", "--dp", "4", "--batch", "64",
                                "--seq", "8192", "--micro-batch", "1", "--zero", "2", "--sp", "--format",
                                "json").stdout)
    assert report["peak_memory_bytes"] == memory["total_bytes"]
    spec = load_preset("llama3.1-70b")
    w = Workload(train=True, batch=64, seq=8192, micro_batch=1, zero=2, layout=Layout(tp=8, dp=4))
    plain = training_step(spec, load_gpu("h100-sxm"), w, check_memory=False)
    stream = 2 * 2 * 8192 + 2 * 3 * 8192
    saved = 16 * 3 * 80 * 8192 * (stream - stream // 8) * 2 / (3.35e12 * ROOFLINE.memory_efficiency)
    # the gradient reduction outlasts the last backward, so what that backward saves comes back exposed
    assert plain.dp_comm_s > 0 and report["step_s"] == pytest.approx(plain.step_s - saved + saved * 2 / 3 / 16,
                                                                      rel=1e-9)
    bad = run_cli("train", "-p", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--sp")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "--sp" in bad.stderr


@pytest.mark.parametrize("kw, field", [
    ({"engine": "vllm"}, "`engine`"), ({"tp": 2}, "`tp`"), ({"gpus": 2}, "`dp`"), ({"lora_rank": 8}, "`lora_rank`"),
    ({"recompute": "full"}, "`recompute`"), ({"optimizer": "sgd"}, "`optimizer`"),
    ({"micro_batch": 1}, "`micro_batch`"),
    ({"auto": True}, "`auto`"), ({"interval": True}, "`interval`"), ({"time_model": "roofline"}, "`time_model`"),
    ({"attention_impl": "fa3"}, "`attention_impl`"), ({"gpu": "a100-80gb"}, "`gpu`"), ({"batch": 4096}, "`batch`")])
def test_train_on_the_reference_engine_refuses_what_it_does_not_run(kw, field):
    """The reference engine trains one micro-batch on one GPU with its own recipe, on a GPU with an engine profile:
    anything else is a one-line refusal naming the field, before torch is needed."""
    from llmcalc import api
    from llmcalc.errors import UserError

    args = {"gpu": "h200", "batch": 2, "seq": 2048, "engine": "reference"} | kw
    with pytest.raises(UserError, match=field) as e:
        api.train("exaone-4.0-1.2b", **args)
    assert "\n" not in str(e.value)


def test_train_engine_reference_exits_2_without_torch():
    """Without torch the reference engine's count cannot run: exit 2, one line naming the install."""
    code = ("import sys\nsys.modules['torch'] = None\nfrom llmcalc.cli import main\nsys.argv = ['llmcalc', 'train', "
            "'-p', 'gpt2', '--gpu', 'h200', '--batch', '2', '--seq', '1024', '--engine', 'reference']\nmain()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert r.returncode == 2 and "needs PyTorch" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_train_engine_reference_bounds_the_layers_it_counts(tmp_path):
    """The count runs every layer in torch, so the reference engine takes a bounded number of layers: beyond it,
    exit 2 in one line before any torch work."""
    import yaml

    data = load_preset("tiny-decoder-example").model_dump(mode="json")
    data["n_layers"], data["layer_pattern"] = 300, (data["layer_pattern"] * 300)[:300]
    config = tmp_path / "deep.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    r = run_cli("train", "--config", str(config), "--gpu", "h200", "--batch", "1", "--seq", "256",
                "--engine", "reference")
    assert r.returncode == 2 and "300 layers" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_train_engine_reference_refuses_an_attention_kernel_in_one_line():
    """The reference engine runs its own attention: an --attention-impl beside it exits 2 in one line naming the
    flag, before any torch work."""
    r = run_cli("train", "-p", "exaone-4.0-1.2b", "--gpu", "h200", "--batch", "2", "--seq", "2048",
                "--engine", "reference", "--attention-impl", "fa3")
    assert r.returncode == 2 and "--attention-impl" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
