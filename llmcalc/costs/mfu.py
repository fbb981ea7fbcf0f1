"""Model and hardware FLOPs utilisation of a measured training run (`llmcalc mfu`). See docs/commands/mfu.md.

  model FLOPs per token    = train_flops / (B·S)           (llmcalc/costs/flops.py: forward + backward)
  hardware FLOPs per token = train_hardware_flops / (B·S)  (+ the attention kernel's backward, the recomputed ops)
  tokens/s                 = measured, or B·S / step time
  MFU = tokens/s · model FLOPs per token / (gpus · peak)   (Chowdhery et al. 2022, PaLM, Appendix B)
  HFU = tokens/s · hardware FLOPs per token / (gpus · peak)
"""

from __future__ import annotations

import math

from llmcalc.costs.flops import ATTENTION_CONVENTIONS, flops
from llmcalc.errors import UserError
from llmcalc.model.spec import ModelSpec
from llmcalc.reports.mfu import MfuReport
from llmcalc.workload import Workload, require_sizes

FORMULA = ("MFU = tokens/s · model FLOPs per token / (gpus · peak); HFU = tokens/s · hardware FLOPs per token / "
           "(gpus · peak); per token = flops' train_flops (model) or train_hardware_flops (hardware) / (B·S)")
PEAK_FLOPS = (1e9, 1e18)
"""Sane dense peaks of one accelerator, FLOP/s: 1 GFLOP/s (a small CPU core) to 1 EFLOP/s (1,000 × an H100)."""
MIN_MFU = 1e-6
"""The least MFU a measured run is read at: a millionth of the peak (one H100 training Llama-3-8B at 0.02 tokens/s) is a
figure in the wrong unit, not a run."""


def _positive(name: str, value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UserError(f"`{name}`: {value} is not a positive number; give one such as 1.5")


def utilisation(spec: ModelSpec, w: Workload, *, gpus: int, peak_flops: float, tokens_per_s: float | None = None,
                step_s: float | None = None, gpu: str | None = None) -> MfuReport:
    """MFU and HFU of `gpus` GPUs of `peak_flops` each training `spec` on `w` (batch · seq tokens a step) at the
    measured `tokens_per_s` or `step_s` (exactly one of the two)."""
    if (tokens_per_s is None) == (step_s is None):
        raise UserError("`tokens_per_s`: give the measured throughput as tokens/s or as `step_time` (seconds per "
                        "step of batch · seq tokens), one of the two")
    _positive("tokens_per_s", tokens_per_s)
    _positive("step_time", step_s)
    if not PEAK_FLOPS[0] <= peak_flops <= PEAK_FLOPS[1]:  # NaN fails too
        field = "peak_tflops" if gpu is None else "gpu"  # the user's figure, or the GPU file's at the dtype
        fix = "give one such as 989" if gpu is None else "fix the GPU file's peak_tflops"
        shown = f"{peak_flops / 1e12:g} TFLOP/s" if math.isfinite(peak_flops) else "a peak beyond any float"
        raise UserError(f"`{field}`: {shown}{'' if gpu is None else f' ({gpu})'} is not an "
                        f"accelerator's peak (between {PEAK_FLOPS[0] / 1e12:g} and {PEAK_FLOPS[1] / 1e12:g}); {fix}")
    require_sizes(gpus=gpus)
    tokens = w.batch * w.seq
    given, value = ("tokens_per_s", tokens_per_s) if tokens_per_s is not None else ("step_time", step_s)
    tokens_per_s = tokens_per_s if tokens_per_s is not None else tokens / step_s
    r = flops(spec, w.model_copy(update={"gen": 1}))
    capacity = gpus * peak_flops
    per_s = tokens_per_s / tokens  # steps per second
    if not all(math.isfinite(x) and x > 0 for x in (tokens_per_s, tokens / tokens_per_s)):  # 1e308, 5e-324
        raise UserError(f"`{given}`: {value:g} at {tokens:,} tokens a step is a throughput beyond any float; give the "
                        "measured figure")
    if not math.isfinite(per_s * r.train_hardware_flops / capacity):  # the peak is sane: the throughput is not
        raise UserError(f"`{given}`: {value:g} on {gpus:,} × {peak_flops:g} FLOP/s puts MFU beyond any float; give "
                        "the measured figure")
    if per_s * r.train_flops < MIN_MFU * capacity:
        raise UserError(f"`{given}`: {value:g} puts MFU at {per_s * r.train_flops / capacity:.3g}, below a millionth "
                        f"of the peak of {gpus:,} × {peak_flops / 1e12:g} TFLOP/s, slower than any training run; "
                        "check the figure, its unit (tokens/s, seconds per step), `batch` and `seq`")
    if per_s * r.train_flops > capacity:  # no run does more useful work than its GPUs' peak
        raise UserError(f"`{given}`: {value:g} puts MFU at {per_s * r.train_flops / capacity:.4g} × the peak of "
                        f"{gpus:,} × {peak_flops / 1e12:g} TFLOP/s, and no run beats its peak; check the figure, "
                        "`gpus` and the peak's `compute_dtype`")
    return MfuReport(
        model=spec.name, batch=w.batch, seq=w.seq, gpus=gpus, gpu=gpu, compute_dtype=w.compute_dtype,
        peak_flops_per_gpu=peak_flops, tokens_per_s=tokens_per_s, step_s=tokens / tokens_per_s,
        attention=w.attention_core, attention_kernel=w.attention_kernel, recompute=r.recompute,
        model_flops_per_token=r.train_flops // tokens, hardware_flops_per_token=r.train_hardware_flops // tokens,
        model_flops_per_step=r.train_flops, hardware_flops_per_step=r.train_hardware_flops,
        model_tflops_per_gpu=per_s * r.train_flops / gpus / 1e12,
        mfu=per_s * r.train_flops / capacity, hfu=per_s * r.train_hardware_flops / capacity,
        convention=(f"a multiply-add is 2 FLOPs, matmuls only; attention core {w.attention_core}: "
                    f"{ATTENTION_CONVENTIONS[w.attention_core]}; all logits; model FLOPs: forward + backward "
                    f"(3 × forward), nothing redone; hardware FLOPs: + the {w.attention_kernel} kernel's backward "
                    f"and the recompute ({r.recompute})"),
        formula=FORMULA,
        notes=[n for n in r.notes if n.startswith(("attention core", "train:"))],
    )
