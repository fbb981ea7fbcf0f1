"""`llmcalc serve` against published serving benchmarks: the continuous-batching points of
benchmarks/accuracy/published.yaml (which the latency accuracy page skips, as a static batch cannot stand for them).

Run: python benchmarks/serving/evaluate.py             (the table on stdout)
     python benchmarks/serving/evaluate.py --write docs/serving.md   (between its serving-table markers)

Each point -> one `serve` run:
- model, gpu, tp, pp, ep as published; dtypes: the first word of the field (fp8, fp16, bf16); an fp8 checkpoint
  computes in fp8; a KV dtype "not stated" is the weights' dtype for fp8 engines (TensorRT-LLM's FP8 builds quantize
  the KV cache too, as the points' notes say) and bf16 otherwise. fp4 weights, Hugging Face ids and speculative
  decoding are skipped (not modelled, or no preset).
- load: `request_rate` (Poisson; INF: all at once) or an integer `concurrency` (that many clients); `concurrency:
  unbounded` (offline, max-load) is all at once with the engine's batch limit unknown: max_seqs 2,048 (the upper end
  of trtllm-bench's heuristics) and 4,096 requests.
- lengths: fixed input_tokens and output_tokens; 500 requests per rate point (TensorRT-LLM's online table says 500),
  the published prompt count where one is given.
- engine: max_batched_tokens 8,192, block 16 (vLLM's and TensorRT-LLM's defaults), gpu_memory_utilization 0.9.

Compared quantities (each a ratio measured / predicted for a time, predicted / measured for a throughput, so that
ratio > 1 always means llmcalc is optimistic): output tokens/s, mean TTFT, mean inter-token latency (= mean TPOT),
p50 TPOT, mean TTFT.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import yaml

from llmcalc.errors import UserError
from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.presets import load_preset, preset_names
from llmcalc.inputs.requests import Constant
from llmcalc.inputs.time_models import load_time_model
from llmcalc.views.serve import Engine, Load, make_requests, serve
from llmcalc.workload import Layout, Workload

ROOT = Path(__file__).parents[2]
DATA = ROOT / "benchmarks" / "accuracy" / "published.yaml"
BEGIN, END = "<!-- serving-table -->", "<!-- /serving-table -->"
OFFLINE_SEQS, OFFLINE_REQUESTS, RATE_REQUESTS = 2048, 4096, 500


def points() -> list[dict]:
    """The continuous-batching points."""
    return [p for p in yaml.safe_load(DATA.read_text())["points"] if p.get("batching") == "continuous"]


def dtype(field: object) -> str:
    return str(field).split()[0].lower()


def setup(p: dict) -> tuple | str:
    """(spec, gpu, workload, load, engine, n) for a point, or why it is skipped."""
    weights = dtype(p["weights_dtype"])
    if weights not in ("fp8", "fp16", "bf16", "int8"):
        return f"{weights} weights"
    if p["model"] not in preset_names():
        return "no preset"
    if "mtp" in str(p.get("notes", "")).lower() and "speculative" in str(p.get("notes", "")).lower():
        return "speculative decoding"
    kv = dtype(p.get("kv_dtype", "not"))
    if kv == "not":
        kv = weights if weights == "fp8" else "bf16"
    compute = "fp8" if weights == "fp8" else "bf16"
    layout = Layout(tp=p.get("tp", 1), pp=p.get("pp", 1), ep=p.get("ep", 1))
    w = Workload(weights_dtype=weights, kv_dtype=kv, compute_dtype=compute, layout=layout)
    rate, conc = p.get("request_rate"), p.get("concurrency")
    if rate is not None:
        load = Load(rate=math.inf if str(rate).upper() == "INF" else float(rate))
        engine, n = Engine(), RATE_REQUESTS
    elif isinstance(conc, int):
        load, engine, n = Load(concurrency=conc), Engine(max_seqs=max(256, conc)), max(RATE_REQUESTS, 4 * conc)
    else:
        load, engine, n = Load(rate=math.inf), Engine(max_seqs=OFFLINE_SEQS), OFFLINE_REQUESTS
    return load_preset(p["model"]), load_gpu(p["gpu"]), w, load, engine, n


def measured(p: dict) -> dict[str, float]:
    """What the point publishes, in seconds and tokens/s: output_tps, ttft_mean, tpot_mean, tpot_p50."""
    m, out = p["measured"], {}
    if "output_tokens_per_s" in m:
        out["output_tps"] = m["output_tokens_per_s"]
    for key, name in (("ttft_ms", "ttft_mean"), ("itl_ms", "tpot_mean")):
        if key in m:
            out[name] = m[key] / 1e3
    for key, name in (("ttft_s_mean", "ttft_mean"), ("tpot_s_p50", "tpot_p50")):
        if key in m:
            out[name] = m[key]
    return out


def kind(p: dict) -> str:
    """rate, rate INF, concurrency or offline."""
    if p.get("request_rate") is not None:
        return "rate INF" if str(p["request_rate"]).upper() == "INF" else "rate"
    return "concurrency" if isinstance(p.get("concurrency"), int) else "offline"


def evaluate(kinds: tuple[str, ...] = ("rate", "rate INF", "concurrency", "offline")) -> tuple[list[dict],
                                                                                                  dict[str, int]]:
    """One row per (point, quantity) of the points of these kinds, and the skipped points by reason."""
    rows, skipped = [], {}
    for p in points():
        if kind(p) not in kinds:
            continue
        got = setup(p)
        if isinstance(got, str):
            skipped[got] = skipped.get(got, 0) + 1
            continue
        spec, gpu, w, load, engine, n = got
        reqs = make_requests(n, Constant(p["input_tokens"]), Constant(p["output_tokens"]), load, 0)
        try:
            r = serve(spec, gpu, w, load_time_model(None, gpu), reqs, engine, load, "", "")
        except UserError as e:
            skipped[f"refused: {e}"[:60]] = skipped.get(f"refused: {e}"[:60], 0) + 1
            continue
        predicted = {"output_tps": r.output_tokens_per_s, "ttft_mean": r.ttft_s.mean, "tpot_mean": r.tpot_s.mean,
                     "tpot_p50": r.tpot_s.p50}
        for q, value in measured(p).items():
            ratio = predicted[q] / value if q == "output_tps" else value / predicted[q]
            rows.append({"id": p["id"], "kind": kind(p), "load": str(load), "model": p["model"], "gpu": p["gpu"],
                         "tp": w.layout.tp, "dtype": w.weights_dtype, "lengths": f"{p['input_tokens']}/"
                         f"{p['output_tokens']}", "quantity": q, "measured": value, "predicted": predicted[q],
                         "ratio": ratio, "engine": p.get("engine", "")})
    return rows, skipped


def summary(rows: list[dict]) -> tuple[float, float]:
    """(median ratio, 90th percentile of max(ratio, 1/ratio))."""
    ratios = sorted(r["ratio"] for r in rows)
    spread = sorted(max(x, 1 / x) for x in ratios)
    return statistics.median(ratios), spread[min(len(spread) - 1, math.ceil(0.9 * len(spread)) - 1)]


def fmt(q: str, v: float) -> str:
    return f"{v:,.0f}" if q == "output_tps" else f"{v * 1e3:,.1f} ms"


def row_line(r: dict) -> str:
    """One row of the page's table."""
    return (f"| {r['id']} | {r['load']} | {r['model']} | {r['gpu']} | {r['tp']} | {r['dtype']} | {r['lengths']} | "
            f"{NAMES[r['quantity']]} | {fmt(r['quantity'], r['measured'])} | {fmt(r['quantity'], r['predicted'])} | "
            f"{r['ratio']:.2f} |")


NAMES = {"output_tps": "output tokens/s", "ttft_mean": "TTFT mean", "tpot_mean": "TPOT (ITL) mean",
         "tpot_p50": "TPOT p50"}


def markdown(rows: list[dict], skipped: dict[str, int]) -> str:
    names = NAMES
    out = [BEGIN, "",
           "Generated by `python benchmarks/serving/evaluate.py --write docs/serving.md` from the continuous-batching "
           "points of benchmarks/accuracy/published.yaml (each with its source there), the calibrated time model, "
           "seed 0. ratio = measured / predicted for a time, predicted / measured for a throughput: above 1, "
           "llmcalc is optimistic. None of these points was used to fit a calibration profile.", ""]
    out += ["| points | quantity | rows | median ratio | 90% within × |", "|---|---|---:|---:|---:|"]
    for kind in ("rate", "rate INF", "concurrency", "offline"):
        for q in names:
            sel = [r for r in rows if r["kind"] == kind and r["quantity"] == q]
            if sel:
                med, p90 = summary(sel)
                out.append(f"| {kind} | {names[q]} | {len(sel)} | {med:.2f} | {p90:.2f} |")
    out += ["", "rate: a request rate (Poisson here); rate INF: all at once, the engine's batch limit unpublished "
            "(simulated with max_seqs 256); concurrency: that many clients; offline: every "
            f"request queued at once with the engine's batch limit unpublished (simulated with max_seqs "
            f"{OFFLINE_SEQS:,}, {OFFLINE_REQUESTS:,} requests).", ""]
    out += ["| point | load | model | GPU | tp | dtype | in/out | quantity | measured | predicted | ratio |",
            "|---|---|---|---|---:|---|---|---|---:|---:|---:|"]
    out += [row_line(r) for r in rows]
    if skipped:
        out += ["", "Skipped: " + "; ".join(f"{n} ({why})" for why, n in sorted(skipped.items())) + "."]
    return "\n".join(out + ["", END])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", type=Path, help="replace the serving-table section of this page")
    args = ap.parse_args()
    rows, skipped = evaluate()
    text = markdown(rows, skipped)
    if args.write is None:
        sys.stdout.write(text + "\n")
        return
    page = args.write.read_text()
    start, end = page.index(BEGIN), page.index(END) + len(END) if END in page else page.index(BEGIN) + len(BEGIN)
    args.write.write_text(page[:start] + text + page[end:])
    sys.stdout.write(f"wrote {args.write}\n")


if __name__ == "__main__":
    main()
