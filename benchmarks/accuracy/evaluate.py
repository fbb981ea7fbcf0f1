"""Compare llmcalc's latency estimate with the published GPU timings in published.yaml.

Run: python benchmarks/accuracy/evaluate.py [--format table|csv|json] [--subset all|table|heldout] [--split]
     python benchmarks/accuracy/evaluate.py --markdown | --write docs/accuracy.md     (the accuracy page; its last
     section, Training, is benchmarks/accuracy/training.py's on training.yaml)
Import (the folder is no package: importlib.util.spec_from_file_location, or sys.path): load_points() -> the YAML's
points; usable_pairs(points) -> list[Pair]; predict(pair, time_model=None) -> predicted seconds of the pair's quantity;
evaluate(pairs, time_model=None) -> (rows, refusals); summary(rows) -> dict; split(point_id) -> "table" | "heldout";
evaluate_models(pairs, {name: time_model}) -> {name: rows}; markdown({name: rows}, points) -> the page (one column
group per time model, in order); page(points, {name: time_model}) -> both at once (default TIME_MODELS).
A time_model is any callable (spec, gpu, workload) -> object with ttft_s, decode_s, total_s (default: llmcalc's
roofline latency() at its default time model); the functions are pure and keep no state between calls.

Every comparison is a time: `ratio` = measured time / predicted time, so ratio ≥ 1 means the model is optimistic
(it predicts less time, or more throughput, than was measured). A roofline is a lower bound on time and should give
ratio ≥ 1; a ratio < 1 points at a mapping mistake or a wrong input before it points at the model.

Which points are used (a point is one published figure or table row; see the YAML's `about`)
-------------------------------------------------------------------------------------------------
Skipped, counted by reason: a model or GPU that is not an llmcalc preset (a Hugging Face id, H20, RTX 3090 Ti);
fp4 weights (not modelled); speculative decoding (MTP) on; continuous batching driven by a request rate (the running
batch varies with arrivals and is not published); continuous batching with an unbounded offline queue (the running
batch is chosen by engine heuristics and not published); a point llmcalc refuses (weights do not fit, the layout does
not divide the model).

Inputs of a point -> llmcalc Workload
-------------------------------------
- model, gpu: the preset names in the point. An `a100-80gb` whose `hardware` says PCIe (mlc-ai/llm-perf-bench) gets
  the PCIe card's figures from the a100-80gb preset's own notes: 1,935 GB/s and a PCIe 4.0 x16 link (64 GB/s, as the
  a10g preset), same compute.
- seq = input_tokens, gen = output_tokens, batch = `batch` (static) or `concurrency` (continuous, see below).
- layout: tp, pp, ep as published, dp = 1. Exception: a point whose notes say `enable_attention_dp true` (TensorRT-LLM
  attention data parallelism, DeepSeek-R1) runs attention data-parallel over all its GPUs: tp = 1, dp = gpus, ep as
  published (experts spread over the same GPUs), which is how llmcalc expresses that layout.
- dtypes: the first word of the published field (fp8, fp16, bf16, int4, int8); "bf16 (vLLM dtype auto)" -> bf16.
  weight-only int4/int8 (AWQ, GPTQ, MLC q4f16_1): weights int4/int8, compute bf16, or fp16 where the point says fp16;
  the int4 group size is the one named in the field ("group 32" for MLC q4f16_1), else 128. fp8 checkpoints: weights
  fp8 and compute fp8. compute_dtype missing or "bf16/fp16 (not stated)": fp8 weights -> fp8, int weights -> bf16,
  otherwise the weights' dtype (bf16 and fp16 share a peak on every GPU here). A KV dtype that is "not stated" is
  taken as bf16, the serving engines' default for these checkpoints; the row records this in `assumptions`.
  The workload sets no attention dtype: the attention core runs at llmcalc's default for the compute dtype.

Metrics -> predicted quantities (static batching: one fixed batch, prefilled and decoded together)
-------------------------------------------------------------------------------------------------
Each point gives at most three rows, one per quantity:
- ttft: `ttft_*` (ms or s; mean/median) <-> latency's ttft_s at the point's batch (the prefill of one static batch).
- step: `tpot_*` / `itl_*` (mean, median, p50) <-> the mean decode step, decode_s / (gen - 1). A published mean
  (or median) per-token time over a whole generation is matched by the mean step, not by tpot_s (the first step, at
  context seq), which would be the shortest one.
- run: the whole batch from prompt to last token <-> total_s = ttft_s + decode_s. Its measured time is read from, in
  order of preference, the first the point publishes:
    e2e_latency_* (mean, then median)                   measured time = the latency
    output_tokens_per_s per total                       measured time = batch * gen / value
    output_tokens_per_s per GPU (`per: gpu`, _per_gpu)  measured time = batch * gen / (value * gpus)
    output_tokens_per_s per user (`per: user`, _per_user) measured time = gen / value
    total_tokens_per_s (total; per user at batch 1)     measured time = batch * (input + gen) / value
    requests_per_s                                      measured time = batch / value
  The others are restatements of the same run (e.g. LLM-Inference-Bench's throughput = batch*(in+out)/latency, a
  per-GPU figure = total / GPUs) and are dropped as redundant rather than counted twice. The `definition` fields in
  published.yaml agree with these rules (Qwen: output_len / wall time of one generate(); LLM-Inference-Bench:
  batch*(input+output)/latency; SGLang on H20: (prompt + generated) / time). A throughput compared this way is a
  time ratio: measured_time / total_s = predicted throughput / measured throughput.
Dropped metric statistics: p99, min, max (tails and extremes; the model predicts a typical run).
A published figure is converted to seconds for `measured_s`; `measured` keeps the raw value in its published unit.

Continuous batching (approximation, rows tagged approx = true)
--------------------------------------------------------------
Only points with a fixed integer `concurrency` C are used (LMDeploy concurrency 64, TensorRT-LLM DeepSeek-R1 at 1024
in flight). Steady state is approximated by a static batch of C requests that all start together: ttft <-> ttft_s
at batch C (all C prompts prefilled together, as at the start of a wave; queueing behind other waves is ignored),
step <-> mean decode step at batch C, run <-> total_s at batch C, and a total output throughput <-> C * gen / total_s.
Real in-flight batching overlaps prefills of new requests with decodes of old ones, so these rows are less exact.

Regimes: see regime(); split of points into a "table" subset (~40 %) and a "held-out" subset: see assign_splits().
"""

from __future__ import annotations

import argparse
import csv
import functools
import hashlib
import inspect
import io
import json
import re
import sys
import textwrap
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Callable, NamedTuple

import yaml

from llmcalc.costs.latency import latency
from llmcalc.errors import UserError
from llmcalc.inputs.gpus import gpu_names, load_gpu
from llmcalc.inputs.presets import load_preset, preset_names
from llmcalc.inputs.time_models import calibrated_gpus, load_time_model
from llmcalc.model.gpu import GPU
from llmcalc.workload import Layout, Workload

PUBLISHED = Path(__file__).resolve().parent / "published.yaml"
TABLE_SHARE = 0.4
"""Share of points in the "table" subset; the rest are held out."""
LONG_PROMPT = 512
"""A prompt longer than this is a "long prompt" in regime()."""

TimeModel = Callable  # (spec, gpu, workload) -> an object with ttft_s, decode_s, total_s (latency's LatencyReport)


class Inputs(NamedTuple):
    """What llmcalc is asked for one point."""

    model: str
    gpu: str
    pcie: bool
    """An a100-80gb run as the PCIe card (see the module docstring)."""
    batch: int
    seq: int
    gen: int
    weights_dtype: str
    kv_dtype: str
    compute_dtype: str
    group_size: int
    tp: int
    pp: int
    dp: int
    ep: int
    eager: bool = False
    """Run without CUDA graphs (the point's `cuda_graphs: false`): every step at least the host's launches."""

    @property
    def moe(self) -> bool:
        return bool(load_preset(self.model).ffn.routed_experts)


class Pair(NamedTuple):
    """One published figure, as a measured time of one quantity, with the llmcalc inputs that predict it."""

    id: str
    metric: str
    """The published key, e.g. ttft_ms, output_tokens_per_s."""
    quantity: str
    """ttft | step | run (see the module docstring)."""
    measured: float
    """The published value, in its published unit."""
    unit: str
    measured_s: float
    """The measured time of `quantity` in seconds."""
    inputs: Inputs
    approx: bool
    """Continuous batching approximated by a static batch of its concurrency."""
    regime: str
    assumptions: tuple[str, ...] = ()


class Row(NamedTuple):
    pair: Pair
    predicted_s: float
    ratio: float
    """measured_s / predicted_s: ≥ 1 when the model is optimistic."""
    fits: bool


class Skip(NamedTuple):
    id: str
    reason: str
    metric: str = ""
    """Empty when the whole point is skipped; else the one metric dropped."""


def load_points(path: Path = PUBLISHED) -> list[dict]:
    with open(path) as f:
        return yaml.safe_load(f)["points"]


# --------------------------------------------------------------------------------------------- point -> inputs

def _word(text) -> str:
    """The first word of a free-text dtype field, lower case: 'int4 (AWQ, ...)' -> 'int4'."""
    return re.split(r"[\s(/,]", str(text).strip().lower(), maxsplit=1)[0] if text is not None else ""


def _dtypes(p: dict) -> tuple[str, str, str, int, list[str]]:
    """(weights, kv, compute, group_size, assumptions) by the module docstring's dtype rules."""
    notes = []
    weights = _word(p["weights_dtype"])
    group = re.search(r"group(?: size)? (\d+)", str(p["weights_dtype"]))
    group_size = int(group.group(1)) if group else 128
    kv = _word(p["kv_dtype"])
    if kv not in ("fp8", "fp16", "bf16", "int8", "int4"):
        notes.append(f"kv dtype {p['kv_dtype']!r} taken as bf16")
        kv = "bf16"
    compute = _word(p.get("compute_dtype"))
    if compute not in ("fp8", "fp16", "bf16") or "not stated" in str(p.get("compute_dtype")):
        compute = {"fp8": "fp8", "int4": "bf16", "int8": "bf16"}.get(weights, weights)
    if weights in ("int4", "int8") and compute not in ("bf16", "fp16"):
        compute = "bf16"
    return weights, kv, compute, group_size, notes


def point_inputs(p: dict, batch: int) -> tuple[Inputs, list[str]]:
    """The llmcalc inputs of a usable point at `batch` sequences, and the assumptions made."""
    weights, kv, compute, group_size, notes = _dtypes(p)
    gpus, tp, ep = p["gpus"], p["tp"], p.get("ep", 1)
    dp = 1
    if "enable_attention_dp true" in str(p.get("notes", "")):
        tp, dp = 1, gpus
        notes.append(f"attention data-parallel: tp 1, dp {gpus}, ep {ep}")
    pcie = p["gpu"] == "a100-80gb" and "pcie" in str(p.get("hardware", "")).lower() \
        and "sxm vs pcie not stated" not in str(p.get("hardware", "")).lower()
    if pcie:
        notes.append("A100 80GB PCIe: 1,935 GB/s, PCIe 4.0 x16 link")
    return Inputs(model=p["model"], gpu=p["gpu"], pcie=pcie, batch=batch, seq=p["input_tokens"],
                  gen=p["output_tokens"], weights_dtype=weights, kv_dtype=kv, compute_dtype=compute,
                  group_size=group_size, tp=tp, pp=p.get("pp", 1), dp=dp, ep=ep,
                  eager=p.get("cuda_graphs") is False), notes


def point_skip(p: dict) -> str | None:
    """Why a whole point cannot be expressed, or None when it can."""
    if p["model"] not in preset_names():
        return "model not a preset"
    if p["gpu"] not in gpu_names():
        return "GPU not a preset"
    if _word(p["weights_dtype"]) == "fp4":
        return "fp4 weights (not modelled)"
    if "mtp" in p["id"].split("-") or "SPECULATIVE DECODING ON" in str(p.get("notes", "")):
        return "speculative decoding on"
    if p["batching"] == "continuous":
        if p.get("request_rate") is not None:
            return "continuous, request-rate driven (running batch varies, not published)"
        if not isinstance(p.get("concurrency"), int):
            return "continuous, unbounded offline queue (running batch set by engine heuristics, not published)"
    return None


# --------------------------------------------------------------------------------------------- metrics

_LATENCY = re.compile(r"^(ttft|tpot|itl|e2e_latency)_(ms|s)(?:_(mean|median|p50|p99|min|max))?$")
_THROUGHPUT = re.compile(r"^(output_tokens|total_tokens|requests)_per_s(?:_per_(gpu|user))?$")
_META = {"per", "stat", "label", "definition"}
_QUANTITY = {"ttft": "ttft", "tpot": "step", "itl": "step", "e2e_latency": "run"}
_STAT_RANK = {"mean": 0, "median": 1, "p50": 1}


def _per(measured: dict, suffix: str | None) -> str:
    """gpu | user | total: the key's suffix, else the first word of `per` (default total)."""
    return suffix or {"gpu": "gpu", "user": "user"}.get(_word(measured.get("per")), "total")


def measured_time(key: str, value: float, measured: dict, p: dict, batch: int) -> tuple[str, str, float, int] | str:
    """(quantity, unit, seconds, preference) of one published metric, or the reason it is dropped. A lower
    preference wins among the metrics of one quantity."""
    m = _LATENCY.match(key)
    if m:
        kind, unit, stat = m.groups()
        stat = stat or _word(measured.get("stat")) or "mean"
        if stat not in _STAT_RANK:
            return f"{stat} statistic (tail/extreme)"
        seconds = value / 1000 if unit == "ms" else value
        return _QUANTITY[kind], unit, seconds, _STAT_RANK[stat]
    m = _THROUGHPUT.match(key)
    if not m:
        return "unknown metric"
    kind, suffix = m.groups()
    per, gen, gpus = _per(measured, suffix), p["output_tokens"], p["gpus"]
    if kind == "requests":
        return "run", "req/s", batch / value, 20
    tokens = gen if kind == "output_tokens" else p["input_tokens"] + gen
    if per == "user":
        seconds = tokens / value
    elif per == "gpu":
        seconds = batch * tokens / (value * gpus)
    else:
        seconds = batch * tokens / value
    rank = {"total": 10, "gpu": 11, "user": 12}[per] + (0 if kind == "output_tokens" else 5)
    return "run", f"tok/s per {per}", seconds, rank


def point_pairs(p: dict) -> tuple[list[Pair], list[Skip]]:
    """The pairs of one point, one per quantity, and the skips (whole point or single metrics)."""
    reason = point_skip(p)
    if reason:
        return [], [Skip(p["id"], reason)]
    approx = p["batching"] == "continuous"
    batch = p["concurrency"] if approx else p["batch"]
    inputs, notes = point_inputs(p, batch)
    measured = p["measured"]
    found: dict[str, list[tuple]] = {}
    skips = []
    for key, value in measured.items():
        if key in _META:
            continue
        got = measured_time(key, value, measured, p, batch)
        if isinstance(got, str):
            skips.append(Skip(p["id"], got, key))
        elif got[0] == "step" and inputs.gen < 2:
            skips.append(Skip(p["id"], "decode step with gen < 2", key))
        else:
            quantity, unit, seconds, rank = got
            found.setdefault(quantity, []).append((rank, key, value, unit, seconds))
    best = {}
    for quantity, candidates in found.items():
        best[quantity], *rest = sorted(candidates)
        skips += [Skip(p["id"], f"redundant: restates {best[quantity][1]}", c[1]) for c in rest]
    pairs = []
    for quantity in ("ttft", "step", "run"):
        if quantity in best:
            _, key, value, unit, seconds = best[quantity]
            pair = Pair(id=p["id"], metric=key, quantity=quantity, measured=value, unit=unit, measured_s=seconds,
                        inputs=inputs, approx=approx, regime="", assumptions=tuple(notes))
            pairs.append(pair._replace(regime=regime(pair)))
    if not pairs:
        skips.append(Skip(p["id"], "no usable metric"))
    return pairs, skips


def triage(points: list[dict]) -> tuple[list[Pair], list[Skip]]:
    """All pairs of `points`, and every skip."""
    pairs, skips = [], []
    for p in points:
        got, why = point_pairs(p)
        pairs += got
        skips += why
    return pairs, skips


def usable_pairs(points: list[dict]) -> list[Pair]:
    """The (metric, measured) pairs of every usable point (see the module docstring for the rules)."""
    return triage(points)[0]


# --------------------------------------------------------------------------------------------- regimes

def regime(pair: Pair) -> str:
    """The regime of a pair, from the first rule that matches:
    continuous approx -> "continuous fixed concurrency (approx)";
    ttft -> "ttft short prompt (≤512) batch 1" | "ttft long prompt (>512) batch 1" | "ttft batch >1";
    MoE model -> "moe decode/throughput";
    batch 1 -> "decode batch 1 weight-only int4/int8" | "decode batch 1 TP1" | "decode batch 1 TP>1";
    batch > 1 -> "throughput prefill-heavy (input ≥ 8×output)" | "throughput fp8" |
                 "throughput small batch (≤16) fp16/bf16" | "throughput large batch fp16/bf16"."""
    x = pair.inputs
    if pair.approx:
        return "continuous fixed concurrency (approx)"
    if pair.quantity == "ttft":
        if x.batch > 1:
            return "ttft batch >1"
        return f"ttft {'short' if x.seq <= LONG_PROMPT else 'long'} prompt ({'≤' if x.seq <= LONG_PROMPT else '>'}" \
               f"{LONG_PROMPT}) batch 1"
    if x.moe:
        return "moe decode/throughput"
    if x.batch == 1:
        if x.weights_dtype in ("int4", "int8"):
            return "decode batch 1 weight-only int4/int8"
        return "decode batch 1 TP1" if x.tp * x.dp == 1 else "decode batch 1 TP>1"
    if x.seq >= 8 * x.gen:
        return "throughput prefill-heavy (input ≥ 8×output)"
    if x.compute_dtype == "fp8":
        return "throughput fp8"
    return "throughput small batch (≤16) fp16/bf16" if x.batch <= 16 else "throughput large batch fp16/bf16"


# --------------------------------------------------------------------------------------------- prediction

A100_PCIE = {"memory_bandwidth_gbs": 1935, "interconnect": "PCIe 4.0 x16", "interconnect_gbs": 64}
"""What an a100-80gb run as the PCIe card changes (the a100-80gb preset's notes; the link as the a10g preset's)."""


def gpu_of(x: Inputs) -> GPU:
    """The GPU preset, or its PCIe variant (see the module docstring)."""
    gpu = load_gpu(x.gpu)
    if x.pcie:
        gpu = gpu.model_copy(update={"name": f"{gpu.name}-pcie", **A100_PCIE})
    return gpu


def workload_of(x: Inputs) -> Workload:
    act = "fp16" if x.compute_dtype == "fp16" else "bf16"
    return Workload(batch=x.batch, seq=x.seq, gen=x.gen, weights_dtype=x.weights_dtype, kv_dtype=x.kv_dtype,
                    compute_dtype=x.compute_dtype, act_dtype=act,
                    **({"group_size": x.group_size} if x.weights_dtype == "int4" else {}),
                    layout=Layout(tp=x.tp, pp=x.pp, dp=x.dp, ep=x.ep), enforce_eager=x.eager)


def run_model(x: Inputs, time_model: TimeModel | None = None):
    """The time model's report for these inputs (default: llmcalc's roofline `latency`)."""
    return (time_model or latency)(load_preset(x.model), gpu_of(x), workload_of(x))


def quantity_time(report, pair: Pair) -> float:
    """The predicted seconds of the pair's quantity: ttft_s; decode_s / (gen − 1); total_s."""
    if pair.quantity == "ttft":
        return report.ttft_s
    if pair.quantity == "step":
        return report.decode_s / (pair.inputs.gen - 1)
    return report.total_s


def predict(pair: Pair, time_model: TimeModel | None = None) -> float:
    """Predicted seconds of the pair's quantity. `time_model(spec, gpu, workload)` returns an object with
    ttft_s, decode_s and total_s; None is llmcalc's roofline latency(). Raises UserError where llmcalc refuses."""
    return quantity_time(run_model(pair.inputs, time_model), pair)


def evaluate(pairs: list[Pair], time_model: TimeModel | None = None) -> tuple[list[Row], list[Skip]]:
    """A row per pair the time model accepts; a skip (reason "llmcalc refused: ...") per pair it refuses. Each
    distinct Inputs is run once."""
    reports: dict[Inputs, object] = {}
    rows, skips = [], []
    for pair in pairs:
        if pair.inputs not in reports:
            try:
                reports[pair.inputs] = run_model(pair.inputs, time_model)
            except UserError as e:
                reports[pair.inputs] = e
        rep = reports[pair.inputs]
        if isinstance(rep, UserError):
            skips.append(Skip(pair.id, f"llmcalc refused: {str(rep).split(';')[0]}", pair.metric))
            continue
        predicted = quantity_time(rep, pair)
        rows.append(Row(pair, predicted, pair.measured_s / predicted, bool(getattr(rep, "fits", True))))
    return rows, skips


# --------------------------------------------------------------------------------------------- statistics

def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), linear between order statistics (numpy's default)."""
    v = sorted(values)
    k = (len(v) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def stats(ratios: list[float]) -> dict:
    """count, median ratio, 90th percentile of the error factor max(r, 1/r), share of ratios ≥ 1, min, max."""
    if not ratios:
        return {"count": 0}
    return {"count": len(ratios), "median_ratio": percentile(ratios, 50),
            "p90_error_factor": percentile([max(r, 1 / r) for r in ratios], 90),
            "share_ratio_ge_1": sum(r >= 1 for r in ratios) / len(ratios),
            "min_ratio": min(ratios), "max_ratio": max(ratios)}


def summary(rows: list[Row]) -> dict:
    """Statistics overall, over the exact (non-approx) rows, and by regime."""
    by: dict[str, list[float]] = {}
    for r in rows:
        by.setdefault(r.pair.regime, []).append(r.ratio)
    return {"overall": stats([r.ratio for r in rows]),
            "exact": stats([r.ratio for r in rows if not r.pair.approx]),
            "by_regime": {k: stats(v) for k, v in sorted(by.items())}}


# --------------------------------------------------------------------------------------------- split

def point_hash(point_id: str) -> float:
    """A stable number in [0, 1) from the id (sha256)."""
    return int.from_bytes(hashlib.sha256(point_id.encode()).digest()[:8], "big") / 2**64


def assign_splits(points: list[dict]) -> dict[str, str]:
    """"table" or "heldout" per point id. Points are grouped in strata (the regime of the point's last pair: its
    whole run where it has one; unusable points form one stratum); within a stratum of n points, ordered by
    point_hash(id), the first round(TABLE_SHARE · n) go to "table" (at least one, and at least one left held out,
    when n ≥ 2), so every stratum is in both subsets at ~40 / 60. A stratum of one point follows the plain hash rule
    (table when point_hash(id) < TABLE_SHARE). Deterministic; a new point moves at most one other point, of its own
    stratum."""
    strata: dict[str, list[str]] = {}
    for p in points:
        pairs = point_pairs(p)[0]
        strata.setdefault(pairs[-1].regime if pairs else "(unusable)", []).append(p["id"])
    out = {}
    for ids in strata.values():
        ids = sorted(ids, key=point_hash)
        n = len(ids)
        k = min(max(round(TABLE_SHARE * n), 1), n - 1) if n >= 2 else int(point_hash(ids[0]) < TABLE_SHARE)
        out |= {i: "table" if j < k else "heldout" for j, i in enumerate(ids)}
    return out


def split(point_id: str, points: list[dict] | None = None) -> str:
    """"table" or "heldout" for one point (assign_splits over `points`, default published.yaml); an id not among
    them falls back to the plain hash rule."""
    got = assign_splits(load_points() if points is None else points).get(point_id)
    return got or ("table" if point_hash(point_id) < TABLE_SHARE else "heldout")


# --------------------------------------------------------------------------------------------- output

COLUMNS = ["id", "model", "gpu", "tp", "dtype", "batch", "input", "output", "metric", "measured", "unit",
           "measured_s", "predicted_s", "ratio", "regime", "approx", "fits", "split", "assumptions"]


def flat(row: Row, splits: dict[str, str]) -> dict:
    p, x = row.pair, row.pair.inputs
    layout = f"{x.tp}" + (f" dp{x.dp}" if x.dp > 1 else "") + (f" ep{x.ep}" if x.ep > 1 else "")
    return {"id": p.id, "model": x.model, "gpu": x.gpu + ("-pcie" if x.pcie else ""), "tp": layout,
            "dtype": f"{x.weights_dtype}/{x.kv_dtype}/{x.compute_dtype}", "batch": x.batch, "input": x.seq,
            "output": x.gen, "metric": p.metric, "measured": p.measured, "unit": p.unit, "measured_s": p.measured_s,
            "predicted_s": row.predicted_s, "ratio": row.ratio, "regime": p.regime, "approx": p.approx,
            "fits": row.fits, "split": splits.get(p.id, ""), "assumptions": "; ".join(p.assumptions)}


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def text_table(records: list[dict], columns: list[str]) -> str:
    cells = [[_fmt(r[c]) for c in columns] for r in records]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
    return "\n".join([line(columns), line(["─" * w for w in widths])] + [line(r) for r in cells])


def summary_records(s: dict) -> list[dict]:
    out = []
    for name, st in [("overall", s["overall"]), ("exact (non-approx)", s["exact"])] + list(s["by_regime"].items()):
        out.append({"group": name, "count": st["count"],
                    **{k: st.get(k, float("nan")) for k in ("median_ratio", "p90_error_factor", "share_ratio_ge_1",
                                                             "min_ratio", "max_ratio")}})
    return out


def skip_counts(skips: list[Skip]) -> dict:
    points = Counter(s.reason for s in skips if not s.metric)
    metrics = Counter(s.reason.split(":")[0] if s.reason.startswith("redundant") else s.reason
                      for s in skips if s.metric)
    return {"points": dict(points.most_common()), "metrics": dict(metrics.most_common())}


# --------------------------------------------------------------------------------------------- markdown page

PAGE = Path(__file__).resolve().parents[2] / "docs" / "accuracy.md"
REGENERATE = "python benchmarks/accuracy/evaluate.py --write docs/accuracy.md"
WIDTH = 120
"""Prose on the page is wrapped to this many columns."""

@functools.cache
def profile(gpu_name: str):
    """The bundled calibration profile of a GPU preset (an a100-80gb run as the PCIe card uses a100-80gb's)."""
    name = gpu_name if gpu_name in calibrated_gpus() else gpu_name.removesuffix("-pcie")
    return load_time_model("calibrated", load_gpu(name))


def calibrated(spec, gpu: GPU, w: Workload):
    """llmcalc's latency under the GPU's calibration profile (presets/calibration/)."""
    return latency(spec, gpu, w, profile(gpu.name))


TIME_MODELS: dict[str, TimeModel | None] = {"roofline": None, "calibrated": calibrated}
"""The page's time models by column name, one column group each; None is llmcalc's roofline latency() at its
defaults."""

ABOUT = {"roofline": "llmcalc's `latency` at its default shares of peak ({constants}) and no fixed cost per kernel, "
                     "collective or step: the physical lower bound on time at those shares of the datasheet peaks",
         "calibrated": "llmcalc's `latency --time-model calibrated`: the GPU's profile in presets/calibration/ "
                       "(partial overlap, fixed costs per kernel, collective and step; its efficiencies fitted to "
                       "this page's table subset by benchmarks/accuracy/fit_profiles.py, the held-out subset "
                       "unseen; the H200's measured on an H200 by `llmcalc calibrate`, docs/validation.md)"}
"""What each time model is, for the page; {constants} is filled from latency()'s default time model."""

QUANTITY_ORDER = {"ttft": 0, "step": 1, "run": 2}

# Regimes in page order, by the start of their name (regime()), each with why a time model without fixed costs
# misses there. The why is mechanism only: every number next to it on the page is computed.
REGIMES = [
    ("ttft short", "A short prefill at batch 1 reads the weights once and does little arithmetic, so it lasts "
                   "milliseconds; kernel launches, per-layer synchronisation and the engine's scheduling and "
                   "sampling are fixed costs of the same order, and the roofline charges none of them."),
    ("ttft long", "A long prefill is compute-bound: the gap is what the matmul and attention kernels miss of the "
                  "assumed share of peak at these shapes, plus the fixed costs of a short prefill."),
    ("ttft batch", "A batched prefill is compute-bound, as a long one is."),
    ("decode batch 1 TP1", "A batch-1 decode step streams the weights once and engines come close to the bandwidth; "
                           "what is left is per-step fixed cost: launches, sampling, host scheduling."),
    ("decode batch 1 TP>1", "Splitting the weights over more GPUs shortens each GPU's memory time but not the two "
                            "all-reduces per layer, whose latency rather than their bytes dominates at batch 1; "
                            "the roofline charges their bytes only (see the table by GPU count)."),
    ("decode batch 1 weight", "Weight-only int4/int8 shrinks the bytes streamed per step but not the fixed costs, "
                              "and the kernels dequantise inside the matmul, reaching a smaller share of the "
                              "bandwidth than 16-bit ones."),
    ("throughput small", "A small batch is still memory-bound, so the fixed per-step costs weigh as at batch 1."),
    ("throughput large", "A large batch nears the compute roof; attention over a growing cache and the batch's "
                         "prefill run below the assumed share of peak."),
    ("throughput fp8", "The roofline applies the same share of peak to fp8 as to 16-bit matmuls; fp8 kernels, with "
                       "their scaling and the 16-bit work around them, reach less of the fp8 peak."),
    ("throughput prefill", "Input ≥ 8× output: the time is mostly a compute-bound prefill, where the assumed "
                           "share of peak is closest to what the kernels reach."),
    ("moe", "The roofline assumes uniform routing and balanced experts; real routing is skewed, grouped matmuls "
            "over a few tokens per expert reach less of peak, and expert or tensor parallelism adds collective "
            "latency."),
    ("continuous", "An approximation rather than a test of the model: in-flight batching overlaps new prefills "
                   "with running decodes and queues requests, which a static wave of C requests does not, so "
                   "ratios near or below 1 here are no evidence against the bound."),
]


def regime_rank(name: str) -> tuple[int, str]:
    """Page order of a regime (REGIMES), unknown ones last by name."""
    return next((i for i, (start, _) in enumerate(REGIMES) if name.startswith(start)), len(REGIMES)), name


def regime_why(name: str) -> str:
    return next((why for start, why in REGIMES if name.startswith(start)), "")


CALIBRATED_WHY = [
    ("decode batch 1 weight-only", "A profile has one memory efficiency per GPU, fitted on 16-bit streams; a "
     "weight-only int4/int8 kernel unpacks its weights inside the matmul and reaches a share of the bandwidth of "
     "its own, higher or lower by implementation. There is no per-format efficiency yet."),
    ("moe", "Routing is taken as uniform and the experts as balanced; real routing is skewed, so the busiest GPU "
     "reads more experts than the expected E·(1 − (1 − k/E)^T). The MI300X rows take an H200 profile by analogy "
     "across vendors, which their serving stack does not reach."),
    ("throughput large batch", "The worst rows are MI300X, whose profile is an analogy with the H200 (no published "
     "MI300X point is in the table subset)."),
    ("decode batch 1 TP>1", "The worst row is 8 A100 PCIe cards at batch 1, two all-reduces per layer over PCIe: "
     "their bytes are charged at the PCIe link, but each call's latency is the collective_s fitted on NVLink runs, "
     "and PCIe cards have no interconnect latency of their own in the GPU files yet."),
    ("ttft long prompt", "A long prefill is compute-bound; the largest misses are MoE prefills, whose per-expert "
     "matmuls reach less of the peak than one dense matmul of the same FLOPs, which the pad rows only partly "
     "capture."),
    ("throughput fp8", "The fp8 efficiency is fitted per GPU on few rows, most of them tensor-parallel 70B runs; "
     "one-GPU large-batch fp8 runs reach more of the fp8 peak than that (ratios below 1)."),
]
"""Regime (its start) → why the calibrated model still misses there."""


def calibrated_why(name: str) -> str:
    return next((why for start, why in CALIBRATED_WHY if name.startswith(start)), "")


# (repo, path, start of version or commit) -> the short key rows cite; another document gets repo@ref.
SOURCE_KEYS = [
    ("NVIDIA/TensorRT-LLM", "docs/source/performance.md", "release/0.5.0", "trt-0.5"),
    ("NVIDIA/TensorRT-LLM", "docs/source/performance/perf-overview.md", "v0.9.0", "trt-0.9"),
    ("NVIDIA/TensorRT-LLM", "docs/source/performance/perf-overview.md", "258c7540", "trt-0.17"),
    ("NVIDIA/TensorRT-LLM", "docs/source/performance/perf-overview.md", "00f37686", "trt-1.0"),
    ("NVIDIA/TensorRT-LLM", "docs/source/blogs/Best_perf_practice_on_DeepSeek-R1_in_TensorRT-LLM.md", "01c4ece9",
     "trt-r1"),
    ("InternLM/lmdeploy", "docs/en/benchmark/a100_fp16.md", "ebe90bc9", "lmd-a100"),
    ("InternLM/lmdeploy", "docs/en/w4a16.md", "8e8629de", "lmd-w4a16"),
    ("mlc-ai/llm-perf-bench", "README.md", "d401356f", "mlc"),
    ("QwenLM/Qwen2.5", "docs/source/benchmark/speed_benchmark.rst", "a912d239", "qwen2.5"),
    ("QwenLM/Qwen2.5", "docs/source/getting_started/speed_benchmark.md", "c7f51a1a", "qwen3"),
    ("argonne-lcf/LLM-Inference-Bench", "Plots/All_results.csv", "ae7e7a41", "lib"),
    ("vllm-project/vllm", ".buildkite/nightly-benchmarks/tests/latency-tests.json", "d5ce9249", "vllm-ci"),
]


def document(source: dict) -> tuple[str, str, str]:
    """(repo, path, version or commit) of a point's source; the vLLM CI points cite their test configuration."""
    return (source.get("repo") or source.get("config_repo", ""), source.get("path") or source.get("config_path", ""),
            str(source.get("version") or source.get("commit") or source.get("config_commit", "")))


def source_key(source: dict) -> str:
    repo, path, ref = document(source)
    for r, p, start, key in SOURCE_KEYS:
        if repo.startswith(r) and path == p and ref.startswith(start):
            return key
    return f"{repo.split('/')[-1].split()[0].lower()}@{ref[:8]}"


def num(v: float, digits: int = 3) -> str:
    """`digits` significant digits in fixed-point notation with thousands separators: 181500.0 -> '182,000',
    0.01752 -> '0.0175', 2 -> '2.00'. CPython rounds correctly on every platform, so the text is stable."""
    return f"{Decimal(f'{v:#.{digits}g}'.rstrip('.')):,f}"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def ratio_text(r: float) -> str:
    return f"{r:.2f}"


def share_text(s: float) -> str:
    return f"{100 * s:.0f} %"


def published_text(v) -> str:
    """A published value with thousands separators: as published up to 4 significant digits, else rounded to 4."""
    if isinstance(v, float) and len(Decimal(repr(v)).normalize().as_tuple().digits) > 4:
        return num(v, 4)
    return f"{v:,}"


def unit_text(p: Pair) -> str:
    """The published unit of a pair, in words: ms, s median, out tok/s/GPU, tok/s (in+out), req/s."""
    m = _LATENCY.match(p.metric)
    if m:
        _, unit, stat = m.groups()
        return unit + (f" {stat}" if stat in ("median", "p50") else "")
    kind = _THROUGHPUT.match(p.metric).group(1)
    if kind == "requests":
        return "req/s"
    per = p.unit.rsplit(" ", 1)[-1]
    base = "out tok/s" if kind == "output_tokens" else "tok/s (in+out)"
    return base + {"gpu": "/GPU", "user": "/user"}.get(per, "")


def in_published_unit(p: Pair, seconds: float) -> float:
    """A predicted time of the pair's quantity in the pair's published unit: a time scales with it, a rate
    inversely."""
    return p.measured * seconds / p.measured_s if p.unit in ("ms", "s") else p.measured * p.measured_s / seconds


def layout_text(x: Inputs) -> str:
    """GPUs (tp/pp/ep), and dp where attention is data-parallel: '8 (1/1/8) dp8'."""
    return f"{x.tp * x.pp * x.dp} ({x.tp}/{x.pp}/{x.ep})" + (f" dp{x.dp}" if x.dp > 1 else "")


def dtypes_text(x: Inputs) -> str:
    weights = f"{x.weights_dtype}-g{x.group_size}" if x.weights_dtype == "int4" else x.weights_dtype
    return f"{weights}/{x.kv_dtype}/{x.compute_dtype}"


def gpu_text(x: Inputs) -> str:
    return x.gpu + ("-pcie" if x.pcie else "")


def md_table(header: list[str], rows: list[list[str]], right: set[int] = frozenset()) -> list[str]:
    """A GitHub table; columns in `right` are right-aligned. Cells are padded to line up in the source where the
    table then fits in WIDTH columns, else written without padding (a wide table is read rendered)."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    if sum(widths) + 3 * len(widths) + 1 > WIDTH:
        widths = [1] * len(header)

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.rjust(w) if i in right else c.ljust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths))) + " |"

    rule = "|" + "|".join("-" * (w + 1) + ":" if i in right else "-" * (w + 2) for i, w in enumerate(widths)) + "|"
    return [line(header), rule, *map(line, rows)]


def para(text: str, indent: str = "") -> str:
    """One paragraph (or list item) wrapped at WIDTH; `indent` continues a list item."""
    return textwrap.fill(" ".join(text.split()), WIDTH, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False)


def default_constants() -> str:
    """The shares of peak latency() uses by default, read from its signature: 'compute 0.8, memory 0.9,
    communication 0.8'."""
    params = list(inspect.signature(latency).parameters.values())
    default = params[3].default if len(params) > 3 else None
    names = [("compute", "compute_efficiency"), ("memory", "memory_efficiency"), ("communication", "comm_efficiency")]
    found = [f"{label} {getattr(default, attr):g}" for label, attr in names if hasattr(default, attr)]
    return ", ".join(found) if found else "its defaults"


def evaluate_models(pairs: list[Pair], time_models: dict[str, TimeModel | None] | None = None) -> dict[str, list[Row]]:
    """evaluate() per time model (default TIME_MODELS), by name; a pair a model refuses has no row there."""
    return {name: evaluate(pairs, tm)[0] for name, tm in (TIME_MODELS if time_models is None else time_models).items()}


def page(points: list[dict] | None = None, time_models: dict[str, TimeModel | None] | None = None) -> str:
    """docs/accuracy.md: the published points (default published.yaml) against each time model (default
    TIME_MODELS)."""
    points = load_points() if points is None else points
    return markdown(evaluate_models(usable_pairs(points), time_models), points)


def _stats_cells(rows: list[Row]) -> list[str]:
    s = stats([r.ratio for r in rows])
    if not s["count"]:
        return ["0", "", "", ""]
    return [str(s["count"]), ratio_text(s["median_ratio"]), ratio_text(s["p90_error_factor"]),
            share_text(s["share_ratio_ge_1"])]


def _summary_table(rows_by_model: dict[str, list[Row]], keep: Callable[[Row], bool]) -> list[str]:
    """Regimes down, per time model: rows, median ratio, p90 error factor, share ≥ 1; then all and exact rows."""
    picked = {name: [r for r in rows if keep(r)] for name, rows in rows_by_model.items()}
    regimes = sorted({r.pair.regime for rows in picked.values() for r in rows}, key=regime_rank)
    groups = [(name, lambda r, g=name: r.pair.regime == g) for name in regimes]
    groups += [("**all rows**", lambda r: True), ("**all exact rows** (not approx)", lambda r: not r.pair.approx)]
    header = ["regime"] + [f"{m} {c}" for m in picked for c in ("rows", "median", "p90 ×", "≥ 1")]
    body = [[label] + [c for rows in picked.values() for c in _stats_cells([r for r in rows if test(r)])]
            for label, test in groups]
    return md_table(header, body, right=set(range(1, len(header))))


def _row_sort_key(p: Pair) -> tuple:
    x = p.inputs
    return (regime_rank(p.regime), x.model, gpu_text(x), x.tp * x.pp * x.dp, x.batch, x.seq, x.gen,
            QUANTITY_ORDER[p.quantity], p.id)


def _notes(p: Pair, fits: bool) -> str:
    notes = ["kv dtype assumed" for a in p.assumptions if a.startswith("kv dtype")]
    if not fits:
        notes.append("over memory")
    return ", ".join(notes)


def markdown(rows_by_model: dict[str, list[Row]], points: list[dict], about: dict[str, str] | None = None) -> str:
    """The accuracy page (docs/accuracy.md) from evaluate()'s rows per time model (by column name, in column
    order) and the points they came from. `about` describes each time model (default ABOUT)."""
    about = ABOUT if about is None else about
    models = list(rows_by_model)
    splits = assign_splits(points)
    by_id = {p["id"]: p for p in points}
    pairs, skips = triage(points)
    ratio = {m: {r.pair: r for r in rows} for m, rows in rows_by_model.items()}
    shown = sorted({r.pair for rows in rows_by_model.values() for r in rows}, key=_row_sort_key)
    fits = {p: next(ratio[m][p].fits for m in models if p in ratio[m]) for p in shown}
    keys = {p.id: source_key(by_id[p.id]["source"]) for p in shown}
    in_table = [p for p in shown if splits[p.id] == "table"]
    n_points = {s: len({p.id for p in shown if splits[p.id] == s}) for s in ("table", "heldout")}
    n_rows = {s: sum(splits[p.id] == s for p in shown) for s in ("table", "heldout")}
    first = models[0]
    out: list[str] = []
    add = out.append

    # ---- intro
    add("# Accuracy: llmcalc's latency against published GPU timings")
    add("")
    add("<!-- Generated by benchmarks/accuracy/evaluate.py from benchmarks/accuracy/published.yaml; do not edit.")
    add(f"     Regenerate: {REGENERATE} -->")
    add("")
    add(para("**No figure on this page was measured by this project.** Every measured time below is a number "
             "that others published (engine documentation, benchmark repositories, a paper), copied as published "
             "into [benchmarks/accuracy/published.yaml](../benchmarks/accuracy/published.yaml) with its source. "
             "Each row cites its source by a short key; the keys are resolved under [Sources](#sources). The "
             "predicted times are llmcalc's, for the same model, GPU, layout, dtypes, batch and lengths."))
    add("")
    add(para("Each row compares one published figure with a time model's prediction of the same quantity, as "
             "times: **ratio = measured time / predicted time**. A ratio ≥ 1 means the time model is optimistic: "
             "it predicts less time (or more throughput) than was measured. A throughput is compared as the time "
             "of the run it implies, so its ratio is predicted throughput / measured throughput. A roofline is a "
             "lower bound on time, so its ratios should be ≥ 1; a ratio below 1 points first at a mapping "
             "mistake or a wrong input (layout, dtype, a per-GPU figure read as a total), then at the model."))
    add("")
    add("Time models compared, one column each:")
    add("")
    for m in models:
        text = about.get(m, "a time model passed to the generator").format(constants=default_constants())
        add(para(f"- **{m}**: {text}.", "  "))
    add("")
    usable = {p.id for p in pairs}
    add(para(f"Of the {len(points)} points in published.yaml (one point is one published figure or table row), "
             f"{len(usable)} can be expressed in llmcalc and give {len(shown)} rows, one per published quantity "
             f"(time to first token, decode step, whole run). The points are split once into a **table subset** "
             f"of {n_rows['table']} rows from {n_points['table']} points, listed row by row below, and a "
             f"**held-out subset** of {n_rows['heldout']} rows from {n_points['heldout']} points, summarised only, "
             f"so that anything tuned on the listed rows can be checked on rows it has not seen."))
    add("")

    # ---- mapping
    add("## How a published figure is mapped")
    add("")
    add(para("The rules are in the docstring of [evaluate.py](../benchmarks/accuracy/evaluate.py); in plain "
             "words:"))
    add("")
    for item in [
        "**Model and GPU**: the llmcalc preset of the same architecture (published.yaml maps, for example, "
        "Llama-3.1-70B to `llama3.1-70b`) and the GPU preset. Points on a model or GPU without a preset are "
        "skipped.",
        "**Batch and lengths**: the prompt is the published input length, the generation the output length, the "
        "batch the published static batch (or the concurrency, see the approximations).",
        "**Layout**: tensor, pipeline and expert parallel degrees as published. TensorRT-LLM's attention data "
        "parallelism becomes llmcalc's data-parallel attention over all the GPUs (tp 1, dp = GPUs), the experts "
        "spread over the same GPUs.",
        "**Dtypes** (weights / KV cache / compute): the first word of each published field. Weight-only int4 or "
        "int8 (AWQ, GPTQ, MLC q4f16_1) stores int weights and computes in 16 bits, with the int4 group size the "
        "source names; fp8 checkpoints compute in fp8.",
        "**CUDA graphs**: on, as engines run them, but where the point says `cuda_graphs: false` (an engine of its "
        "time without them, or a launch that turned them off): those run as `latency --enforce-eager`, each step at "
        "least the host's launches × the profile's launch_s, fitted to their table-subset rows by "
        "benchmarks/accuracy/fit_launch.py ([roofline.md](roofline.md#time-models)).",
        "**Time to first token (ttft)**: the prefill of the whole batch.",
        "**Decode step (step)**: a published mean or median time per output token (TPOT, ITL) against the mean "
        "decode step, the decode time / (output − 1); not the first step, which is the shortest.",
        "**Whole run (run)**: the batch from prompt to last token, from the published end-to-end latency or from a "
        "throughput turned into the time it implies: batch × output / (output tokens/s) for a total, times the "
        "GPUs for a per-GPU figure, output / (tokens/s) per user, batch × (input + output) / (tokens/s) for a "
        "total-token throughput, batch / (requests/s).",
        "**One figure per quantity**: where a point publishes several figures of one run (a latency and the "
        "throughputs derived from it), the first in that order is used and the restatements are dropped; p99, "
        "min and max are dropped (the model predicts a typical run).",
    ]:
        add(para(f"- {item}", "  "))
    add("")
    counts = skip_counts(skips)
    add(para("Skipped points, by reason: " + "; ".join(f"{k} ({v})" for k, v in counts["points"].items()) + "."))
    add("")
    add(para("Dropped figures of usable points: " + "; ".join(f"{k} ({v})" for k, v in counts["metrics"].items())
             + "."))
    add("")
    refused = {m: len([p for p in pairs if p not in ratio[m]]) for m in models}
    if any(refused.values()):
        add(para("Rows a time model refused (llmcalc could not run the workload): "
                 + "; ".join(f"{m} ({n})" for m, n in refused.items()) + "."))
        add("")

    # ---- approximations
    def rows_with(test: Callable[[Pair], bool]) -> str:
        got = [p for p in shown if test(p)]
        return f"{plural(len(got), 'row')} of {plural(len({p.id for p in got}), 'point')}"

    add("## Approximations")
    add("")
    pcie = A100_PCIE
    for item in [
        f"**Continuous batching** ({rows_with(lambda p: p.approx)}, tagged approx, their own regime): only points "
        "with a fixed concurrency C are used, as a static batch of C requests that start together. Real "
        "in-flight batching overlaps new prefills with running decodes; these rows are left out of the "
        "lower-bound check.",
        "**Static batches**: the whole batch is prefilled, then decoded together, each sequence to the full output "
        "length, as the static-batching benchmarks run it.",
        f"**KV cache dtype not stated** ({rows_with(lambda p: any(a.startswith('kv dtype') for a in p.assumptions))}"
        "): taken as bf16, the serving engines' default for these checkpoints. A compute dtype not stated is fp8 "
        "for fp8 weights, bf16 for int weights, else the weights' dtype.",
        f"**A100 80GB PCIe** ({rows_with(lambda p: p.inputs.pcie)}): the a100-80gb preset with the PCIe card's "
        f"{pcie['memory_bandwidth_gbs']:,} GB/s and a {pcie['interconnect']} link "
        f"({pcie['interconnect_gbs']} GB/s), same compute.",
        f"**Over memory** ({rows_with(lambda p: not fits[p])}): llmcalc's memory estimate says the batch and "
        "context do not fit on the GPUs; the time is compared all the same (marked in the notes column).",
        f"**Regimes** group rows by the first rule that matches: continuous (approx); time to first token, by "
        f"prompt length (≤ {LONG_PROMPT} tokens or longer) and batch; MoE models; batch-1 decode (weight-only "
        f"int, one GPU, several); then batched runs: prefill-heavy (input ≥ 8× output), fp8, small batch "
        f"(≤ 16), large batch.",
        f"**Split**: within each regime (the regime of a point's last row), points ordered by a hash of their id; "
        f"the first {TABLE_SHARE:.0%} go to the table subset, the rest are held out. Deterministic: a new point "
        f"moves at most one other point of its regime.",
    ]:
        add(para(f"- {item}", "  "))
    add("")
    add("Regenerate this page (tests/test_accuracy.py fails while it is stale):")
    add("")
    add("```bash")
    add(REGENERATE)
    add("```")
    add("")

    # ---- summary
    add("## Summary")
    add("")
    add(para("Per regime and time model: **rows**; **median** ratio; **p90 ×**, the 90th percentile of the error "
             "factor max(ratio, 1/ratio) (90 % of rows are within this factor); **≥ 1**, the share of rows whose "
             "ratio is ≥ 1 (the time model predicted no more time than was measured)."))
    add("")
    for subset, title in (("table", "Table subset"), ("heldout", "Held-out subset")):
        add(f"### {title} ({n_rows[subset]} rows from {n_points[subset]} points)")
        add("")
        out += _summary_table(rows_by_model, lambda r, s=subset: splits[r.pair.id] == s)
        add("")

    # ---- where off
    add("## Where the model is off, and why")
    add("")
    add(para("Computed over all rows, both subsets. The worst row of each regime is the one with the largest "
             "error factor max(ratio, 1/ratio)."))
    add("")
    for m in models:
        rows = rows_by_model[m]
        add(f"### {m}: worst row per regime")
        add("")
        worst = {}
        for r in rows:
            w = worst.get(r.pair.regime)
            if w is None or max(r.ratio, 1 / r.ratio) > max(w.ratio, 1 / w.ratio):
                worst[r.pair.regime] = r
        body = [[g, r.pair.inputs.model, gpu_text(r.pair.inputs), layout_text(r.pair.inputs), str(r.pair.inputs.batch),
                 str(r.pair.inputs.seq), str(r.pair.inputs.gen), r.pair.quantity, ratio_text(r.ratio),
                 "table" if splits[r.pair.id] == "table" else "held out", keys[r.pair.id]]
                for g, r in sorted(worst.items(), key=lambda kv: regime_rank(kv[0]))]
        out += md_table(["regime", "model", "GPU", "GPUs (tp/pp/ep)", "batch", "input", "output", "quantity",
                         "ratio", "subset", "source"], body, right={4, 5, 6, 8})
        add("")
        below = sorted((r for r in rows if r.ratio < 1), key=lambda r: (r.ratio, r.pair.id))
        add(f"### {m}: rows below 1")
        add("")
        if below:
            add(para(f"{len(below)} rows ({sum(not r.pair.approx for r in below)} of them exact), lowest first:"))
            add("")
            body = [[r.pair.inputs.model, gpu_text(r.pair.inputs), layout_text(r.pair.inputs),
                     dtypes_text(r.pair.inputs), str(r.pair.inputs.batch), str(r.pair.inputs.seq),
                     str(r.pair.inputs.gen), r.pair.quantity, ratio_text(r.ratio), "yes" if r.pair.approx else "",
                     "table" if splits[r.pair.id] == "table" else "held out", keys[r.pair.id]] for r in below]
            out += md_table(["model", "GPU", "GPUs (tp/pp/ep)", "dtypes w/kv/compute", "batch", "input", "output",
                             "quantity", "ratio", "approx", "subset", "source"], body, right={4, 5, 6, 8})
        else:
            add("None.")
        add("")

    add("### Batch-1 decode by GPU count")
    add("")
    add(para("Exact batch-1 decode rows of dense models (step and run quantities; regimes decode batch 1), by the "
             "number of GPUs; per time model the rows and the median ratio."))
    add("")

    def decode_b1(r: Row) -> bool:
        return r.pair.regime.startswith("decode batch 1")

    gpu_counts = sorted({r.pair.inputs.tp * r.pair.inputs.pp * r.pair.inputs.dp
                         for rows in rows_by_model.values() for r in rows if decode_b1(r)})
    body = []
    for n in gpu_counts:
        cells = [str(n)]
        for m in models:
            got = [r.ratio for r in rows_by_model[m] if decode_b1(r)
                   and r.pair.inputs.tp * r.pair.inputs.pp * r.pair.inputs.dp == n]
            cells += [str(len(got)), ratio_text(percentile(got, 50)) if got else ""]
        body.append(cells)
    out += md_table(["GPUs"] + [f"{m} {c}" for m in models for c in ("rows", "median")], body,
                    right=set(range(len(models) * 2 + 1)))
    add("")

    add(f"### Why ({first})")
    add("")
    exact = stats([r.ratio for r in rows_by_model[first] if not r.pair.approx])
    add(para(f"Over the {exact['count']} exact rows (both subsets, not approx) the {first} predicts no more time "
             f"than was measured in {share_text(exact['share_ratio_ge_1'])} of them; the median row took "
             f"{ratio_text(exact['median_ratio'])}× the predicted time, and 90 % of rows are within a factor "
             f"{ratio_text(exact['p90_error_factor'])}. What it leaves out is mostly fixed cost: a time per "
             f"kernel launch, per collective and per step that does not shrink with the work, so the gap is "
             f"largest where the work per step is smallest. By regime, largest median ratio first:"))
    add("")
    by_regime = summary(rows_by_model[first])["by_regime"]
    for g, s in sorted(by_regime.items(), key=lambda kv: (-kv[1]["median_ratio"], regime_rank(kv[0]))):
        add(para(f"- **{g}**: median {ratio_text(s['median_ratio'])}, p90 × {ratio_text(s['p90_error_factor'])} "
                 f"({s['count']} rows). {regime_why(g)}", "  "))
    add("")
    add(para("A ratio below 1 says the engine beat the bound. The bound divides by fixed shares of the datasheet "
             f"peaks ({default_constants()}), so a kernel that reaches more than its share gives a ratio between "
             "that share and 1 without breaking physics; a ratio further below points at the published inputs "
             "(the layout, the dtype, or a per-GPU figure that is a total) before it points at the model."))
    add("")

    if "calibrated" in rows_by_model:
        add("### Why (calibrated)")
        add("")
        exact = stats([r.ratio for r in rows_by_model["calibrated"] if not r.pair.approx])
        add(para(f"Over the {exact['count']} exact rows the calibrated model's median ratio is "
                 f"{ratio_text(exact['median_ratio'])} and 90 % of rows are within a factor "
                 f"{ratio_text(exact['p90_error_factor'])}: the fixed costs and partial overlap close most of the "
                 "roofline's gap. Its profiles are fitted per GPU and dtype on the table subset only, and no figure "
                 "depends on a model, so what remains is what a per-GPU profile cannot know. By regime, largest "
                 "90th-percentile error first:"))
        add("")
        by_regime = summary(rows_by_model["calibrated"])["by_regime"]
        for g, s in sorted(by_regime.items(), key=lambda kv: (-kv[1]["p90_error_factor"], regime_rank(kv[0]))):
            add(para(f"- **{g}**: median {ratio_text(s['median_ratio'])}, p90 × {ratio_text(s['p90_error_factor'])} "
                     f"({s['count']} rows). {calibrated_why(g)}".rstrip(), "  "))
        add("")

    # ---- full table
    add("## Table subset, row by row")
    add("")
    add(para("Sorted by regime, then model. GPUs (tp/pp/ep): the GPU count with the tensor, pipeline and expert "
             "parallel degrees (dp: attention data-parallel). Dtypes: weights / KV cache / compute (int4 with its "
             "group size). Batch in sequences, input and output in tokens. Quantity: ttft, step or run (see the "
             "mapping). Measured: the published figure (rounded to 4 significant digits where it has more); each "
             "time model's column is its prediction of the same figure, in the same unit. Ratio: measured time / "
             "predicted time. Notes: kv dtype assumed (not published), over memory (llmcalc's estimate says the "
             "batch does not fit)."))
    add("")
    header = (["model", "GPU", "GPUs (tp/pp/ep)", "dtypes w/kv/compute", "batch", "input", "output", "quantity",
               "measured"] + models + ["unit"] + [f"ratio {m}" if len(models) > 1 else "ratio" for m in models]
              + ["notes", "source"])
    n = len(models)
    right = {4, 5, 6} | set(range(8, 9 + n)) | set(range(10 + n, 10 + 2 * n))
    for g in sorted({p.regime for p in in_table}, key=regime_rank):
        rows = [p for p in in_table if p.regime == g]
        add(f"### {g} ({len(rows)} rows)")
        add("")
        body = []
        for p in rows:
            x = p.inputs
            unit = unit_text(p)
            cells = [x.model, gpu_text(x), layout_text(x), dtypes_text(x), str(x.batch), str(x.seq), str(x.gen),
                     p.quantity, published_text(p.measured)]
            cells += [num(in_published_unit(p, ratio[m][p].predicted_s)) if p in ratio[m] else "—" for m in models]
            cells += [unit]
            cells += [ratio_text(ratio[m][p].ratio) if p in ratio[m] else "—" for m in models]
            cells += [_notes(p, fits[p]), keys[p.id]]
            body.append(cells)
        out += md_table(header, body, right)
        add("")

    # ---- sources
    add("## Sources")
    add("")
    add(para("Every row above and every row counted in the summary comes from one of these documents. The "
             "tables, sections or rows read are listed per document; published.yaml gives each point's exact "
             "locator, URL and notes."))
    add("")
    docs: dict[str, list[dict]] = {}
    for p in shown:
        docs.setdefault(keys[p.id], []).append(by_id[p.id]["source"])
    for key in sorted(docs):
        srcs = docs[key]
        s = srcs[0]
        repo, path, ref = document(s)
        where = f"`{repo}`, `{path}` at {'commit ' if re.fullmatch(r'[0-9a-f]{40}', ref) else ''}`{ref}`"
        if s.get("paper"):
            where = f"{s['paper']}, arXiv {s['arxiv']}; data: {where}"
        elif s.get("test_name"):
            where = f"vLLM performance CI; test configuration {where}"
        locators = []
        for src in srcs:
            loc = src.get("table") or src.get("section") or src.get("test_name")
            loc = re.sub(r", row .*$", "", str(loc)) if loc else "one CSV row per point (`source.row`)"
            if loc not in locators:
                locators.append(loc)
        urls = sorted({src["url"] for src in srcs if src.get("url")})
        add(para(f"- **{key}**: {where}. " + " ".join(f"<{u}>" for u in urls) + " Read: "
                 + "; ".join(locators) + ".", "  "))
    add("")
    out += training_section()
    return "\n".join(out)


def training_section() -> list[str]:
    """The page's "Training" section: benchmarks/accuracy/training.py (a sibling file, loaded by path) on
    training.yaml."""
    import importlib.util

    name = "accuracy_training"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent / "training.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # NamedTuples look their module up
        spec.loader.exec_module(module)
    return sys.modules[name].section()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--format", choices=["table", "csv", "json"], default="table")
    ap.add_argument("--subset", choices=["all", "table", "heldout"], default="all", help="rows of these points only")
    ap.add_argument("--split", action="store_true", help="list each point's subset (table/heldout) instead")
    ap.add_argument("--file", type=Path, default=PUBLISHED, help="published measurements (default: %(default)s)")
    ap.add_argument("--markdown", action="store_true", help="print the accuracy page (docs/accuracy.md) instead")
    ap.add_argument("--write", type=Path, metavar="PATH", help="write the accuracy page to PATH (docs/accuracy.md)")
    args = ap.parse_args(argv)

    points = load_points(args.file)
    if args.markdown or args.write:
        text = page(points)
        if args.write:
            args.write.write_text(text, encoding="utf-8", newline="\n")
        else:
            sys.stdout.write(text)
        return 0
    splits = assign_splits(points)
    pairs, skips = triage(points)
    rows, refused = evaluate(pairs)
    skips += refused
    if args.subset != "all":
        rows = [r for r in rows if splits[r.pair.id] == args.subset]

    if args.split:
        regimes: dict[str, set] = {}
        for p in pairs:
            regimes.setdefault(p.id, set()).add(p.regime)
        records = [{"id": p["id"], "split": splits[p["id"]], "regimes": "; ".join(sorted(regimes.get(p["id"], [])))
                    or "(unusable)"} for p in points]
        coverage = {}
        for p in pairs:
            coverage.setdefault(p.regime, Counter())[splits[p.id]] += 1
        if args.format == "json":
            print(json.dumps({"points": records, "rows_per_regime": {k: dict(v) for k, v in coverage.items()}},
                             indent=1))
        elif args.format == "csv":
            out = io.StringIO()
            w = csv.DictWriter(out, ["id", "split", "regimes"])
            w.writeheader()
            w.writerows(records)
            print(out.getvalue(), end="")
        else:
            print(text_table(records, ["id", "split", "regimes"]))
            n = Counter(splits.values())
            print(f"\n{n['table']} table, {n['heldout']} held-out points; rows per regime (table / heldout):")
            for k, v in sorted(coverage.items()):
                print(f"  {k}: {v['table']} / {v['heldout']}")
        return 0

    records = [flat(r, splits) for r in rows]
    s = summary(rows)
    if args.format == "json":
        print(json.dumps({"rows": records, "summary": s, "skips": skip_counts(skips),
                          "skipped": [s._asdict() for s in skips]}, indent=1, ensure_ascii=False))
    elif args.format == "csv":
        out = io.StringIO()
        w = csv.DictWriter(out, COLUMNS)
        w.writeheader()
        w.writerows(records)
        print(out.getvalue(), end="")
    else:
        cols = [c for c in COLUMNS if c not in ("unit", "assumptions", "split")]
        print(text_table(records, cols))
        print(f"\n{len(rows)} rows from {len({r.pair.id for r in rows})} points ({args.subset}); "
              "ratio = measured time / predicted time (≥ 1: the model is optimistic)\n")
        print(text_table(summary_records(s), ["group", "count", "median_ratio", "p90_error_factor",
                                              "share_ratio_ge_1", "min_ratio", "max_ratio"]))
        c = skip_counts(skips)
        print("\nskipped points:", ", ".join(f"{k} ({v})" for k, v in c["points"].items()) or "none")
        print("dropped metrics:", ", ".join(f"{k} ({v})" for k, v in c["metrics"].items()) or "none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
