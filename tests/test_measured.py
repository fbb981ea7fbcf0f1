"""`llmcalc measured`: each client's result file read as it is (the values equal the file's own, read here with
plain json), the kind told from the content and anything else refused, and the prediction equal to `llmcalc serve`
run with the same options."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from conftest import FIXTURES, strict_json
from llmcalc.inputs.benchmarks import read_runs

BENCH = FIXTURES / "benchmarks"
ROOT = Path(__file__).resolve().parents[1]
AIPERF = "aiperf__wellflat__gpt-oss-20b-vllm-a100-telemetry.json"
GENAI_OLD = "genai-perf__wellflat__gpt-oss-20b-vllm-basic.json"
GENAI_NEW = "genai-perf__wellflat__gpt-oss-20b-vllm-telemetry.json"


def _stats_s(obj: dict) -> dict:
    assert obj["unit"] == "ms"
    return {"mean": obj["avg"] / 1000, "p50": obj["p50"] / 1000, "p90": obj["p90"] / 1000, "p99": obj["p99"] / 1000}


@pytest.mark.parametrize("name", [AIPERF, GENAI_OLD, GENAI_NEW])
def test_genai_perf_and_aiperf_files_read_as_written(shared, name):
    path = shared("benchmark-runs") / name
    raw = json.loads(path.read_text(encoding="utf-8"))
    [run] = read_runs(path)
    assert run.kind == ("aiperf" if name.startswith("aiperf") else "genai-perf")
    assert run.model_id == "openai/gpt-oss-20b"
    assert run.metrics["ttft"] == pytest.approx(_stats_s(raw["time_to_first_token"]), rel=1e-12)
    assert run.metrics["itl"] == pytest.approx(_stats_s(raw["inter_token_latency"]), rel=1e-12)
    assert run.metrics["e2e"] == pytest.approx(_stats_s(raw["request_latency"]), rel=1e-12)
    assert run.metrics["request_throughput"]["value"] == raw["request_throughput"]["avg"]
    assert run.metrics["output_throughput"]["value"] == raw["output_token_throughput"]["avg"]
    assert run.requests == raw["request_count"]["avg"]
    assert (run.prompt_mean, run.prompt_std) == (raw["input_sequence_length"]["avg"], raw["input_sequence_length"]["std"])
    assert (run.output_mean, run.output_std) == (raw["output_sequence_length"]["avg"],
                                                 raw["output_sequence_length"]["std"])
    assert run.concurrency == 1 and run.rate is None and run.engine is None
    # only AIPerf's telemetry names the GPU
    assert run.gpu_device == ("NVIDIA A100-SXM4-80GB" if name == AIPERF else None)


def test_vllm_file_read_as_written():
    raw = json.loads((BENCH / "vllm_bench_serve.json").read_text())
    [run] = read_runs(BENCH / "vllm_bench_serve.json")
    assert (run.kind, run.model_id, run.engine, run.requests) == ("vllm", raw["model_id"], "vllm", raw["completed"])
    assert run.rate == math.inf and run.concurrency == raw["max_concurrency"]
    assert run.metrics["e2e"] == pytest.approx({"mean": raw["mean_e2el_ms"] / 1000, "p50": raw["median_e2el_ms"] / 1000,
                                                "p90": raw["p90_e2el_ms"] / 1000, "p99": raw["p99_e2el_ms"] / 1000})
    assert run.metrics["tpot"]["p99"] == pytest.approx(raw["p99_tpot_ms"] / 1000)
    assert run.prompt_mean == raw["total_input_tokens"] / raw["completed"]
    assert run.metrics["output_throughput"] == {"value": raw["output_throughput"]}


def test_sglang_jsonl_one_run_a_line():
    lines = [json.loads(x) for x in (BENCH / "sglang_bench_serving.jsonl").read_text().splitlines()]
    runs = read_runs(BENCH / "sglang_bench_serving.jsonl")
    assert [r.line for r in runs] == [1, 2] and {r.kind for r in runs} == {"sglang"}
    assert runs[0].rate == math.inf and runs[0].concurrency == 4
    assert runs[1].rate == lines[1]["request_rate"] == 2.0 and runs[1].concurrency is None
    for run, raw in zip(runs, lines):
        assert run.metrics["ttft"] == pytest.approx({"mean": raw["mean_ttft_ms"] / 1000,
                                                     "p50": raw["median_ttft_ms"] / 1000,
                                                     "p99": raw["p99_ttft_ms"] / 1000})
        assert run.metrics["e2e"]["mean"] == pytest.approx(raw["mean_e2e_latency_ms"] / 1000)
        assert run.model_id is None and run.engine == "sglang"


def test_trtllm_report_read_as_written():
    raw = json.loads((BENCH / "trtllm_bench_report.json").read_text())
    [run] = read_runs(BENCH / "trtllm_bench_report.json")
    assert (run.kind, run.engine, run.gpu_device) == ("trtllm", "trtllm", raw["machine"]["name"])
    assert (run.tp, run.pp, run.ep) == (1, 1, 1) and run.requests == raw["request_info"]["num_requests"]
    s = raw["streaming_metrics"]
    assert run.metrics["ttft"]["mean"] == pytest.approx(s["avg_ttft_ms"] / 1000)
    assert run.metrics["tpot"]["p99"] == pytest.approx(s["tpot_percentiles"]["p99"] / 1000)
    assert run.metrics["e2e"]["p50"] == pytest.approx(raw["performance"]["request_latency_percentiles_ms"]["p50"] / 1000)


def _refused(cli, *args) -> str:
    r = cli("measured", *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr
    return r.stderr


def test_a_file_of_too_many_objects_is_refused_before_it_is_parsed(cli, tmp_path):
    """A 64 MiB file of `{},` took 1.7 GB and 6.5 s to refuse, every object built first; the objects and arrays are
    counted in the text now (those inside strings are not), so the bound on a file's memory holds."""
    from llmcalc.inputs.files import MAX_CONTAINERS

    path = tmp_path / "objects.json"
    path.write_text("[" + "{}," * MAX_CONTAINERS + "{}]")
    err = _refused(cli, str(path), "--preset", "llama3-8b", "--gpu", "h100-sxm")
    assert f"{MAX_CONTAINERS + 2:,} JSON objects and arrays" in err and str(path) in err
    path.write_text(json.dumps({"text": "{[" * MAX_CONTAINERS}))  # brackets inside a string are text
    err = _refused(cli, str(path), "--preset", "llama3-8b", "--gpu", "h100-sxm")
    assert "is not a benchmark result this reads" in err


@pytest.mark.parametrize("text", ['{"a": 1}', '[1, 2]', 'not json at all', '{"mean_ttft_ms": NaN}',
                                  '{"mean_ttft_ms": 1}\n{"b": 2}\n'])
def test_other_json_refused_naming_the_file_and_the_kinds(cli, tmp_path, text):
    path = tmp_path / "result.json"
    path.write_text(text)
    err = _refused(cli, str(path), "--preset", "llama3-8b", "--gpu", "h100-sxm", "--engine", "vllm")
    assert str(path) in err and "vLLM" in err and "trtllm-bench" in err


def test_a_file_of_another_kind_refused(cli, shared):
    """A model's config.json (JSON, not a result file) is no kind of benchmark result."""
    config = shared("model-configs-2026") / "dbrx-instruct.json"
    err = _refused(cli, str(config), "--preset", "llama3-8b", "--gpu", "h100-sxm", "--engine", "vllm")
    assert str(config) in err and "genai-perf" in err


def test_what_the_file_lacks_is_asked_for_by_flag(cli, shared):
    old = str(shared("benchmark-runs") / GENAI_OLD)
    assert "--gpu" in _refused(cli, old, "--engine", "vllm")
    assert "--engine" in _refused(cli, old, "--gpu", "a100-80gb")
    assert "--preset" in _refused(cli, str(BENCH / "sglang_bench_serving.jsonl"), "--gpu", "h100-sxm")


def test_prediction_is_serve_with_the_same_options(cli, shared):
    path = shared("benchmark-runs") / AIPERF
    r = cli("measured", str(path), "--engine", "vllm", "--format", "json")
    assert r.returncode == 0, r.stderr
    report = strict_json(r.stdout)
    [run] = report["runs"]
    assert (run["model"], run["gpu"], run["engine"], run["requests"]) == ("gpt-oss-20b", "a100-80gb", "vllm", 100)
    assert run["load"] == "concurrency 1" and "engine from --engine (the file names none)" in run["given"]
    served = cli("serve", *run["serve_args"], "--format", "json")
    assert served.returncode == 0, served.stderr
    serve = strict_json(served.stdout)
    rows = {(x["metric"], x["statistic"]): x for x in report["rows"]}
    assert {x["file"] for x in report["rows"]} == {run["file"]} == {str(path)}
    assert rows["TTFT", "mean"]["predicted"] == serve["ttft_s"]["mean"]
    assert rows["ITL", "p99"]["predicted"] == serve["tpot_s"]["p99"]
    assert rows["E2E", "p90"]["predicted"] == serve["e2e_s"]["p90"]
    assert rows["request throughput", "value"]["predicted"] == serve["requests_per_s"]
    assert rows["output throughput", "value"]["predicted"] == serve["output_tokens_per_s"]
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert rows["TTFT", "p99"]["measured"] == pytest.approx(raw["time_to_first_token"]["p99"] / 1000, rel=1e-12)
    for row in report["rows"]:
        assert row["ratio"] == pytest.approx(row["predicted"] / row["measured"])


def test_flags_fill_and_override_and_say_so(cli_json):
    report = cli_json("measured", str(BENCH / "vllm_bench_serve.json"), str(BENCH / "trtllm_bench_report.json"),
                      "--gpu", "h100-sxm", "--requests", "40")
    vllm, trt = report["runs"]
    assert vllm["model"] == "llama3-8b" and vllm["engine"] == "vllm" and vllm["requests"] == 40
    assert "the request count from --requests (the file's: 200)" in vllm["given"]
    assert "GPU from --gpu (the file names none)" in vllm["given"]
    assert "GPU from --gpu (the file names NVIDIA H100 80GB HBM3)" in trt["given"]
    assert trt["engine"] == "trtllm" and trt["load"] == "all at once"


# calibrate --from-runs


def _measured_ratios(cli, path, *args) -> dict:
    r = cli("measured", str(path), *args, "--format", "json")
    assert r.returncode == 0, r.stderr
    return {(x["metric"], x["statistic"]): x["ratio"] for x in strict_json(r.stdout)["rows"]}


def test_refit_profile_loads_and_moves_predictions_toward_its_runs(cli, shared, tmp_path):
    path = shared("benchmark-runs") / AIPERF
    out = tmp_path / "a100-vllm.yaml"
    r = cli("calibrate", "--from-runs", str(path), "--served-by", "vllm", "--out", str(out))
    assert r.returncode == 0, r.stderr
    import yaml

    bundled = yaml.safe_load((ROOT / "presets/calibration/a100-80gb.yaml").read_text(encoding="utf-8"))
    assert f"step_s: {bundled['step_s']:g} ->" in r.stderr
    assert f"compute_efficiency: {bundled['compute_efficiency']:g} ->" in r.stderr
    assert f"memory_efficiency: {bundled['memory_efficiency']:g} kept" in r.stderr and "none held out" in r.stderr
    profile = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert profile["gpu"] == "a100-80gb" and profile["step_s"] > bundled["step_s"]
    assert profile["memory_efficiency"] == bundled["memory_efficiency"]  # a term the runs cannot identify is kept
    before = _measured_ratios(cli, path, "--engine", "vllm")
    after = _measured_ratios(cli, path, "--engine", "vllm", "--calibration", str(out))
    for key in [("TTFT", "mean"), ("ITL", "mean"), ("E2E", "mean"), ("output throughput", "value")]:
        assert abs(math.log(after[key])) < abs(math.log(before[key])), key
    assert abs(math.log(after["ITL", "mean"])) < 0.05 and abs(math.log(after["TTFT", "mean"])) < 0.05
    # its 200-token prompts are memory-bound on an A100, so their TTFT does not identify the compute efficiency
    # (kept) but the host's time per request (fitted from the engine's stated 48 ms), which the profile then keeps
    # over the engine's
    ce = bundled["compute_efficiency"]
    assert f"compute_efficiency: {ce:g} -> {ce:g} (left as it was: the runs' prompt steps are not compute-bound" in r.stderr
    assert "request_s: 0.048 -> " in r.stderr and "fitted to the mean TTFT" in r.stderr
    assert "the profile's request_s stands wherever the profile is given" in r.stderr
    assert profile["compute_efficiency"] == ce and 0.01 < profile["request_s"] < 0.08
    # the profile loads where a calibration profile does, and is refused over an existing file without --force
    assert cli("latency", "--preset", "gpt-oss-20b", "--gpu", "a100-80gb", "--calibration", str(out)).returncode == 0
    again = cli("calibrate", "--from-runs", str(path), "--served-by", "vllm", "--out", str(out))
    assert again.returncode == 2 and "--force" in again.stderr


def test_leave_one_out_reported_over_runs(cli, tmp_path):
    r = cli("calibrate", "--from-runs", str(BENCH / "sglang_bench_serving.jsonl"), "--preset", "llama3-8b", "--gpu",
            "h100-sxm")
    assert r.returncode == 0, r.stderr
    held = [x for x in r.stderr.splitlines() if x.startswith("held out ")]
    assert [x.split(":")[1] for x in held] == ["1", "2"]
    assert "leave-one-out before the refit" in r.stderr and "leave-one-out after the refit" in r.stderr
    assert r.stdout.count("# fit: held out") == 2 and "name: calibrated" in r.stdout


def test_runs_of_two_gpus_make_no_profile(cli):
    r = cli("calibrate", "--from-runs", str(BENCH / "vllm_bench_serve.json"), "--from-runs",
            str(BENCH / "trtllm_bench_report.json"), "--gpu", "a100-80gb")
    assert r.returncode == 2 and "one GPU's under one engine" in r.stderr


def test_measured_and_from_runs_need_no_torch():
    import subprocess
    import sys

    code = ("import sys\nsys.modules['torch'] = None\nfrom llmcalc.cli import main\n"
            f"sys.argv = ['llmcalc', 'calibrate', '--from-runs', {str(BENCH / 'sglang_bench_serving.jsonl')!r}, "
            "'--preset', 'llama3-8b', '--gpu', 'h100-sxm']\nmain()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and "name: calibrated" in r.stdout, r.stderr


@pytest.mark.parametrize("text, said", [
    ('{"model_id": "x", "mean_ttft_ms": "abc", "mean_e2el_ms": 1}', "mean_ttft_ms"),
    ('{"backend": "sglang", "mean_e2e_latency_ms": 1, "mean_ttft_ms": 5, "completed": 0}', "no request completed"),
    ('{"request_throughput": {"unit": "requests/sec", "avg": 1}, "input_config": {"concurrency": 1}, '
     '"time_to_first_token": {"unit": "furlongs", "avg": 1}}', "furlongs"),
])
def test_a_bad_figure_is_named(cli, tmp_path, text, said):
    path = tmp_path / "run.json"
    path.write_text(text)
    assert said in _refused(cli, str(path), "--preset", "llama3-8b", "--gpu", "h100-sxm", "--engine", "vllm")


def test_one_ttft_fits_the_compute_efficiency_or_the_host_time_never_both():
    """A TTFT that moves with the compute (a long prompt's step) identifies compute_efficiency; one that barely
    does (a short prompt's memory-bound step) identifies request_s: run on two stand-in runs whose times are
    written out here, each solved to its measured figures."""
    from llmcalc.costs.run_fit import RunFigures, fit_runs
    from llmcalc.model.time_model import TimeModel

    base = TimeModel(name="calibrated", compute_efficiency=0.8, step_s=0.001)
    run = [RunFigures("run", {"ttft": 0.5, "tpot": 0.02})]

    def compute_bound(tm, _):
        return {"ttft": 0.2 / tm.compute_efficiency + tm.request_s + tm.step_s, "tpot": 0.01 + tm.step_s}

    def memory_bound(tm, _):
        return {"ttft": 0.2 + 0.001 / tm.compute_efficiency + tm.request_s + tm.step_s, "tpot": 0.01 + tm.step_s}

    tm, fits = fit_runs(run, base, compute_bound)
    assert tm.step_s == pytest.approx(0.01, rel=1e-3) and tm.request_s == 0
    assert tm.compute_efficiency == pytest.approx(0.2 / (0.5 - 0.01), rel=1e-3)
    tm, fits = fit_runs(run, base, memory_bound)
    assert tm.compute_efficiency == 0.8 and tm.step_s == pytest.approx(0.01, rel=1e-3)
    assert tm.request_s == pytest.approx(0.5 - 0.2 - 0.001 / 0.8 - 0.01, rel=1e-3)
    assert {f.name: f.runs for f in fits} == {"step_s": 1, "compute_efficiency": 0, "request_s": 1}


def _tiny_runs(tmp_path, n: int):
    """n copies of the vLLM fixture's run, each of one request of 16 + 2 tokens: a file of many small runs."""
    run = json.loads((BENCH / "vllm_bench_serve.json").read_text()) | {
        "completed": 1, "max_concurrency": 1, "total_input_tokens": 16, "total_output_tokens": 2}
    path = tmp_path / f"runs{n}.jsonl"
    path.write_text("".join(json.dumps(run) + "\n" for _ in range(n)))
    return path


def test_many_runs_are_checked_in_folds_and_past_the_bound_refused(cli, tmp_path):
    """calibrate --from-runs refitted once per run for its leave-one-out, each refit over all the others: 200 runs
    took 46 s, a 64 MiB file hours. Past MAX_FOLDS runs the check deals them into folds, and past MAX_RUNS runs
    `measured` and `calibrate --from-runs` refuse the files."""
    from llmcalc.costs.run_fit import MAX_FOLDS
    from llmcalc.views.measured import MAX_RUNS

    args = ("--preset", "llama3-8b", "--gpu", "h100-sxm")
    r = cli("calibrate", "--from-runs", str(_tiny_runs(tmp_path, MAX_FOLDS + 2)), *args)
    assert r.returncode == 0, r.stderr
    assert len([x for x in r.stderr.splitlines() if x.startswith("held out ")]) == MAX_FOLDS + 2
    assert f"{MAX_FOLDS}-fold before the refit" in r.stderr and "leave-one-out" not in r.stderr
    many = str(_tiny_runs(tmp_path, MAX_RUNS + 1))
    for command in (("measured", many), ("calibrate", "--from-runs", many)):
        r = cli(*command, *args)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert f"past {MAX_RUNS:,} runs" in r.stderr
