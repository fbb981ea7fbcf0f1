"""Compare `llmcalc train` (llmcalc/costs/training.py) with the published training throughputs in training.yaml.

Run: python benchmarks/accuracy/training.py            (the section, as markdown)
The "Training" section of docs/accuracy.md is section() of this module; benchmarks/accuracy/evaluate.py appends it
to the page, so `python benchmarks/accuracy/evaluate.py --write docs/accuracy.md` regenerates both.

A row's measured step time: batch · seq / (tokens/s per GPU · gpus) where the source publishes tokens/s, else the
source's FLOPs per step / (its TFLOP/s per GPU · gpus), the FLOPs counted by llmcalc's `flops --train` under the
source's convention (`flops_convention`: the attention core dense or causal; with or without the recomputed
forward). MFU, measured and predicted, is the model FLOPs of that convention (no recomputation) / (step · gpus ·
the GPU's peak at the row's compute dtype). ratio = measured step / predicted step: ≥ 1 where the model predicts
less time than was measured, which the roofline (a lower bound) must.

A row maps onto a Workload field by field: tp, pp, cp, vpp, ep, first_stage_layers / last_stage_layers (uneven
pipeline stages), pp_layout (every model chunk's layers, Megatron's layout string), zero, lora {rank, targets,
qlora}, mtp, fusion; dp = gpus / (tp · pp · cp). A row with `skip` (a reason) is collected but not evaluated; a row llmcalc refuses (a UserError) is listed with the refusal. The split into a
"table" and a "held-out" subset is subset_of(): fixed by the rows' ids and sources, before any comparison.
"""

from __future__ import annotations

import functools
import hashlib
import sys
from pathlib import Path
from typing import NamedTuple

import yaml

from llmcalc.costs.flops import flops
from llmcalc.costs.training import training_step
from llmcalc.errors import UserError
from llmcalc.inputs.files import PRESETS, read_yaml
from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.kernels import DEFAULT_TRAINING_KERNEL, with_attention_kernel
from llmcalc.inputs.presets import spec_from_data
from llmcalc.inputs.time_models import load_time_model
from llmcalc.workload import Layout, Workload

DATA = Path(__file__).resolve().parent / "training.yaml"
TIME_MODELS = ("roofline", "calibrated")
TABLE_SHARE = 0.4
"""Share of each source's rows in the "table" subset (subset_of); the rest are held out."""


INTRO = """
`llmcalc train` (llmcalc/costs/training.py; docs/roofline.md, Training step time) against published training
throughputs. The measured step is the batch's tokens over the published tokens/s, or, where only FLOP/s are
published, the source's FLOPs per step (llmcalc's `flops --train` under the source's convention: Megatron-LM and
NeMo count the attention core dense, and Megatron-LM 2021 counts the recomputed forward) over the published FLOP/s.
MFU is the model FLOPs of that convention over step · GPUs · the peak at the compute dtype (fp8 rows: the fp8 peak,
1,979 TFLOP/s on an H100 SXM; bf16: 989 on an H100, 312 on an A100). ratio = measured step / predicted step; the
roofline is a lower bound on time and must give ratio ≥ 1. The calibrated time takes the attention kernel each
source ran (`attention_impl`, as `train --attention-impl`: cuDNN, Transformer Engine's, unless the row names
another; FlashAttention-2 for torchtitan and llm-foundry, each with its reason in the row's `assumed`).
"""
"""The section's opening paragraph (its line breaks are not kept)."""

SPLIT = """
Split, fixed before any comparison and never refitted: within each source (one publication: one document at one
release, or one paper's table), the rows, expressible or not, are ordered by sha256 of their id; the first
round(0.4 · n) of them (at least one, and at least one left out when n ≥ 2) form the "table" subset, the rest are
"held out" (subset_of() in benchmarks/accuracy/training.py, the rule of the inference split above with the source as
the stratum). Nothing is fitted to either subset here; the split is kept so that a later fit of the training time
uses the table rows only and is judged on the held-out ones. Statistics weight each source equally: a source's
median and 90th percentile of its rows' ratios, and over sources the median of the per-source medians and the
weighted median and 90th percentile with each row weighted 1 / (rows of its source).
"""


class Result(NamedTuple):
    row: dict
    measured_s: float
    measured_mfu: float
    predicted_s: dict[str, float]
    predicted_mfu: dict[str, float]
    peak: float

    def ratio(self, tm: str) -> float:
        return self.measured_s / self.predicted_s[tm]


class Refused(NamedTuple):
    """A collected row llmcalc does not express: the row's `skip` reason, or the UserError it raises."""
    row: dict
    reason: str


def load_rows(path: Path = DATA) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)["rows"]


def publication(row: dict) -> str:
    """The row's source as one publication: `source.publication`, else the paper, else the repository's file."""
    s = row["source"]
    if s.get("publication"):
        return s["publication"]
    if s.get("paper"):
        return f"{s['paper'].split(',')[0]}, {s['table']}"
    name = {"docs/source/performance/performance_summary.md": "NeMo 24.07 performance summary",
            "docs/source/performance/performance_long_sequence.md": "NeMo long-sequence performance"}
    return name.get(s["path"], f"{s['repo']} {s['path']}")


def row_hash(row_id: str) -> float:
    """A stable number in [0, 1) from the id (sha256)."""
    return int.from_bytes(hashlib.sha256(row_id.encode()).digest()[:8], "big") / 2**64


def subset_of(rows: list[dict]) -> dict[str, str]:
    """"table" or "held-out" per row id: within each publication the rows ordered by row_hash(id), the first
    round(TABLE_SHARE · n) (at least 1, and at most n − 1 when n ≥ 2) in "table"; a source of one row follows the
    plain hash rule (table when row_hash(id) < TABLE_SHARE). Deterministic; independent of any result."""
    groups: dict[str, list[str]] = {}
    for r in rows:
        groups.setdefault(publication(r), []).append(r["id"])
    out = {}
    for ids in groups.values():
        ids, n = sorted(ids, key=row_hash), len(ids)
        k = min(max(round(TABLE_SHARE * n), 1), n - 1) if n >= 2 else int(row_hash(ids[0]) < TABLE_SHARE)
        out |= {i: "table" if j < k else "held-out" for j, i in enumerate(ids)}
    return out


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return out


def spec_of(row: dict):
    """The row's model: its preset, with `shape` (a GPT-3-shaped model of another size) put in its fields, or with
    `override` (fields of another size of the preset's family, merged into the preset's)."""
    data = read_yaml(PRESETS / f"{row['model']}.yaml", "preset")
    shape = row.get("shape")
    if shape:
        data = {**data, "name": row["id"], "vocab_size": shape["vocab_size"], "d_model": shape["d_model"],
                "n_layers": shape["n_layers"], "max_seq_len": max(data["max_seq_len"], row["seq"]),
                "attention": {**data["attention"], "heads": shape["heads"], "kv_heads": shape["heads"],
                              "head_dim": shape["head_dim"]},
                "ffn": {**data["ffn"], "d_ff": shape["d_ff"]}}
    if row.get("override"):
        data = {**_merge(data, row["override"]), "name": row["id"]}
    return spec_from_data(data, row["id"])


def workload_of(row: dict, **update) -> Workload:
    tp, pp, cp = row["tp"], row["pp"], row.get("cp", 1)
    rest = {k: row[k] for k in ("sp", "tp_comm_overlap", "vpp", "first_stage_layers", "last_stage_layers",
                                "embedding_in_split", "loss_in_split", "pp_layout") if k in row}
    layout = Layout.of(row["gpus"], tp, pp, row["gpus"] // (tp * pp * cp), ep=row.get("ep", 1), cp=cp, **rest)
    extra = {k: row[k] for k in ("zero", "mtp", "fusion") if k in row}
    lora = row.get("lora")
    if lora:
        extra["lora_rank"] = lora["rank"]
        if lora.get("targets"):
            extra["lora_targets"] = tuple(lora["targets"])
        if lora.get("qlora"):
            from llmcalc.model.formats import WeightFormats
            from llmcalc.model.lora import QLORA_FORMATS
            extra["weights_format"] = WeightFormats.parse(QLORA_FORMATS)
    return Workload(batch=row["batch"], seq=row["seq"], train=True, micro_batch=row["micro_batch"],
                    compute_dtype=row["compute_dtype"], recompute=row["recompute"], logits="all",
                    attention_core=row["flops_convention"]["attention"], layout=layout,
                    **extra).model_copy(update=update)


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
    kernel = row.get("attention_impl", DEFAULT_TRAINING_KERNEL)
    reports = {tm: training_step(spec, gpu, w, with_attention_kernel(_time_model(tm, row["gpu"]), kernel, gpu),
                                 check_memory=False) for tm in TIME_MODELS}
    return Result(row, measured_s, model_flops / (measured_s * row["gpus"] * peak),
                  {tm: r.step_s for tm, r in reports.items()}, {tm: r.mfu for tm, r in reports.items()}, peak)


def evaluate_all(rows: list[dict] | None = None) -> tuple[list[Result], list[Refused]]:
    """Every expressible row's Result, and every other row with why it is not expressed."""
    done, refused = [], []
    for r in load_rows() if rows is None else rows:
        if r.get("skip"):
            refused.append(Refused(r, r["skip"]))
            continue
        try:
            done.append(evaluate_row(r))
        except UserError as e:
            refused.append(Refused(r, f"refused by llmcalc: {e}"))
    return done, refused


def evaluate(rows: list[dict] | None = None) -> list[Result]:
    return evaluate_all(rows)[0]


def quantile(values: list[float], q: float, weights: list[float] | None = None) -> float:
    """The q-quantile of values (weighted: the first value, in order, whose cumulative weight reaches q of the
    total; unweighted: the same with equal weights)."""
    pairs = sorted(zip(values, weights or [1.0] * len(values)))
    total, acc = sum(w for _, w in pairs), 0.0
    for v, w in pairs:
        acc += w
        if acc >= q * total - 1e-12:
            return v
    return pairs[-1][0]


def stats(results: list[Result], tm: str) -> dict:
    """Per-source medians and 90th percentiles of the ratio, and over sources: the median of the per-source medians,
    and the median and 90th percentile with each row weighted 1 / (rows of its source)."""
    by: dict[str, list[float]] = {}
    for x in results:
        by.setdefault(publication(x.row), []).append(x.ratio(tm))
    per = {k: (len(v), quantile(v, 0.5), quantile(v, 0.9)) for k, v in by.items()}
    vals = [x.ratio(tm) for x in results]
    wts = [1 / len(by[publication(x.row)]) for x in results]
    return {"per_source": per, "rows": len(vals), "sources": len(by),
            "median_of_medians": quantile([m for _, m, _ in per.values()], 0.5) if per else float("nan"),
            "median": quantile(vals, 0.5, wts) if vals else float("nan"),
            "p90": quantile(vals, 0.9, wts) if vals else float("nan"),
            "below_1": sum(v < 1 for v in vals)}


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
    cp = r.get("cp", 1)
    out = f"{r['gpus']}× {r['gpu']} ({r['tp']}/{r['pp']}/{r['gpus'] // (r['tp'] * r['pp'] * cp)})"
    extra = [f"cp {cp}" if cp > 1 else "", f"vpp {r['vpp']}" if r.get("vpp", 1) > 1 else "",
             f"ep {r['ep']}" if r.get("ep", 1) > 1 else "", f"zero {r['zero']}" if r.get("zero") else "",
             f"stages {r['first_stage_layers']}…{r['last_stage_layers']}" if "first_stage_layers" in r else "",
             f"LoRA r{r['lora']['rank']}" if r.get("lora") else ""]
    extra = [e for e in extra if e]
    return out + (", " + ", ".join(extra) if extra else "")


def _model(r: dict) -> str:
    if r.get("shape"):
        return "GPT (" + r["id"].split("-", 2)[-1] + ")"
    if r.get("override"):
        return f"{r['model']} → {r['id'].split('-', 2)[-1]}"
    return r["model"]


def _stat_rows(label: str, st: dict) -> list[str]:
    return [f"| {label} | {st['roofline']['rows']} | {st['roofline']['sources']} "
            f"| {st['roofline']['median_of_medians']:.2f} | {st['roofline']['median']:.2f} | {st['roofline']['p90']:.2f} "
            f"| {st['calibrated']['median_of_medians']:.2f} | {st['calibrated']['median']:.2f} "
            f"| {st['calibrated']['p90']:.2f} |"]


def section(results: list[Result] | None = None, refused: list[Refused] | None = None) -> list[str]:
    """The "Training" section of docs/accuracy.md, as lines."""
    rows = load_rows()
    if results is None:
        results, refused = evaluate_all(rows)
    refused = refused or []
    split = subset_of(rows)
    out = ["## Training", "",
           "<!-- Generated by benchmarks/accuracy/training.py from benchmarks/accuracy/training.yaml. -->", "",
           " ".join(INTRO.split()), "", " ".join(SPLIT.split()), ""]
    n_all = len(results) + len(refused)
    out += [f"{n_all} rows from {len({publication(r) for r in rows})} sources; {len(results)} expressed "
            f"({len(results) / n_all:.0%}), {len(refused)} not (listed below).", "",
            "| subset | rows | sources | roofline: median of source medians | roofline: weighted median "
            "| roofline: weighted p90 | calibrated: median of source medians | calibrated: weighted median "
            "| calibrated: weighted p90 |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, keep in (("all", None), ("table", "table"), ("held-out", "held-out")):
        sub = [x for x in results if keep is None or split[x.row["id"]] == keep]
        out += _stat_rows(label, {tm: stats(sub, tm) for tm in TIME_MODELS})
    out += ["", "Per source (all rows; median and p90 of the ratio):", "",
            "| source | rows (table / held-out) | roofline median | roofline p90 | calibrated median | calibrated p90 |",
            "|---|---:|---:|---:|---:|---:|"]
    st = {tm: stats(results, tm) for tm in TIME_MODELS}
    for src in sorted(st["roofline"]["per_source"]):
        n, rm, rp = st["roofline"]["per_source"][src]
        _, cm, cq = st["calibrated"]["per_source"][src]
        t = sum(1 for x in results if publication(x.row) == src and split[x.row["id"]] == "table")
        out.append(f"| {src} | {n} ({t} / {n - t}) | {rm:.2f} | {rp:.2f} | {cm:.2f} | {cq:.2f} |")
    out += ["", "| row | subset | model | GPUs (tp/pp/dp, …) | batch / micro / seq | dtype, recompute | published "
            "| measured MFU | roofline MFU | roofline ratio | calibrated MFU | calibrated ratio |",
            "|---|---|---|---|---|---|---|---:|---:|---:|---:|---:|"]
    for x in results:
        r = x.row
        out.append(f"| {r['id']} | {split[r['id']]} | {_model(r)} | {_layout(r)} "
                   f"| {r['batch']} / {r['micro_batch']} / {r['seq']:,} | {r['compute_dtype']}, "
                   f"{r['recompute']} | {_published(r['measured'])} | {x.measured_mfu:.1%} "
                   f"| {x.predicted_mfu['roofline']:.1%} | {x.ratio('roofline'):.2f} "
                   f"| {x.predicted_mfu['calibrated']:.1%} | {x.ratio('calibrated'):.2f} |")
    below = [x for x in results if x.ratio("roofline") < 1]
    out += ["", f"Rows with roofline ratio < 1 (the bound broken): {len(below)}"
            + (": " + ", ".join(f"{x.row['id']} ({x.ratio('roofline'):.2f})" for x in below) if below else "") + ".",
            "", " ".join(WHY.split()), ""]
    if refused:
        out += ["Not expressed:", ""]
        for x in refused:
            out.append(f"- {x.row['id']} ({publication(x.row)}): {x.reason}")
        out.append("")
    out += ["Assumed (not in the source): " + "; ".join(
                f"{a} ({_count_by_source(ids)})" for a, ids in _assumptions(rows).items()) + ".", "",
            "Not collected (the model has no llmcalc preset, nor a shape read from a stored config): "
            + "; ".join(NOT_COLLECTED) + ".", "",
            "Sources: " + "; ".join(sorted({_source(r['source']) for r in rows})) + ".", ""]
    return out


WHY = """
Why: the roofline is a bound at 80% of the datasheet peak, so a ratio near 1.25 is a run at the datasheet peak and
larger ratios are time the bound does not see. Two thirds of the dense fp8 rows reach 30–50% of the fp8 peak on
H100s and Blackwell GPUs (median 38%; their attention, norms and casts run in bf16 or slower, and fp8 GEMMs reach a
smaller share of their peak), hence roofline ratios near 1.7; the rest, below 30%, are small models on many GPUs and
long sequences. The largest ratios are MoE rows (DeepSeek-V3, Qwen3, gpt-oss: median roofline ratio 3.1, up to 8.4
for Qwen3-30B-A3B at micro-batch 1 on B200s), whose all-to-all dispatch, routing and permutation kernels and small
per-expert GEMMs run far below the matmul rate the roofline charges, and torchtitan's long sequences with context
parallelism (Llama 3.1 8B at 32k–256k tokens: 2.7–4.2). Megatron-LM 2021 reaches 44–52% of the bf16 peak counting
the recomputed forward, 33–39% without it. The interleaved pipelines' sends run beside the next chunk's compute, as
Megatron's overlap_p2p_comm runs them (charged unhidden, they had broken the bound on nemo2407-llama2-70b, vpp 20,
and the H100 rows of Llama 3.1 405B, vpp 8: ratios 0.89–0.99, now 1.47–1.57). The roofline runs the tensor-parallel
all-reduces and the expert all-to-alls beside the layers' compute, the best schedule (Megatron's overlap options do
so); the bound still breaks on two H100 rows of Qwen3-235B with expert parallelism over 32 GPUs across nodes
(0.97–1.00), whose all-to-alls, every token's eight expert copies over the network as the model counts them, outlast
the compute beside them. The calibrated profiles were fitted to inference: h100-sxm's fp8_efficiency 0.402 comes
from fp8 serving, and every dense fp8 H100 row is pessimistic (ratios 0.62–0.92: NeMo 24.07's 0.62–0.92,
Megatron-Bridge's 0.78–0.86 with the tp_comm_overlap its Llama 3 recipes turn on, which lifted its 70B and 405B rows
from 0.65–0.72), where the dense Blackwell rows sit at 0.68–1.16 (median 0.89). No factor is fitted per model.
"""

NOT_COLLECTED = [
    "NeMo 24.07 Nemotron-8B, Nemotron-22B and Nemotron-340B (squared-ReLU MLP, 256k vocabulary; no preset)",
    "Llama 3 405B pre-training (Dubey et al. 2024, Table 4: its batch and micro-batch per stage are given as tokens "
    "and the paper's text was not read from a stored copy here)",
    "PaLM (TPU v4: no TPU preset)",
    "Korthikanti et al. 2022 (MFU/HFU of 22B–1T with selective recomputation: the stored copies seen here give MFU "
    "and HFU but not the batch sizes)",
    "Megatron-Bridge's rows of models without a preset (Kimi K2, Nemotron 3 Nano, Super and Ultra, DeepSeek-V4 "
    "Flash), and its releases after 26.02 (26.04 onwards), not collected here",
]


def _count_by_source(ids: list[str]) -> str:
    rows = {r["id"]: r for r in load_rows()}
    by: dict[str, int] = {}
    for i in ids:
        by[publication(rows[i])] = by.get(publication(rows[i]), 0) + 1
    if len(ids) <= 4:
        return ", ".join(ids)
    return f"{len(ids)} rows: " + ", ".join(f"{k} {v}" for k, v in by.items())


def _assumptions(rows: list[dict]) -> dict[str, list[str]]:
    """Each assumption with the rows that make it."""
    out: dict[str, list[str]] = {}
    for r in rows:
        for a in r.get("assumed", []):
            out.setdefault(a, []).append(r["id"])
    return out


def _source(s: dict) -> str:
    if s.get("paper"):
        return f"{s['paper']}, arXiv {s['arxiv']}, {s['table']} (transcribed; not checked against a stored copy)"
    return f"`{s['repo']}` `{s['path']}` at commit `{s['commit']}`"


def main() -> int:
    for line in section():
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
