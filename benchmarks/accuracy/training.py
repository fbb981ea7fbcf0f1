"""Compare `llmcalc train` (llmcalc/costs/training.py) with the published training throughputs in training.yaml.

Run: python benchmarks/accuracy/training.py            (a text table)
The "Training" section of docs/accuracy.md is section() of this module; benchmarks/accuracy/evaluate.py appends it
to the page, so `python benchmarks/accuracy/evaluate.py --write docs/accuracy.md` regenerates both.

A row's measured step time: batch · seq / (tokens/s per GPU · gpus) where the source publishes tokens/s, else the
source's FLOPs per step / (its TFLOP/s per GPU · gpus), the FLOPs counted by llmcalc's `flops --train` under the
source's convention (`flops_convention`: the attention core dense or causal; with or without the recomputed
forward). MFU, measured and predicted, is the model FLOPs of that convention (no recomputation) / (step · gpus ·
the GPU's peak at the row's compute dtype). ratio = measured step / predicted step: ≥ 1 where the model predicts
less time than was measured, which the roofline (a lower bound) must.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import NamedTuple

import yaml

from llmcalc.costs.flops import flops
from llmcalc.costs.training import training_step
from llmcalc.inputs.files import PRESETS, read_yaml
from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.presets import spec_from_data
from llmcalc.inputs.time_models import load_time_model
from llmcalc.workload import Layout, Workload

DATA = Path(__file__).resolve().parent / "training.yaml"
TIME_MODELS = ("roofline", "calibrated")


INTRO = """
`llmcalc train` (llmcalc/costs/training.py; docs/roofline.md, Training step time) against published training
throughputs. The measured step is the batch's tokens over the published tokens/s, or, where only FLOP/s are
published, the source's FLOPs per step (llmcalc's `flops --train` under the source's convention: Megatron-LM and
NeMo count the attention core dense, and Megatron-LM 2021 counts the recomputed forward) over the published FLOP/s.
MFU is the model FLOPs of that convention over step · GPUs · the peak at the compute dtype (fp8 rows: the fp8 peak,
1,979 TFLOP/s on an H100 SXM; bf16: 989 on an H100, 312 on an A100). ratio = measured step / predicted step; the
roofline is a lower bound on time and must give ratio ≥ 1.
"""
"""The section's opening paragraph (its line breaks are not kept)."""


class Result(NamedTuple):
    row: dict
    measured_s: float
    measured_mfu: float
    predicted_s: dict[str, float]
    predicted_mfu: dict[str, float]
    peak: float

    def ratio(self, tm: str) -> float:
        return self.measured_s / self.predicted_s[tm]


def load_rows(path: Path = DATA) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)["rows"]


def spec_of(row: dict):
    """The row's model: its preset, with `shape` (a GPT-3-shaped model of another size) put in its fields."""
    data = read_yaml(PRESETS / f"{row['model']}.yaml", "preset")
    shape = row.get("shape")
    if shape:
        data = {**data, "name": row["id"], "vocab_size": shape["vocab_size"], "d_model": shape["d_model"],
                "n_layers": shape["n_layers"], "max_seq_len": max(data["max_seq_len"], row["seq"]),
                "attention": {**data["attention"], "heads": shape["heads"], "kv_heads": shape["heads"],
                              "head_dim": shape["head_dim"]},
                "ffn": {**data["ffn"], "d_ff": shape["d_ff"]}}
    return spec_from_data(data, row["id"])


def workload_of(row: dict, **update) -> Workload:
    tp, pp = row["tp"], row["pp"]
    return Workload(batch=row["batch"], seq=row["seq"], train=True, micro_batch=row["micro_batch"],
                    compute_dtype=row["compute_dtype"], recompute=row["recompute"], logits="all",
                    attention_core=row["flops_convention"]["attention"],
                    layout=Layout.of(row["gpus"], tp, pp, row["gpus"] // (tp * pp))).model_copy(update=update)


@functools.cache
def _time_model(name: str, gpu: str):
    return load_time_model(name, load_gpu(gpu))


def evaluate_row(row: dict) -> Result:
    spec, gpu, w = spec_of(row), load_gpu(row["gpu"]), workload_of(row)
    peak = gpu.peak(w.compute_dtype)
    conv, m = row["flops_convention"], row["measured"]
    model_flops = flops(spec, workload_of(row, recompute="none")).train_flops
    if "tokens_per_s_per_gpu" in m:
        measured_s = row["batch"] * row["seq"] / (m["tokens_per_s_per_gpu"] * row["gpus"])
    else:
        # a published hardware figure counts the recomputed forward and the attention backward as 2 × its forward
        # (Narayanan et al. 2021: 96·B·s·l·h²·(…)): llmcalc's hardware FLOPs with the eager kernel
        counted = flops(spec, workload_of(row, recompute=row["recompute"] if conv["recompute"] else "none",
                                          attention_kernel="eager"))
        per_gpu = m.get("hardware_tflops_per_gpu") if conv["recompute"] else m.get("model_tflops_per_gpu")
        measured_s = counted.train_hardware_flops / (per_gpu * 1e12 * row["gpus"])
    reports = {tm: training_step(spec, gpu, w, _time_model(tm, row["gpu"]), check_memory=False) for tm in TIME_MODELS}
    return Result(row, measured_s, model_flops / (measured_s * row["gpus"] * peak),
                  {tm: r.step_s for tm, r in reports.items()}, {tm: r.mfu for tm, r in reports.items()}, peak)


def evaluate(rows: list[dict] | None = None) -> list[Result]:
    return [evaluate_row(r) for r in (load_rows() if rows is None else rows)]


def _published(m: dict) -> str:
    parts = []
    if "tokens_per_s_per_gpu" in m:
        parts.append(f"{m['tokens_per_s_per_gpu']:,} tok/s/GPU")
    if "model_tflops_per_gpu" in m:
        parts.append(f"{m['model_tflops_per_gpu']} model TFLOP/s/GPU")
    if "hardware_tflops_per_gpu" in m:
        parts.append(f"{m['hardware_tflops_per_gpu']} TFLOP/s/GPU (with recompute)")
    return ", ".join(parts)


def _layout(r: dict) -> str:
    return f"{r['gpus']}× {r['gpu']} ({r['tp']}/{r['pp']}/{r['gpus'] // (r['tp'] * r['pp'])})"


def section(results: list[Result] | None = None) -> list[str]:
    """The "Training" section of docs/accuracy.md, as lines."""
    results = evaluate() if results is None else results
    out = ["## Training", "",
           "<!-- Generated by benchmarks/accuracy/training.py from benchmarks/accuracy/training.yaml. -->", "",
           " ".join(INTRO.split()), "",
           "| row | model | GPUs (tp/pp/dp) | batch / micro / seq | dtype, recompute | published | measured MFU "
           "| roofline MFU | roofline ratio | calibrated MFU | calibrated ratio |",
           "|---|---|---|---|---|---|---:|---:|---:|---:|---:|"]
    for x in results:
        r = x.row
        out.append(f"| {r['id']} | {r['model'] if not r.get('shape') else 'GPT (' + r['id'].split('-', 2)[-1] + ')'} "
                   f"| {_layout(r)} | {r['batch']} / {r['micro_batch']} / {r['seq']:,} | {r['compute_dtype']}, "
                   f"{r['recompute']} | {_published(r['measured'])} | {x.measured_mfu:.1%} "
                   f"| {x.predicted_mfu['roofline']:.1%} | {x.ratio('roofline'):.2f} "
                   f"| {x.predicted_mfu['calibrated']:.1%} | {x.ratio('calibrated'):.2f} |")
    ratios = {tm: sorted(x.ratio(tm) for x in results) for tm in TIME_MODELS}
    out += ["", f"{len(results)} rows. Median ratio: roofline {ratios['roofline'][len(results) // 2]:.2f}, calibrated "
            f"{ratios['calibrated'][len(results) // 2]:.2f}; rows with roofline ratio < 1: "
            f"{sum(v < 1 for v in ratios['roofline'])}.", "",
            "Why: the roofline is a bound at 80% of the datasheet peak; the fp8 rows reach 33–43% of the fp8 peak "
            "(their attention, norms and casts run in bf16 or slower, and fp8 GEMMs reach a smaller share of their "
            "peak), hence ratios near 2. Megatron-LM 2021 reaches 44–52% of the bf16 peak counting the recomputed "
            "forward, 33–39% without it. The calibrated profiles were fitted to inference: h100-sxm's fp8_efficiency "
            "0.474 comes from fp8 serving, and overlap 1 adds every op's memory time to its compute and leaves the "
            "data-parallel reduction unhidden, while NeMo overlaps its tensor-parallel communication with the GEMMs "
            "(tp-comm-overlap), which the model charges in full: the calibrated step is too long (ratio < 1) on the "
            "fp8 rows with tensor or pipeline parallelism. No factor is fitted per model.", "",
            "Assumed (not in the source): " + "; ".join(
                f"{a} ({', '.join(ids)})" for a, ids in _assumptions(results).items()) + ".", "",
            "Sources: " + "; ".join(sorted({_source(r.row['source']) for r in results})) + ".", ""]
    return out


def _assumptions(results: list[Result]) -> dict[str, list[str]]:
    """Each assumption with the rows that make it."""
    out: dict[str, list[str]] = {}
    for x in results:
        for a in x.row.get("assumed", []):
            out.setdefault(a, []).append(x.row["id"])
    return out


def _source(s: dict) -> str:
    if s.get("paper"):
        return f"{s['paper']}, arXiv {s['arxiv']}, {s['table']} (transcribed; not checked against a stored copy)"
    return f"`{s['repo']}` `{s['path']}` at commit `{s['commit']}`, table {s['table']}"


def main() -> int:
    for line in section():
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
