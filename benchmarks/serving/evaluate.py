"""`llmcalc serve` against published serving benchmarks, engine by engine: the continuous-batching points of
benchmarks/accuracy/published.yaml (which the latency accuracy page skips, as a static batch cannot stand for them)
and of benchmarks/serving/published.yaml, each with its source there.

Run: python benchmarks/serving/evaluate.py             (the table on stdout)
     python benchmarks/serving/evaluate.py --write docs/serving.md   (between its serving-table markers)

Each point -> one `serve` run on the point's engine (presets/engines/<engine>.yaml: its scheduler, CUDA graphs, KV
pool and step budget on that GPU) and the (GPU, engine) calibrated time model:
- model, gpu, tp, pp, ep as published; `attention_dp` (SGLang's --enable-dp-attention) as tp 1, dp = the GPUs
  and ep as published, each GPU an attention replica with its own scheduler, the replicas stepping together
  (TensorRT-LLM's expert parallelism ep inside tensor parallelism tp, each
  expert split tp / ep ways, as ep = tp: the same expert bytes and FLOPs on each GPU, but the busiest of tp ranks
  at the default expert skew rather than of ep, which overstates the skew's cost: 1.45 × for DeepSeek at 8 ranks,
  1.22 × at 4); dtypes: the first word of
  the field (fp8, fp16, bf16); an fp8 checkpoint computes in fp8, in its own format where its scales are part of
  it (BLOCK_FP8: DeepSeek's fp8 checkpoints scale each 128 × 128 block, which an engine's block-scaled kernels
  apply: presets/engines/<engine>.yaml `block_fp8`). A KV dtype "not stated" is the engine's
  default: the weights' dtype for the fp8 engine builds of TensorRT-LLM's own tables (their notes say the KV
  cache is quantised too), else bf16 ("auto": the model's dtype; a block-fp8 checkpoint declares no KV scheme).
  fp4 and other weights, points on no preset, speculative decoding and engines with no
  preset (LMDeploy) are skipped, each counted with its reason.
- engine settings: the engine's defaults on that GPU, but each scheduler or pool limit the point's launch command
  states (`engine`, by the flags presets/engines/commands/<engine>.yaml names under `settings`, e.g.
  TensorRT-LLM's --max_batch_size and --max_num_tokens, SGLang's --mem-fraction-static) in its place, and no CUDA
  graphs where it turns them off (its `graphs_off` flag).
- load: `request_rate` (Poisson; INF: all at once) or an integer `concurrency` (that many clients); `concurrency:
  unbounded` (offline, max-load) is all at once with 4,096 requests and the engine's own batch limit.
- requests: the published prompt count (`num_prompts`) where given, else 500 (TensorRT-LLM's online table says 500);
  under a fixed concurrency C at most max(4·C, 64) of them, the steady state of identical requests being reached
  within a few rounds of the clients.
- lengths: a point's `length_distribution` where it has one (each side a `serve` length: SGLang's random dataset
  with random_range_ratio 0 draws uniformly from 1 to the maximum; a ShareGPT run's prompts and outputs, whose
  spread no source publishes, are taken as uniform from 1 to twice the published mean, so that the clients of a
  fixed concurrency do not finish in lockstep as identical requests would); else fixed input_tokens and
  output_tokens, the means of the published totals where there are totals.

Compared quantities, each a ratio measured / predicted for a time, predicted / measured for a throughput, so that
ratio > 1 always means llmcalc is optimistic: output tokens/s, TTFT and TPOT, each the published median where there
is one, else the mean (the ITL where no TPOT is published; the two are equal up to the first token).

Split: the points are grouped by engine and load kind; within a group, ordered by a hash of their id, the first 40%
form the table subset, the rest the held-out subset. The split of every point is written to
benchmarks/serving/split.yaml the first time the point is seen and never changes after (a new point does not move
another); nothing in presets/ is fitted on the held-out points (vLLM's request_s was read off table points).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import re
import statistics
import sys
from pathlib import Path

import yaml

from llmcalc.errors import UserError
from llmcalc.inputs.engines import engine_names, load_engine, load_engine_commands
from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.presets import load_preset, preset_names
from llmcalc.inputs.requests import Constant, Lengths, parse_lengths
from llmcalc.inputs.time_models import load_time_model
from llmcalc.model.formats import WeightFormats
from llmcalc.views.serve import Load, make_requests, serve
from llmcalc.workload import Layout, Workload

ROOT = Path(__file__).parents[2]
SOURCES = (ROOT / "benchmarks" / "accuracy" / "published.yaml", ROOT / "benchmarks" / "serving" / "published.yaml")
SPLIT = ROOT / "benchmarks" / "serving" / "split.yaml"
BEGIN, END = "<!-- serving-table -->", "<!-- /serving-table -->"
OFFLINE_REQUESTS, RATE_REQUESTS = 4096, 500
TABLE_SHARE = 0.4
QUANTITIES = {"output_tps": "output tokens/s", "ttft": "TTFT", "tpot": "TPOT"}
ENGINE_WORDS = {"tensorrt-llm": "trtllm", "vllm": "vllm", "sglang": "sglang", "lmdeploy": "lmdeploy"}
BLOCK_FP8 = ("deepseek-v3", "deepseek-v3.2-exp")
"""Presets whose published fp8 checkpoints (deepseek-ai/DeepSeek-V3, -R1, -V3.2-Exp: quantization_config fmt e4m3,
weight_block_size [128, 128]) store a scale per 128 × 128 block: an fp8 run of them serves that format."""


def points() -> list[dict]:
    """The continuous-batching points of every source, each with its `engine_name`."""
    out = []
    for path in SOURCES:
        for p in yaml.safe_load(path.read_text())["points"]:
            if p.get("batching") != "continuous":
                continue
            if "engine_name" not in p:
                word = str(p.get("engine", "")).split()[0].lower()
                p = p | {"engine_name": ENGINE_WORDS.get(word, word)}
            out.append(p)
    return out


def dtype(field: object) -> str:
    return str(field).split()[0].lower()


def kind(p: dict) -> str:
    """rate, rate INF, concurrency or offline."""
    if p.get("request_rate") is not None:
        return "rate INF" if str(p["request_rate"]).upper() == "INF" else "rate"
    return "concurrency" if isinstance(p.get("concurrency"), int) else "offline"


def lengths(p: dict) -> tuple[Lengths, Lengths]:
    """(prompt, output) lengths of a point's requests: its `length_distribution` (each side a `serve` length, e.g.
    uniform:1,1024), else fixed lengths, the means of the published totals where it has them."""
    if dist := p.get("length_distribution"):
        return (parse_lengths(dist["input"], f"{p['id']}: length_distribution.input"),
                parse_lengths(dist["output"], f"{p['id']}: length_distribution.output"))
    m = p["measured"]
    if "total_input_tokens" in m and "total_output_tokens" in m and m.get("completed"):
        return (Constant(round(m["total_input_tokens"] / m["completed"])),
                Constant(round(m["total_output_tokens"] / m["completed"])))
    return Constant(p["input_tokens"]), Constant(p["output_tokens"])


OLDER_ENGINES = {"vllm": ((0, 8), "vllm-v0"), "sglang": ((0, 5), "sglang-0.4")}
"""engine_name → (the first release of the engine's own preset, the preset of the releases before it): vLLM
releases before 0.8.0 ran the V0 engine by default (presets/engines/vllm-v0.yaml); SGLang's before 0.5 had the
defaults of presets/engines/sglang-0.4.yaml."""


CONTEXT_FLAG = {"vllm": "--max-model-len"}
"""The launch flag that states the longest sequence an engine serves (its max_model_len; the model's max_seq_len
where not given): the step budget of an engine whose budget covers it (presets/engines/vllm-v0.yaml)."""


OVERLAP_FROM = {"vllm": (0, 14), "trtllm": (1, 0)}
"""engine_name → its first release whose defaults schedule a step while the one before runs (Engine.
overlap_scheduling): vLLM 0.14.0 (built 2026-01-18) leaves async_scheduling None, which vllm/config/vllm.py turns on,
where 0.13.0 has it False; TensorRT-LLM 0.17's PyTorch flow has enable_overlap_scheduler False (tensorrt_llm/_torch/
pyexecutor/config.py at 9b931c0f) and its TensorRT flow none, 1.2's llm_args.py disable_overlap_scheduler False.
A point of an earlier release runs without it, as does one whose `overlap_scheduling: false` says so."""


def release(p: dict) -> tuple[int, int] | None:
    """The first major.minor in a point's engine_version (else in its `engine`), or None where neither states one."""
    version = re.search(r"(\d+)\.(\d+)", str(p.get("engine_version", p.get("engine", ""))))
    return tuple(map(int, version.groups())) if version else None


FRONT_ENDS = {"trtllm": ("behind triton", "trtllm-triton")}
"""engine_name → (the words of a point's `engine` that name another server in front of it, that server's preset):
TensorRT-LLM's own tables of online serving ran its C++ executor behind Triton's tensorrtllm_backend, not
trtllm-serve (presets/engines/trtllm-triton.yaml)."""


def engine_preset(p: dict) -> str:
    """The engine preset a point ran: the preset of FRONT_ENDS where its `engine` names that server, else its
    engine_name, but the older preset of OLDER_ENGINES for a release its engine_version puts before that preset's
    first."""
    words, front = FRONT_ENDS.get(p["engine_name"], (None, None))
    if words and words in str(p.get("engine", "")).lower():
        return front
    first, older = OLDER_ENGINES.get(p["engine_name"], ((0, 0), p["engine_name"]))
    version = release(p)
    return older if version and version < first else p["engine_name"]


def overlap(p: dict) -> bool:
    """Whether the point's engine ran with the overlap scheduling its preset states (OVERLAP_FROM)."""
    first, version = OVERLAP_FROM.get(p["engine_name"]), release(p)
    return p.get("overlap_scheduling") is not False and not (first and version and version < first)


def launch_settings(p: dict) -> dict:
    """Settings values the point's launch command (`engine`) states, by the flags the engine's commands file names
    for them (presets/engines/commands/<engine>.yaml: `settings`), and graphs () under its `graphs_off` flag (a
    launch without CUDA graphs, as a point's `cuda_graphs: false` says where its engine's defaults had none), and
    overlap False under its `overlap_off` flag."""
    command, launch = str(p.get("engine", "")), load_engine_commands(p["engine_name"]).launch
    flags = launch.settings | ({"max_model_len": CONTEXT_FLAG[p["engine_name"]]} if p["engine_name"] in CONTEXT_FLAG
                               else {})
    given = {key: float(m.group(1)) if key == "gpu_memory_utilization" else int(m.group(1))
             for key, flag in flags.items()
             if (m := re.search(rf"{re.escape(flag)}[ =]([0-9.]+)", command))}
    if launch.graphs_off and re.search(rf"{re.escape(launch.graphs_off)}(?![-\w])", command):
        given["graphs"] = ()
    if launch.overlap_off and re.search(rf"{re.escape(launch.overlap_off)}(?![-\w])", command):
        given["overlap"] = False
    return given


def setup(p: dict) -> tuple | str:
    """(spec, gpu, workload, load, settings, n) for a point, or why it is skipped."""
    weights = dtype(p["weights_dtype"])
    if weights not in ("fp8", "fp16", "bf16", "int8"):
        return f"{weights} weights"
    if p["model"] not in preset_names():
        return "no preset"
    if p["engine_name"] not in engine_names():
        return f"no engine preset ({p['engine_name']})"
    notes = str(p.get("notes", "")).lower()
    if "mtp" in notes and "speculative" in notes:
        return "speculative decoding"
    kv = dtype(p.get("kv_dtype", "not"))
    if kv == "not":  # TensorRT-LLM's fp8 engine builds of its own tables quantise the KV cache (their notes)
        kv = weights if weights == "fp8" and p["id"].startswith("trt") else "bf16"
    kv = {"fp8_e5m2": "fp8", "fp8_e4m3": "fp8"}.get(kv, kv)
    compute = "fp8" if weights == "fp8" else "bf16"
    tp, ep, dp = p.get("tp", 1), p.get("ep", 1), 1
    if 1 < ep < tp:  # experts over ep groups, each expert split over tp / ep: every GPU holds 1/tp of them
        ep = tp
    if p.get("attention_dp"):  # data-parallel attention: a replica per GPU, the MoE layers over all of them
        tp, dp = 1, p["gpus"]
    layout = Layout(tp=tp, pp=p.get("pp", 1), dp=dp, ep=ep)
    given = launch_settings(p)
    eager = given.pop("graphs", None) is not None or p.get("cuda_graphs") is False  # no CUDA graphs: host-launched
    if weights == "fp8" and p["model"] in BLOCK_FP8:  # the checkpoint's format: its matmuls run in fp8
        w = Workload(weights_format=WeightFormats.parse("fp8-block"), kv_dtype=kv, layout=layout, enforce_eager=eager)
    else:
        w = Workload(weights_dtype=weights, kv_dtype=kv, compute_dtype=compute, layout=layout, enforce_eager=eager)
    gpu = load_gpu(p["gpu"])
    spec = load_preset(p["model"])
    context = given.pop("max_model_len", spec.max_seq_len)
    overlaps = given.pop("overlap", True) and overlap(p)  # the launch's flag, the release's default
    settings = load_engine(engine_preset(p)).settings(gpu, layout, eager, context, overlaps, **given)
    published = p.get("num_prompts") or p["measured"].get("completed") or RATE_REQUESTS
    rate, conc = p.get("request_rate"), p.get("concurrency")
    if rate is not None:
        load, n = Load(rate=math.inf if str(rate).upper() == "INF" else float(rate)), published
    elif isinstance(conc, int):
        load, n = Load(concurrency=conc), min(published, max(4 * conc, 64))
    else:
        load, n = Load(rate=math.inf), OFFLINE_REQUESTS
    return spec, gpu, w, load, settings, n


def measured(p: dict) -> dict[str, tuple[float, str]]:
    """What the point publishes, in seconds and tokens/s, with its statistic: output_tps, ttft, tpot."""
    m, out = p["measured"], {}
    if "output_tokens_per_s" in m:
        out["output_tps"] = (m["output_tokens_per_s"], "total")
    for q, keys in (("ttft", ("ttft_ms_p50", "ttft_ms_mean", "ttft_ms", "ttft_s_mean")),
                    ("tpot", ("tpot_ms_p50", "tpot_s_p50", "tpot_ms_mean", "itl_ms_p50", "itl_ms_mean", "itl_ms"))):
        for key in keys:
            if key in m:
                stat = "p50" if "p50" in key else "mean"
                if key == "itl_ms" or key == "ttft_ms":  # the older points give the statistic apart
                    stat = "mean"
                out[q] = (m[key] / (1 if key.endswith(("_s_mean", "_s_p50")) else 1e3), stat)
                break
    return out


def point_hash(point_id: str) -> float:
    return int.from_bytes(hashlib.sha256(point_id.encode()).digest()[:8], "big") / 2**64


def splits(pts: list[dict]) -> dict[str, str]:
    """"table" or "heldout" per point id: the recorded split, and for points not yet in it the rule of the module
    docstring over the new points of each (engine, load kind) group; written back when it grew."""
    known = yaml.safe_load(SPLIT.read_text())["points"] if SPLIT.exists() else {}
    groups: dict[tuple, list[str]] = {}
    for p in pts:
        if p["id"] not in known:
            groups.setdefault((p["engine_name"], kind(p)), []).append(p["id"])
    for ids in groups.values():
        ids.sort(key=point_hash)
        cut = round(TABLE_SHARE * len(ids))
        known |= {i: "table" if k < cut else "heldout" for k, i in enumerate(ids)}
    if groups:
        head = ("# The split of the published serving points into a table subset (calibration may use them) and a\n"
                "# held-out subset (never fitted on), made once per point by benchmarks/serving/evaluate.py.\n")
        SPLIT.write_text(head + yaml.safe_dump({"points": dict(sorted(known.items()))}, sort_keys=False))
    return known


def evaluate(kinds: tuple[str, ...] = ("rate", "rate INF", "concurrency", "offline"), only=None,
             **overrides: float) -> tuple[list[dict], dict[str, int]]:
    """One row per (point, quantity) of the points of these kinds (and, given `only`, those it keeps: a function
    of the point and its split), and the skipped points by reason; `overrides`: time-model figures put in place of
    the profile's (load_time_model), as a fit tries them."""
    pts = points()
    split = splits(pts)
    rows, skipped = [], {}
    for p in pts:
        if kind(p) not in kinds or (only is not None and not only(p, split[p["id"]])):
            continue
        got = setup(p)
        if isinstance(got, str):
            skipped[got] = skipped.get(got, 0) + 1
            continue
        spec, gpu, w, load, settings, n = got
        prompt, output = lengths(p)
        reqs = make_requests(n, prompt, output, load, 0)
        try:
            tm = load_time_model(None, gpu, engine=settings.engine, **overrides)
            r = serve(spec, gpu, w, tm, reqs, settings, load, "", "")
        except UserError as e:
            why = f"refused: {e}"[:60]
            skipped[why] = skipped.get(why, 0) + 1
            continue
        for q, (value, stat) in measured(p).items():
            if q == "output_tps":
                predicted = r.output_tokens_per_s
            else:
                spread = r.ttft_s if q == "ttft" else r.tpot_s
                predicted = spread.p50 if stat == "p50" else spread.mean
            ratio = predicted / value if q == "output_tps" else value / predicted
            rows.append({"id": p["id"], "kind": kind(p), "load": str(load), "model": p["model"], "gpu": p["gpu"],
                         "tp": w.layout.tp, "dtype": "fp8-block" if w.weights_format is not None else w.weights_dtype,
                         "lengths": f"{prompt}/{output}",
                         "quantity": q, "stat": stat, "measured": value, "predicted": predicted, "ratio": ratio,
                         "engine": engine_preset(p), "subset": split[p["id"]]})
    return rows, skipped


def percentile(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, max(0, math.ceil(q * len(v)) - 1))]


def summary(rows: list[dict]) -> tuple[float, float, float]:
    """(median ratio, median of max(ratio, 1/ratio), 90th percentile of max(ratio, 1/ratio))."""
    spread = [max(r["ratio"], 1 / r["ratio"]) for r in rows]
    return statistics.median(r["ratio"] for r in rows), statistics.median(spread), percentile(spread, 0.9)


def fmt(q: str, v: float) -> str:
    return f"{v:,.0f}" if q == "output_tps" else f"{v * 1e3:,.1f} ms"


def row_line(r: dict) -> str:
    """One row of the page's table."""
    name = QUANTITIES[r["quantity"]] + ("" if r["quantity"] == "output_tps" else f" {r['stat']}")
    return (f"| {r['id']} | {r['subset']} | {r['engine']} | {r['load']} | {r['model']} | {r['gpu']} | {r['tp']} | "
            f"{r['dtype']} | {r['lengths']} | {name} | {fmt(r['quantity'], r['measured'])} | "
            f"{fmt(r['quantity'], r['predicted'])} | {r['ratio']:.2f} |")


def summary_lines(rows: list[dict], by: str) -> list[str]:
    """Median ratio, median and p90 error factor per (subset, `by`, quantity)."""
    out = [f"| subset | {by} | quantity | rows | median ratio | median error × | 90% within × |",
           "|---|---|---|---:|---:|---:|---:|"]
    for subset in ("table", "heldout"):
        keys = sorted({r[by] for r in rows if r["subset"] == subset})
        for key in keys + ["all"]:
            for q, name in QUANTITIES.items():
                sel = [r for r in rows if r["subset"] == subset and r["quantity"] == q and key in ("all", r[by])]
                if sel:
                    med, err, p90 = summary(sel)
                    out.append(f"| {subset} | {key} | {name} | {len(sel)} | {med:.2f} | {err:.2f} | {p90:.2f} |")
    return out


def markdown(rows: list[dict], skipped: dict[str, int]) -> str:
    out = [BEGIN, "",
           "Generated by `python benchmarks/serving/evaluate.py --write docs/serving.md` from the continuous-batching "
           "points of benchmarks/accuracy/published.yaml and benchmarks/serving/published.yaml (each with its source "
           "there), each on its engine's preset and the calibrated time model, seed 0. ratio = measured / predicted "
           "for a time, predicted / measured for a throughput: above 1, llmcalc is optimistic. The error factor is "
           "max(ratio, 1/ratio). No GPU's calibration profile was fitted on any of these points; six engine figures, "
           "vLLM's, SGLang 0.4's and Triton's host time per request (presets/engines/vllm.yaml, sglang-0.4.yaml, "
           "trtllm-triton.yaml), "
           "TensorRT-LLM's share of the fp8 peak on Hopper "
           "(presets/engines/trtllm.yaml `fp8`, benchmarks/serving/fit_fp8.py) and the shares for block-scaled fp8 "
           "matmuls of vLLM V0 and SGLang 0.4 on the MI300X, whose own profile is by analogy (presets/calibration/"
           "engines/<engine>/mi300x.yaml, benchmarks/serving/fit_engine_profiles.py), were read off table-subset "
           "points, "
           "and the other block-scaled shares off a kernel benchmark, not off these points, as "
           "the profiles' host time per launch without CUDA graphs (launch_s) was off docs/accuracy.md's table "
           "subset; the held-out subset (benchmarks/serving/split.yaml) is never to be fitted on.", ""]
    out += ["By engine:", ""] + summary_lines(rows, "engine")
    out += ["", "By load (rate: a Poisson request rate; rate INF: all at once; concurrency: that many clients; "
            f"offline: every request queued at once, {OFFLINE_REQUESTS:,} requests, the engine's own batch limit):",
            ""] + summary_lines(rows, "kind")
    out += ["", "| point | subset | engine | load | model | GPU | tp | dtype | in/out | quantity | measured | "
            "predicted | ratio |", "|---|---|---|---|---|---|---:|---|---|---|---:|---:|---:|"]
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
