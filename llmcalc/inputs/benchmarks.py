"""Result files of serving-benchmark clients, read into one shape (BenchmarkRun) for `llmcalc measured` and
`llmcalc calibrate --from-runs`. The kind is told from the content, never from the file's name.

Each layout is the one its client writes, read from the client's own source:

- vLLM `vllm bench serve --save-result`: one JSON object (vllm-project/vllm, vllm/benchmarks/serve.py @ 009e6d4a,
  `main`'s result_json merged with `benchmark`'s result): date, backend, model_id, num_prompts, request_rate (a
  number, or the string "inf"), burstiness, max_concurrency, duration, completed, failed, total_input_tokens,
  total_output_tokens, request_throughput, output_throughput, and for each of ttft, tpot, itl, e2el:
  mean_X_ms, median_X_ms, std_X_ms and pN_X_ms for each percentile asked for (99 by default). --append-result
  adds one object per line.
- SGLang `python -m sglang.bench_serving --output-file`: one JSON object appended per run, a line each
  (sgl-project/sglang, python/sglang/bench_serving.py @ 0033168f, `benchmark`'s result): backend, dataset_name,
  request_rate (json.dumps writes an infinite rate as Infinity), max_concurrency, random_input_len,
  random_output_len, duration, completed, total_input_tokens, total_output_tokens, request_throughput,
  output_throughput, mean/median/std/p99 of e2e_latency_ms, ttft_ms, tpot_ms and itl_ms (p95_itl_ms too); no
  model name.
- genai-perf `profile_export_genai_perf.json` and AIPerf `profile_export_aiperf.json`: each metric a stats object
  {unit, avg, p1 … p99, min, max, std} (time_to_first_token, inter_token_latency, request_latency,
  request_throughput, output_token_throughput, input_sequence_length, output_sequence_length, request_count) and
  the run's `input_config`: genai-perf's flat (model, concurrency, request_rate) in older releases, nested
  (model_names, perf_analyzer.stimulus) in newer ones; AIPerf's with endpoint.model_names and loadgen
  (concurrency, request_rate, request_count), its GPU telemetry naming each GPU (telemetry_data … gpu_name).
  Layouts as the real files of ../shared/benchmark-runs/ (wellflat/k8s-dev) have them.
- `trtllm-bench throughput --report_json` (NVIDIA/TensorRT-LLM, tensorrt_llm/bench/dataclasses/reporting.py @
  02499765, get_statistics_dict): engine {model, version, backend}, machine {name} (the first GPU's
  torch name), world_info {tp_size, pp_size, ep_size, world_size, max_batch_size, max_num_tokens}, request_info
  {num_requests, avg_input_length, avg_output_length}, performance {request_throughput_req_s,
  system_output_throughput_tok_s, request_latency_percentiles_ms}, and when streaming, streaming_metrics
  {avg_ttft_ms, avg_tpot_ms, ttft_percentiles, tpot_percentiles}; each percentiles object {p50, p90?, p95, p99,
  minimum, maximum, average} (statistics.py: PercentileStats).

Latencies are read into seconds, throughputs into per second; a figure that is not a finite number is refused.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmcalc.errors import UserError, clip
from llmcalc.inputs.files import TooManyContainers, json_loads
from llmcalc.model.base import MAX_SIZE

MAX_RESULT_BYTES = 64 << 20
"""Largest result file read (a vLLM file saved with --save-detailed holds every request's text)."""

KINDS = ("vllm", "sglang", "genai-perf", "aiperf", "trtllm")
ACCEPTED = ("a vLLM bench serve --save-result JSON, an SGLang bench_serving JSONL, a genai-perf or AIPerf "
            "profile_export JSON, or a trtllm-bench --report_json report")

METRICS = ("ttft", "tpot", "itl", "e2e", "request_throughput", "output_throughput")
"""What a run may hold: time to first token, time per output token (first excluded), inter-token latency,
end-to-end latency (seconds; statistics mean, p50, p90, p99), requests/s and output tokens/s (statistic value)."""
STATS = ("mean", "p50", "p90", "p99")

ENGINE_OF_BACKEND = {"vllm": "vllm", "vllm-chat": "vllm", "sglang": "sglang", "sglang-native": "sglang",
                     "sglang-oai": "sglang", "sglang-oai-chat": "sglang", "trt": "trtllm",
                     "tensorrt-llm": "trtllm"}
"""A client's --backend that names the engine it talks to (vLLM's and SGLang's lists of request functions); an
OpenAI-compatible one (openai, openai-chat) names none."""


@dataclass(frozen=True)
class BenchmarkRun:
    """One benchmark run as a result file records it: what was served and how, and what was measured. None:
    the file does not say."""

    file: str
    kind: str
    line: int | None = None
    """The line of a JSONL file the run is on (1-based); None for a file of one run."""
    model_id: str | None = None
    gpu_device: str | None = None
    """The GPU's name as the file's telemetry has it (NVIDIA A100-SXM4-80GB)."""
    engine: str | None = None
    tp: int | None = None
    pp: int | None = None
    ep: int | None = None
    requests: int | None = None
    rate: float | None = None
    """Requests/s sent (inf: all at once)."""
    concurrency: int | None = None
    prompt_mean: float | None = None
    prompt_std: float = 0.0
    output_mean: float | None = None
    output_std: float = 0.0
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    """metric (METRICS) ↦ statistic ↦ value, seconds for latencies, per second for throughputs."""
    notes: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.file if self.line is None else f"{self.file}:{self.line}"


def read_runs(path: Path, most: int | None = None) -> list[BenchmarkRun]:
    """The runs a result file holds, its kind told from the content; given `most`, at most `most` + 1 of them
    (the caller refuses more; a JSON Lines file is read no further). Anything else is refused in one line naming
    the file and the kinds read."""
    from llmcalc.inputs.files import check_size

    check_size(path, "`files`", MAX_RESULT_BYTES, ACCEPTED)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UserError(f"`files`: {path}: no such file; give {ACCEPTED}") from None
    except IsADirectoryError:
        raise UserError(f"`files`: {path} is a folder; give {ACCEPTED}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"`files`: {path}: cannot read it as UTF-8 text ({e.__class__.__name__}); give "
                        f"{ACCEPTED}") from None
    name = str(path)
    try:
        docs = [(None, _loads(text))]
    except TooManyContainers as e:
        raise UserError(f"`files`: {path}: {e}; give {ACCEPTED}") from None
    except ValueError:
        lines = [(i, line) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
        lines = lines if most is None else lines[:most + 1]
        try:
            docs = [(i, _loads(line)) for i, line in lines]
        except ValueError:
            docs = []
    if not docs:
        raise UserError(f"`files`: {path} is not JSON or JSON lines; give {ACCEPTED}")
    runs = []
    for line, doc in docs:
        kind = detect(doc)
        if kind is None or (line is not None and kind not in ("vllm", "sglang")):
            where = f"{path}" if line is None else f"{path} line {line}"
            raise UserError(f"`files`: {where} is not a benchmark result this reads; give {ACCEPTED}")
        run = READERS[kind](doc, name, line)
        if run.requests == 0:
            raise UserError(f"`files`: {run.name}: no request completed in this run; give a run that served some")
        runs.append(run)
    return runs


def _loads(text: str) -> Any:
    """JSON whose only non-standard token allowed is Infinity (SGLang's infinite request rate); nesting too deep or a
    key given twice is a ValueError (inputs/files.py: json_loads)."""
    def constant(token: str) -> float:
        if token == "Infinity":
            return math.inf
        raise ValueError(f"{token} is not a number")

    return json_loads(text, constant)


def detect(doc: Any) -> str | None:
    """The client that wrote `doc` (KINDS), or None."""
    if not isinstance(doc, dict):
        return None
    config = doc.get("input_config")
    if isinstance(doc.get("request_throughput"), dict) and isinstance(config, dict):
        return "aiperf" if isinstance(config.get("loadgen"), dict) else "genai-perf"
    if all(isinstance(doc.get(k), dict) for k in ("engine", "world_info", "request_info", "performance")):
        return "trtllm"
    if any(k in doc for k in ("mean_e2el_ms", "median_e2el_ms")) or ("model_id" in doc and "mean_ttft_ms" in doc):
        return "vllm"
    if "mean_e2e_latency_ms" in doc and "mean_ttft_ms" in doc:
        return "sglang"
    return None


class _Doc:
    """Reads figures from one parsed run, each refused in one line (file, key) unless it is the right type."""

    def __init__(self, doc: dict, file: str, line: int | None):
        self.doc, self.where = doc, file if line is None else f"{file} line {line}"

    def get(self, *path: str, within: Any = None) -> Any:
        node = self.doc if within is None else within
        for key in path:
            if not isinstance(node, dict):
                return None
            node = node.get(key)
        return node

    def number(self, value: Any, key: str, *, inf: bool = False) -> float | None:
        if value is None:
            return None
        if isinstance(value, str) and inf and value == "inf":
            return math.inf
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > sys.float_info.max:
            raise UserError(f"`files`: {self.where}: `{key}` is {clip(str(value))}, beyond any float; give the file "
                            "as the client wrote it")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                not math.isfinite(value) and not (inf and value == math.inf)):
            raise UserError(f"`files`: {self.where}: `{key}` is {value!r}, not a finite number; give the file as "
                            "the client wrote it")
        if value < 0:  # no time, rate, throughput or count a client writes is negative
            raise UserError(f"`files`: {self.where}: `{key}` is {value!r}, below 0; give the file as the client "
                            "wrote it")
        if value and abs(value) < sys.float_info.min:  # subnormal: a quotient by it is infinite
            raise UserError(f"`files`: {self.where}: `{key}` is {value!r}, below a normal float's range; give the "
                            "file as the client wrote it")
        return float(value)

    def count(self, value: Any, key: str) -> int | None:
        x = self.number(value, key)
        if x is None:
            return None
        if not x.is_integer() or x < 0:
            raise UserError(f"`files`: {self.where}: `{key}` is {value!r}, not a count; give the file as the client "
                            "wrote it")
        if x > MAX_SIZE:
            raise UserError(f"`files`: {self.where}: `{key}` is {x:.3g}, more than {MAX_SIZE:,} (2^40), beyond any "
                            "run; give the file as the client wrote it")
        return int(x)

    def text(self, value: Any) -> str | None:
        if isinstance(value, list) and value:
            value = value[0]
        return value if isinstance(value, str) and value else None


def _flat(d: _Doc, metrics: dict, prefix_of: dict[str, str], stats: dict[str, str]) -> None:
    """metric ↦ stat read from flat keys `{stat}_{name}_ms` (vLLM, SGLang)."""
    for metric, name in prefix_of.items():
        for stat, key_stat in stats.items():
            key = f"{key_stat}_{name}_ms"
            v = d.number(d.doc.get(key), key)
            if v is not None:
                metrics.setdefault(metric, {}).setdefault(stat, v / 1000)


def _throughputs(d: _Doc, metrics: dict, requests_key: str, output_key: str, within: Any = None) -> None:
    for metric, key in (("request_throughput", requests_key), ("output_throughput", output_key)):
        v = d.number(d.get(key, within=within), key)
        if v is not None:
            metrics[metric] = {"value": v}


def _lengths(d: _Doc, doc: dict, n: int | None) -> dict:
    """Mean prompt and output tokens a request from the runs' totals (counts), each at least one a request."""
    totals = {key: d.count(doc.get(f"total_{key}_tokens"), f"total_{key}_tokens") for key in ("input", "output")}
    if not n:
        return {}
    for key, total in totals.items():
        if total is not None and total < n:
            raise UserError(f"`files`: {d.where}: `total_{key}_tokens` is {total:,} for {n:,} requests, under one "
                            "token a request; give the file as the client wrote it")
    return {"prompt_mean": None if totals["input"] is None else totals["input"] / n,
            "output_mean": None if totals["output"] is None else totals["output"] / n}


def _load(d: _Doc, rate: Any, concurrency: Any) -> dict:
    return {"rate": d.number(rate, "request_rate", inf=True), "concurrency": d.count(concurrency, "max_concurrency")}


def read_vllm(doc: dict, file: str, line: int | None) -> BenchmarkRun:
    d = _Doc(doc, file, line)
    metrics: dict = {}
    stats = {"mean": "mean", "p50": "median", "p90": "p90", "p99": "p99"}
    _flat(d, metrics, {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2el"}, stats)
    for metric in ("ttft", "tpot", "itl", "e2e"):  # an explicit p50 where the median is absent
        key = f"p50_{'e2el' if metric == 'e2e' else metric}_ms"
        if key in doc and "p50" not in metrics.get(metric, {}):
            metrics.setdefault(metric, {})["p50"] = d.number(doc[key], key) / 1000
    _throughputs(d, metrics, "request_throughput", "output_throughput")
    n = d.count(doc.get("completed"), "completed") or d.count(doc.get("num_prompts"), "num_prompts")
    return BenchmarkRun(
        file=file, kind="vllm", line=line, model_id=d.text(doc.get("model_id")),
        engine=ENGINE_OF_BACKEND.get(str(doc.get("backend") or doc.get("endpoint_type"))), requests=n,
        **_load(d, doc.get("request_rate"), doc.get("max_concurrency")),
        **_lengths(d, doc, n),
        metrics=metrics)


def read_sglang(doc: dict, file: str, line: int | None) -> BenchmarkRun:
    d = _Doc(doc, file, line)
    metrics: dict = {}
    _flat(d, metrics, {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2e_latency"},
          {"mean": "mean", "p50": "median", "p90": "p90", "p99": "p99"})
    _throughputs(d, metrics, "request_throughput", "output_throughput")
    n = d.count(doc.get("completed"), "completed")
    return BenchmarkRun(
        file=file, kind="sglang", line=line, model_id=d.text(doc.get("model_id") or doc.get("model")),
        engine=ENGINE_OF_BACKEND.get(str(doc.get("backend"))), requests=n,
        **_load(d, doc.get("request_rate"), doc.get("max_concurrency")),
        **_lengths(d, doc, n),
        metrics=metrics)


SCALE = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "us": 1e-6, "ns": 1e-9}
"""Seconds per unit of a genai-perf / AIPerf latency stats object."""


def _stats(d: _Doc, name: str) -> dict[str, float] | None:
    obj = d.doc.get(name)
    if not isinstance(obj, dict):
        return None
    unit = obj.get("unit")
    if not isinstance(unit, str) or unit not in SCALE:
        raise UserError(f"`files`: {d.where}: `{name}` is in {unit!r}, not a time unit this reads "
                        f"({', '.join(SCALE)}); give the file as the client wrote it")
    out = {}
    for stat, key in (("mean", "avg"), ("p50", "p50"), ("p90", "p90"), ("p99", "p99")):
        v = d.number(obj.get(key), f"{name}.{key}")
        if v is not None:
            out[stat] = v * SCALE[unit]
    return out or None


def read_genai_perf(doc: dict, file: str, line: int | None, kind: str = "genai-perf") -> BenchmarkRun:
    d = _Doc(doc, file, line)
    metrics: dict = {}
    for metric, name in (("ttft", "time_to_first_token"), ("itl", "inter_token_latency"), ("e2e", "request_latency")):
        s = _stats(d, name)
        if s:
            metrics[metric] = s
    for metric, name in (("request_throughput", "request_throughput"), ("output_throughput", "output_token_throughput")):
        v = d.number(d.get(name, "avg"), f"{name}.avg")
        if v is not None:
            metrics[metric] = {"value": v}
    config = doc["input_config"]
    if kind == "aiperf":
        model = d.get("endpoint", "model_names", within=config)
        load = _load(d, d.get("loadgen", "request_rate", within=config), d.get("loadgen", "concurrency", within=config))
    elif "perf_analyzer" in config:  # genai-perf's nested config
        model = config.get("model_names")
        stimulus = d.get("perf_analyzer", "stimulus", within=config) or {}
        load = _load(d, stimulus.get("request_rate"), stimulus.get("concurrency"))
    else:
        model = config.get("model")
        load = _load(d, config.get("request_rate"), config.get("concurrency"))
    gpus = {g.get("gpu_name") for endpoint in (d.get("telemetry_data", "endpoints") or {}).values()
            if isinstance(endpoint, dict) for g in (endpoint.get("gpus") or {}).values() if isinstance(g, dict)}
    notes = []
    if len(gpus) > 1:
        notes.append(f"its telemetry names more than one kind of GPU ({', '.join(sorted(map(str, gpus)))})")
    lengths = {}
    for side, name in (("prompt", "input_sequence_length"), ("output", "output_sequence_length")):
        mean, std = (d.number(d.get(name, k), f"{name}.{k}") for k in ("avg", "std"))
        lengths |= {f"{side}_mean": mean, f"{side}_std": std or 0.0}
    return BenchmarkRun(
        file=file, kind=kind, line=line, model_id=d.text(model),
        gpu_device=next(iter(gpus)) if len(gpus) == 1 and isinstance(next(iter(gpus)), str) else None,
        requests=d.count(d.get("request_count", "avg"), "request_count.avg"), **load, **lengths, metrics=metrics,
        notes=tuple(notes))


def read_aiperf(doc: dict, file: str, line: int | None) -> BenchmarkRun:
    return read_genai_perf(doc, file, line, "aiperf")


def read_trtllm(doc: dict, file: str, line: int | None) -> BenchmarkRun:
    d = _Doc(doc, file, line)
    metrics: dict = {}
    streaming = doc.get("streaming_metrics") if isinstance(doc.get("streaming_metrics"), dict) else {}
    for metric, avg, pct in (("ttft", "avg_ttft_ms", "ttft_percentiles"), ("tpot", "avg_tpot_ms", "tpot_percentiles")):
        s = {}
        v = d.number(streaming.get(avg), avg)
        if v is not None:
            s["mean"] = v / 1000
        for stat in ("p50", "p90", "p99"):
            v = d.number(d.get(pct, stat, within=streaming), f"{pct}.{stat}")
            if v is not None:
                s[stat] = v / 1000
        if s:
            metrics[metric] = s
    perf = doc["performance"]
    s = {}
    for stat, key in (("mean", "average"), ("p50", "p50"), ("p90", "p90"), ("p99", "p99")):
        v = d.number(d.get("request_latency_percentiles_ms", key, within=perf), f"request_latency_percentiles_ms.{key}")
        if v is not None:
            s[stat] = v / 1000
    if s:
        metrics["e2e"] = s
    _throughputs(d, metrics, "request_throughput_req_s", "system_output_throughput_tok_s", within=perf)
    world, info = doc["world_info"], doc["request_info"]
    return BenchmarkRun(
        file=file, kind="trtllm", line=line, model_id=d.text(d.get("engine", "model")),
        gpu_device=d.text(d.get("machine", "name")), engine="trtllm",
        tp=d.count(world.get("tp_size"), "tp_size"), pp=d.count(world.get("pp_size"), "pp_size"),
        ep=d.count(world.get("ep_size"), "ep_size"), requests=d.count(info.get("num_requests"), "num_requests"),
        prompt_mean=d.number(info.get("avg_input_length"), "avg_input_length"),
        output_mean=d.number(info.get("avg_output_length"), "avg_output_length"), rate=math.inf, metrics=metrics,
        notes=("trtllm-bench's report does not record the load; taken as all requests at once (its default) "
               "unless --concurrency or --rate says otherwise",))


READERS = {"vllm": read_vllm, "sglang": read_sglang, "genai-perf": read_genai_perf, "aiperf": read_aiperf,
           "trtllm": read_trtllm}
