"""Inputs refused before they reach a cost, each in one line with exit 2: a figure below a normal float's range
(1e-320, which divides to infinity) in a GPU or calibration file or a flag; JSON nested past Python's recursion
limit or with a key given twice; raw timings missing a field the fit reads; a config of 0 kv heads; an output
that is also an input, `--force` or not; a measured throughput above the GPUs' peak; more draft tokens than a step
holds; a JSON trace's numbers written as strings; a recursive YAML alias; a closed standard output; more experts
than any model has; simulations past their work bounds; a KV pool emptied by a setting the error names; a peak
past any float; 0 or null positions; a config.json that is no file; an empty --plot; a config's null or a
multiplier past any width; YAML's base-60 numbers, digits of other scripts and underscores in seconds; a stray comma
in --weights-format; a tp derived from --gpus, named so; a config value echoed in its JSON spelling, cut with
an ellipsis; an engine file whose last tier leaves a GPU out; a billion shared experts; a scenario's
parallel degree of 0; a subnormal or negative latency, a count past any run or a time past any
float in a benchmark result; a merged curves file whose runs are a list; a bool or a string where a number goes
in a GPU, engine or calibration file; a kernel curve's point that is no size or time; a subnormal flag (-0 is 0);
a measured throughput below a millionth of the peak; a benchmark's token total that is no count or under one a
request (and a prefill-only run's TPOT, left unfitted in words).
And what they would have led to: no table shows inf or NaN with exit 0, nor a figure hundreds
of digits long; and the presets that crashed a command run it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from llmcalc.errors import UserError

ROOT = Path(__file__).parents[1]
TIMEOUT = 300


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "llmcalc", *args], capture_output=True, text=True, timeout=TIMEOUT)


def one_line(r: subprocess.CompletedProcess, *needles: str) -> str:
    assert r.returncode == 2 and "Traceback" not in r.stderr, (r.returncode, r.stderr[-600:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and all(n in lines[0] for n in needles), r.stderr
    return lines[0]


def test_a_subnormal_figure_in_a_gpu_file_is_refused_by_its_field(tmp_path):
    gpu = yaml.safe_load((ROOT / "presets/gpus/h100-sxm.yaml").read_text())
    gpu["peak_tflops"]["bf16"] = 1e-320
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump(gpu))
    for command in (["serve", "-n", "10"], ["sweep", "-s", "1,2"], ["latency"]):
        one_line(run(command[0], "-p", "llama2-7b", "--gpu", str(path), *command[1:]), "peak_tflops.bf16",
                 "positive")


@pytest.mark.parametrize("where", ["value", "key", "gpu", "json"])
def test_an_integer_too_wide_to_write_is_refused_naming_where_it_is(tmp_path, hf_fixture, where):
    """YAML reads 0x, 0o and 0b literals whole: an engine file's request_s of 0xfff… (5,000 digits) passed the
    reader and failed when its error wrote the value (exit 1, a traceback: Python writes no integer past 4,300
    digits); as a key, when the key was named. An integer past 1,024 bits is refused where it is, in every file."""
    engine = (ROOT / "presets/engines/vllm.yaml").read_text()
    wide = "0x" + "f" * 5000
    path = tmp_path / ("config.json" if where == "json" else "file.yaml")
    if where == "value":
        path.write_text(engine.replace("request_s: 0.048", f"request_s: {wide}"))
        args, needle = ("--gpu", "h100-sxm", "--engine", str(path)), "request_s: an integer of 20,000 bits"
    elif where == "key":
        path.write_text(engine + f"\n? {wide}\n: 1\n")
        args, needle = ("--gpu", "h100-sxm", "--engine", str(path)), "a key: an integer of 20,000 bits"
    elif where == "gpu":
        path.write_text((ROOT / "presets/gpus/h100-sxm.yaml").read_text().replace("memory_gib: 80", "memory_gib: 0b"
                                                                                  + "1" * 3000))
        args, needle = ("--gpu", str(path)), "memory_gib: an integer of 3,000 bits"
    else:
        config = json.loads((hf_fixture("llama3-8b") / "config.json").read_text())
        path.write_text(json.dumps(config | {"rope_theta": 10 ** 400}))
        one_line(run("params", "--hf-config", str(path)), "rope_theta: an integer of 1,329 bits")
        return
    one_line(run("serve", "-p", "llama3-8b", "-n", "5", *args), needle)


@pytest.mark.parametrize("named", ["gpu", "engine", "long"])
def test_a_gpu_or_engine_name_is_never_made_into_a_path(tmp_path, named):
    """A GPU file's `name` picked its bundled profile as presets/calibration/<name>.yaml: `../../../tmp/x` read a
    YAML outside the presets as the GPU's profile (and an engine file's name likewise, blamed on the bundled
    one); a name of 300 characters said "File name too long" of a preset path. A name is looked up among the
    bundled files: one that is none of them has no profile."""
    outside = tmp_path / "outside"
    (outside / "h100-sxm").mkdir(parents=True)
    trap = "name: calibrated\ngpu: null\ncompute_efficiency: 7\n"  # out of range: read, it would be refused
    (outside / "x.yaml").write_text(trap)
    (outside / "h100-sxm.yaml").write_text(trap)
    (outside / "h100-sxm" / "h100-sxm.yaml").write_text(trap)
    up = "../" * 12 + str(outside).lstrip("/")
    gpu = yaml.safe_load((ROOT / "presets/gpus/h100-sxm.yaml").read_text())
    args = ["latency", "-p", "llama3-8b", "-f", "json"]
    if named == "engine":
        engine = yaml.safe_load((ROOT / "presets/engines/vllm.yaml").read_text()) | {"name": f"{up}/h100-sxm"}
        (tmp_path / "engine.yaml").write_text(yaml.safe_dump(engine))
        args += ["--gpu", "h100-sxm", "--engine", str(tmp_path / "engine.yaml")]
    else:
        gpu["name"] = f"{up}/x" if named == "gpu" else "g" * 300
        (tmp_path / "gpu.yaml").write_text(yaml.safe_dump(gpu))
        args += ["--gpu", str(tmp_path / "gpu.yaml")]
    r = run(*args)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["time_model"] == ("calibrated" if named == "engine" else "roofline")


def test_a_subnormal_share_in_a_calibration_file_or_flag_is_refused(tmp_path):
    profile = yaml.safe_load((ROOT / "presets/calibration/h100-sxm.yaml").read_text())
    profile["compute_efficiency"] = 1e-320
    path = tmp_path / "calibration.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in profile.items() if k != "sources"}))
    one_line(run("serve", "-p", "llama2-7b", "--gpu", "h100-sxm", "--calibration", str(path), "-n", "10"),
             "compute_efficiency", "millionth")
    one_line(run("latency", "-p", "llama2-7b", "--gpu", "h100-sxm", "--memory-efficiency", "1e-320"),
             "--memory-efficiency", "smallest normal float")
    one_line(run("serve", "-p", "llama2-7b", "--gpu", "h100-sxm", "--gpu-memory-utilization", "1e-320", "-n", "5"),
             "--gpu-memory-utilization")


def test_a_table_refuses_a_non_finite_result_as_json_does(capsys):
    from pydantic import BaseModel

    from llmcalc.render import emit

    class Leaky(BaseModel):
        model: str = "m"
        ttft_s: float = float("inf")

    with pytest.raises(UserError, match="ttft_s is inf"):
        emit(Leaky(), "table")
    assert capsys.readouterr().out == ""


def test_json_nested_past_the_recursion_limit_or_with_a_key_twice_is_one_line(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 5000 + "]" * 5000)
    one_line(run("measured", str(deep), "-p", "llama2-7b"), "not JSON")
    one_line(run("calibrate", "--from-raw", str(deep), "--gpu", "h100-sxm"), "--from-raw", "nested too deeply")
    twice = tmp_path / "config.json"
    twice.write_text('{"model_type": "llama", "hidden_size": 8192, "hidden_size": 4096}')
    one_line(run("params", "--hf-config", str(twice)), "'hidden_size' is given twice")
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"arrival": 0, "prompt": 100, "prompt": 5000000, "output": 10}\n')
    one_line(run("serve", "-p", "llama2-7b", "--gpu", "h100-sxm", "--trace", str(trace)), "--trace", "line 1",
             "given twice")


def test_raw_timings_missing_or_out_of_range_fields_name_them(tmp_path):
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps({"gemm": [1], "attention": []}))
    one_line(run("calibrate", "--from-raw", str(raw), "--gpu", "h100-sxm"), "--from-raw", "missing fields",
             "device_name")
    whole = {"device_name": "d", "date": "2026-01-01", "torch": "x", "cuda": "y", "model": "llama3-8b",
             "smoke": False, "copy": {"bytes": 1024, "seconds": 0}, "tiny": {"elements": 1, "seconds": 1e-5},
             "gemm": [{"dtype": "bf16", "m": 1, "n": 8, "k": 8, "seconds": 1e-5}], "attention": [],
             "collectives": [{"op": "all_reduce", "bytes": 8, "world": 0, "seconds": 1e-5}]}
    raw.write_text(json.dumps(whole))
    one_line(run("calibrate", "--from-raw", str(raw), "--gpu", "h100-sxm"), "copy.seconds")
    whole["copy"]["seconds"] = 1e-4
    raw.write_text(json.dumps(whole))
    one_line(run("calibrate", "--from-raw", str(raw), "--gpu", "h100-sxm"), "collectives.0.world", "2 or more")


def test_an_output_that_is_also_an_input_is_left_as_it_is_even_with_force(tmp_path):
    spec = tmp_path / "model.svg"
    spec.write_text((ROOT / "presets/llama2-7b.yaml").read_text())
    before = spec.read_bytes()
    one_line(run("sweep", "-c", str(spec), "-s", "1,2", "--plot", str(spec), "--force"), "--plot", "also an input")
    one_line(run("sweep", "-c", str(spec), "-s", "1,2", f"--plot={spec}", "--force"), "--plot", "also an input")
    assert spec.read_bytes() == before


@pytest.mark.parametrize("field", ["num_key_value_heads", "head_dim"])
def test_a_config_with_no_kv_heads_or_a_head_of_width_0_is_refused(tmp_path, field):
    """transformers takes either as given unless it is null: 0 builds no model, so it is not read as unset."""
    config = {"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
              "num_hidden_layers": 32, "num_attention_heads": 32, "max_position_embeddings": 4096, field: 0}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    one_line(run("params", "--hf-config", str(path)), field, "> 0 or null")
    path.write_text(json.dumps(config | {field: None}))
    assert run("params", "--hf-config", str(path)).returncode == 0


def test_other_inputs_name_their_own_field(tmp_path):
    one_line(run("memory", "-p", "llama2-7b", "--prefill-chunk", "0"), "--prefill-chunk")
    one_line(run("serve", "-p", "llama2-7b", "--gpu", "h100-sxm", "--draft", "tinyllama", "-n", "4"), "--draft",
             "unknown preset")
    one_line(run("memory", "-p", "mixtral-8x7b", "--weights-format", "experts=mxfp4,experts=int4"),
             "--weights-format", "experts is given twice")
    one_line(run("plan", "-p", "llama2-7b", "--gpu", "h100-sxm", "--rate", "1", "--slo-ttft", "2", "--price",
                 "h100-sxm=1", "--price", "h100-sxm=2"), "--price", "priced twice")
    one_line(run("latency", "-p", "llama2-7b", "--gpu", str(tmp_path)), "--gpu", "a folder")
    bad = tmp_path / "run.json"
    bad.write_text('{"not": "a benchmark"}')
    one_line(run("calibrate", "--from-runs", str(bad), "-p", "llama2-7b", "--gpu", "h100-sxm"), "--from-runs")
    assert one_line(run("memory", "-p", "llama2-7b", "--zero", "3")).startswith("error: --zero: ")  # named --dp
    assert one_line(run("memory", "-p", "llama2-7b", "--micro-batch", "1")).startswith("error: --micro-batch: ")


@pytest.mark.parametrize("command", [
    ("serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "-n", "4", "--prefix-hit"),
    ("serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "-n", "4", "--slo-ttft"),
    ("fit", "-p", "llama3-8b", "--gpu", "h100-sxm", "--reserve"),
    ("moe", "-p", "mixtral-8x7b", "--expert-skew"),
    ("moe", "-p", "mixtral-8x7b", "--capacity-factor")])
def test_a_subnormal_flag_is_refused_and_minus_zero_is_zero(command):
    """Every float option refuses a figure below a normal float's range (5e-324 was echoed back as the prefix hit,
    the SLO, the reserve, the skew) by its name; -0 is read as 0 and never printed as -0."""
    one_line(run(*command, "5e-324"), command[-1], "smallest normal float")
    r = run(*command, "-0.0", "-f", "json")
    if r.returncode == 0:  # a setting that takes 0 echoes 0.0, never -0.0
        assert "-0.0" not in json.dumps(json.loads(r.stdout)), r.stdout[:300]
    else:
        one_line(r, command[-1])


def test_a_trace_arrival_of_minus_zero_is_zero(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival": -0.0, "prompt": 100, "output": 10}\n')
    r = run("serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "--trace", str(trace), "-f", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["timeline"][0]["arrival_s"] == 0.0 and "-0.0" not in r.stdout


def test_a_throughput_far_below_any_run_is_refused():
    """A step of 1e308 s or 1e-300 tokens/s put MFU at a subnormal 2e-309 with exit 0; below a millionth of the
    peak the figure is in the wrong unit: llama2-7b's 4.3e10 FLOPs a token at 0.01 tokens/s is 4.4e-7 of an H100,
    at 1 token/s 4.4e-5, which is read."""
    for flag, value in (("--step-time", "1e308"), ("--tokens-per-s", "1e-300"), ("--tokens-per-s", "0.01")):
        one_line(run("mfu", "-p", "llama2-7b", "--gpu", "h100-sxm", flag, value), flag, "below a millionth")
    assert run("mfu", "-p", "llama2-7b", "--gpu", "h100-sxm", "--tokens-per-s", "1").returncode == 0


def test_a_throughput_beyond_the_peak_is_refused_and_a_model_given_twice_is_named(tmp_path):
    """llama2-7b trains at 6 · 6.7e9 ≈ 4.3e10 FLOPs a token: 1e5 tokens/s is 4.3 PFLOP/s, over 4 × an H100's dense
    bf16 peak (989 TFLOP/s); 1e4 tokens/s on 8 GPUs is 5%."""
    line = one_line(run("mfu", "-p", "llama2-7b", "--gpu", "h100-sxm", "--tokens-per-s", "1e5"), "--tokens-per-s",
                    "no run beats its peak")
    assert "4.332 ×" in line, line
    one_line(run("mfu", "-p", "llama2-7b", "--gpu", "h100-sxm", "--step-time", "1e-3"), "--step-time")
    assert run("mfu", "-p", "llama2-7b", "--gpu", "h100-sxm", "--gpus", "8", "--tokens-per-s", "1e4").returncode == 0
    spec = tmp_path / "llama.yaml"
    spec.write_text(yaml.safe_dump(yaml.safe_load((ROOT / "presets/llama2-7b.yaml").read_text())))
    one_line(run("compare", "-p", "llama2-7b", "-c", str(spec)), "'llama2-7b' is given twice", "--config")


def test_draft_tokens_beyond_a_step_and_a_trace_of_strings_are_refused(tmp_path):
    one_line(run("serve", "-p", "llama2-7b", "--gpu", "h100-sxm", "--draft", "llama2-7b", "--spec-tokens",
                 "1000000", "-n", "4"), "--spec-tokens", "8,192 tokens a step")
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival": 0, "prompt": "100", "output": 10}\n')
    one_line(run("serve", "-p", "llama2-7b", "--gpu", "h100-sxm", "--trace", str(trace)), "--trace",
             "JSON numbers, never strings")
    csv = tmp_path / "t.csv"
    csv.write_text("arrival,prompt,output\n0,100,10\n")
    assert run("serve", "-p", "llama2-7b", "--gpu", "h100-sxm", "--trace", str(csv)).returncode == 0


def test_a_million_replicas_of_ten_requests_build_ten_engines():
    from llmcalc import api

    r = api.serve("llama2-7b", "h100-sxm", dp=1_000_000, requests=10, prompt=128, output=8)
    assert r.dp == 1_000_000 and any(n.startswith("10 engine(s): dp=1000000 replicas") for n in r.notes), r.notes


def test_a_recursive_yaml_alias_is_refused_in_every_file_it_may_be(tmp_path):
    """`a: &a [*a]` builds a list that holds itself: a reader walking it would never end."""
    path = tmp_path / "rec.yaml"
    path.write_text("a: &a [*a]\nname: x\n")
    one_line(run("params", "-c", str(path)), "recursive alias")
    one_line(run("latency", "-p", "llama2-7b", "--gpu", str(path)), "recursive alias")
    one_line(run("serve", "-p", "llama2-7b", "--gpu", "h100-sxm", "--engine", str(path), "-n", "4"), "recursive alias")
    path.write_text("a: &a {b: *a}\nname: x\n")
    one_line(run("run", str(path)), "recursive alias")


def test_a_closed_standard_output_is_one_line_on_stderr():
    r = subprocess.run([sys.executable, "-m", "llmcalc", "kv", "-p", "llama2-7b"], stdout=subprocess.DEVNULL,
                       capture_output=False, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT,
                       preexec_fn=lambda: __import__("os").close(1))
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "error: standard output is closed; give the command somewhere to write (a file or a pipe)"], r.stderr


def test_more_experts_than_any_model_has_are_refused(tmp_path):
    config = {"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
              "num_local_experts": 2 ** 40, "num_experts_per_tok": 2}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    for command in (["serve", "--gpu", "h100-sxm", "--gpus", "8", "-n", "4"], ["memory"], ["params"]):
        one_line(run(command[0], "--hf-config", str(path), *command[1:]), "65536")


def test_a_simulation_past_its_work_bounds_is_refused_before_it_starts(tmp_path):
    """serve's bounds (llmcalc/views/serve.py): output tokens to simulate, and the steps the run needs at the least;
    plan's and measured's over all their simulations."""
    base = ("serve", "-p", "llama2-7b", "--gpu", "h100-sxm")
    one_line(run(*base, "-n", "100000", "--prompt", "4000", "--output", "4000"), "--requests", "output tokens")
    one_line(run(*base, "-n", "1000", "--max-batched-tokens", "1", "--prompt", "100000", "--output", "1"),
             "--max-batched-tokens", "engine steps")
    one_line(run(*base, "-n", "100000", "--concurrency", "1"), "--concurrency", "engine steps")
    one_line(run(*base, "-n", "200", "--max-seqs", "1", "--prompt", "1", "--output", "100000"), "--max-seqs")
    one_line(run("plan", "-p", "llama2-7b", "--gpu", "h100-sxm", "--max-gpus", "64", "--rate", "20", "--prompt",
                 "1", "--output", "4000", "--slo-ttft", "1e9", "--slo-tpot", "1e9", "--top", "33", "-n", "1000"),
             "--requests", "finalists")
    record = {"backend": "sglang", "dataset_name": "random", "request_rate": float("inf"), "max_concurrency": 2000,
              "sharegpt_output_len": None, "random_input_len": 512, "random_output_len": 3000,
              "random_range_ratio": 1.0, "duration": 20.5, "completed": 2000, "total_input_tokens": 1024000,
              "total_output_tokens": 6000000, "request_throughput": 4.878, "input_throughput": 2497.6,
              "output_throughput": 312.2, "mean_e2e_latency_ms": 812.3, "median_e2e_latency_ms": 805.1,
              "mean_ttft_ms": 95.4, "median_ttft_ms": 90.3, "mean_tpot_ms": 11.4, "median_tpot_ms": 11.3,
              "mean_itl_ms": 11.4, "median_itl_ms": 11.1, "concurrency": 3.96}
    runs = tmp_path / "runs.jsonl"
    runs.write_text("\n".join([json.dumps(record)] * 6) + "\n")
    one_line(run("measured", str(runs), "-p", "llama2-7b", "--gpu", "h100-sxm"), "6 runs", "fewer runs")


def test_a_pool_left_empty_names_the_setting_that_emptied_it():
    base = ("serve", "-p", "llama2-7b", "--gpu", "h100-sxm", "-n", "4")
    one_line(run(*base, "--max-batched-tokens", "10000000"), "--max-batched-tokens", "activations")
    one_line(run(*base, "--block-size", str(2 ** 40)), "--block-size")
    one_line(run(*base, "--engine", "sglang", "--max-batched-tokens", "10000000"), "--max-batched-tokens",
             "reserve rule")
    one_line(run(*base, "--gpu-memory-utilization", "1.0000001"), "1.0000001 is not in (0, 1]")
    one_line(run("memory", "--train", "--lora", str(2 ** 40), "-p", "llama2-7b"), "--lora", "11,008")


def test_figures_worked_out_past_a_bound_and_files_name_their_own_fault(tmp_path):
    one_line(run("scale", "--params", "9.99e39", "--method", "chinchilla-3"), "--params", "past 1e+40")
    csv = tmp_path / "t.csv"
    csv.write_text("arrival,arrival,prompt,output\n0,1,100,10\n")
    one_line(run("serve", "-p", "llama2-7b", "--gpu", "h100-sxm", "--trace", str(csv)), "--trace",
             "header (line 1) names arrival twice")
    csv.write_text("arrival;prompt;output\n0;100;10\n")
    one_line(run("serve", "-p", "llama2-7b", "--gpu", "h100-sxm", "--trace", str(csv)), "--trace",
             "header (line 1) lacks arrival, prompt, output")
    csv.write_text(f"arrival,prompt,output\n0,100,{2 ** 40}\n")
    one_line(run("serve", "-p", "llama2-7b", "--gpu", "h100-sxm", "--trace", str(csv)), "--trace",
             "needs more KV memory")
    gpu = yaml.safe_load((ROOT / "presets/gpus/h100-sxm.yaml").read_text())
    gpu["peak_tflops"] = {k: 1e-6 for k in gpu["peak_tflops"]}
    slow = tmp_path / "slow.yaml"
    slow.write_text(yaml.safe_dump(gpu))
    one_line(run("mfu", "-p", "llama2-7b", "--gpu", str(slow), "--tokens-per-s", "1"), "--gpu", "peak_tflops")


def test_figures_past_a_float_and_names_that_are_no_file_say_so_in_words(tmp_path):
    """A peak whose FLOP/s overflow says so (not 'inf TFLOP/s'); 0 or null positions are refused as the field the
    user wrote; a config.json that is no file is named as such; an empty --plot is not '.'."""
    one_line(run("mfu", "-p", "llama2-7b", "--peak-tflops", "1e308", "--tokens-per-s", "1000"), "--peak-tflops",
             "beyond any float")
    config = {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100}
    path = tmp_path / "c.json"
    for field, value in (("n_positions", 0), ("n_positions", None)):
        path.write_text(json.dumps(config | {field: value}))
        one_line(run("params", "--hf-config", str(path)), f"{field} is {json.dumps(value)}", "whole number > 0;")
    folder = tmp_path / "linked"
    folder.mkdir()
    (folder / "config.json").symlink_to("/dev/zero")
    one_line(run("params", "--hf-config", str(folder)), "config.json", "not a regular file")
    one_line(run("sweep", "-p", "llama2-7b", "--gpu", "h100-sxm", "--plot", ""), "--plot", "names no file")


@pytest.mark.parametrize("config", [
    {"model_type": "bart", "d_model": None}, {"model_type": "whisper", "d_model": None},
    {"model_type": "dbrx", "d_model": None}, {"model_type": "mamba2", "head_dim": None},
    {"model_type": "jamba", "num_experts": None}, {"model_type": "ernie4_5_moe", "moe_intermediate_size": None},
    {"model_type": "ernie4_5_moe", "moe_layer_start_index": None}, {"model_type": "mamba", "expand": 1e308},
    {"model_type": "jamba", "mamba_expand": 1e308}, {"model_type": "lfm2", "block_ffn_dim_multiplier": 1e308}])
def test_a_config_field_null_or_past_any_width_is_named(tmp_path, config):
    """null where transformers' default is a number, or a multiplier that makes a width past any float: the
    field, in one line (a TypeError or an OverflowError before)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    field = next(k for k in config if k != "model_type")
    one_line(run("params", "--hf-config", str(path)), field)


def test_inputs_that_read_as_other_numbers_are_refused(tmp_path):
    """YAML 1.1's base-60 numbers (1:30 is 90), digits of other scripts, Python's underscores in a trace's seconds,
    a stray comma in --weights-format, a variant or an output named twice or not at all: each one line."""
    spec = tmp_path / "s.yaml"
    spec.write_text((ROOT / "presets/llama2-7b.yaml").read_text().replace("vocab_size: 32000", "vocab_size: 1:30"))
    one_line(run("params", "-c", str(spec)), "'1:30'", "base-60")
    one_line(run("kv", "-p", "llava-1.5-7b", "--images", "1", "--image-size", "١٠x١٠"), "--image-size")
    trace = tmp_path / "t.csv"
    trace.write_text("arrival,prompt,output\n1_0.5,100,10\n")
    one_line(run("serve", "-p", "llama2-7b", "--gpu", "h100-sxm", "--trace", str(trace)), "--trace", "'1_0.5'")
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text('{"arrival": 0, "prompt": 100.0, "output": 10}\n')
    line = one_line(run("serve", "-p", "llama2-7b", "--gpu", "h100-sxm", "--trace", str(jsonl)), "without a fraction")
    assert "not a string" not in line
    jsonl.write_text('{"arrival": 0, "prompt": 1' + "0" * 47 + ', "output": 10}\n')
    one_line(run("serve", "-p", "llama2-7b", "--gpu", "h100-sxm", "--trace", str(jsonl)), "10000000000000000000…")
    for value in (",", "experts=mxfp4,,attention=fp8"):
        one_line(run("memory", "-p", "mixtral-8x7b", "--weights-format", value), "--weights-format", "empty item")
    one_line(run("compare", "-p", "llama2-7b", "mla", "mla"), "'mla' is given twice")
    one_line(run("calibrate", "--from-runs", str(tmp_path / "runs.json"), "--out", "", "-p", "llama2-7b", "--gpu",
                 "h100-sxm"), "--out", "names no file")


def test_presets_that_crashed_run():
    """A parallel attention-and-Mamba model, a cross-attention VLM and recurrent hybrids under each command that
    broke on them (a NameError, a KeyError or an AttributeError before)."""
    for args in (["sweep", "-p", "falcon-h1-7b"], ["sweep", "-p", "llama-3.2-11b-vision", "-s", "1,1k"],
                 ["flops", "-p", "jamba-v0.1", "-s", "1k", "--attention", "causal-half"],
                 ["explain", "params", "-p", "falcon-h1-7b"], ["explain", "flops", "-p", "falcon-h1-7b"],
                 ["serve", "-p", "llama-3.2-11b-vision", "--gpu", "h200", "-n", "5", "--prompt", "100", "--output",
                  "10"]):
        r = run(*args)
        assert r.returncode == 0 and not r.stderr.strip(), (args, r.stderr[-800:])
    one_line(run("explain", "flops", "-p", "llama-3.2-11b-vision"), "not worked out yet")


def test_a_tp_derived_from_gpus_is_named_as_such_and_a_config_value_in_its_json_spelling(tmp_path):
    line = one_line(run("latency", "-p", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "3"), "32 attention heads")
    assert line.startswith("error: tp (from --gpus): 3 ")
    one_line(run("latency", "-p", "llama3-8b", "--gpu", "h100-sxm", "--tp", "3"), "error: --tp: 3 ")
    # train spreads --gpus over data-parallel replicas: its tp is never derived (it said "give tp (from --gpus)")
    one_line(run("train", "-p", "llama3-8b", "--gpu", "h100-sxm", "--sp", "--gpus", "16", "--micro-batch", "1"),
             "error: --sp:", "give --tp > 1")
    one_line(run("train", "-p", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "7", "--batch", "8", "--micro-batch",
                 "1"), "over dp (from --gpus) 7")
    config = {"model_type": "ernie4_5_moe", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
              "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 128, "moe_num_experts": 4,
              "moe_k": 2, "moe_intermediate_size": 32, "moe_layer_end_index": "x" * 60}
    (tmp_path / "config.json").write_text(json.dumps(config))
    line = one_line(run("params", "--hf-config", str(tmp_path / "config.json")), "moe_layer_end_index")
    assert f'"{"x" * 39}…' in line  # cut with an ellipsis, in JSON's quotes


def test_an_engine_whose_last_tier_leaves_a_gpu_out_and_a_billion_shared_experts_are_refused(tmp_path):
    engine = yaml.safe_load((ROOT / "presets/engines/vllm.yaml").read_text())
    engine["tiers"][-1]["not_gpus"] = ["h100-sxm"]
    (tmp_path / "e.yaml").write_text(yaml.safe_dump(engine))
    for command in (["serve", "-n", "30"], ["fit"]):
        line = one_line(run(*command, "-p", "llama3-8b", "--gpu", "h100-sxm", "--engine", str(tmp_path / "e.yaml")),
                        "not_gpus")
        assert str(tmp_path / "e.yaml") in line  # a rule across fields names the file too
    spec = yaml.safe_load((ROOT / "presets/deepseek-v3.yaml").read_text())
    spec["ffn"]["shared_experts"] = 10**9
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    one_line(run("memory", "-c", str(tmp_path / "s.yaml")), "ffn.shared_experts", "65536")


def test_a_scenario_that_sets_a_parallel_degree_to_zero_is_refused_before_it_divides(tmp_path):
    scenario = {"defaults": {"preset": "llama3-8b", "gpu": "h100-sxm"},
                "scenarios": [{"name": "a", "command": "train", "options": {"cp": 0, "gpus": 8}},
                              {"name": "b", "command": "train", "options": {"pp": 0, "gpus": 8}}]}
    for i in range(2):
        (tmp_path / "run.yaml").write_text(yaml.safe_dump(scenario | {"scenarios": [scenario["scenarios"][i]]}))
        one_line(run("run", str(tmp_path / "run.yaml")), "must be > 0")


def test_a_subnormal_figure_in_a_benchmark_result_is_refused_by_its_key(tmp_path):
    result = json.loads((ROOT / "tests/fixtures/benchmarks/vllm_bench_serve.json").read_text())
    (tmp_path / "run.json").write_text(json.dumps(result | {"mean_ttft_ms": 1e-320}))
    one_line(run("measured", str(tmp_path / "run.json"), "-f", "json"), "mean_ttft_ms", "below a normal float")


def test_benchmark_results_with_counts_or_figures_past_any_run_and_odd_units_are_one_line(tmp_path):
    result = json.loads((ROOT / "tests/fixtures/benchmarks/vllm_bench_serve.json").read_text())
    for change, needle in (({"completed": 1e308}, "completed"), ({"mean_ttft_ms": 10**400}, "beyond any float"),
                           ({"mean_ttft_ms": -80}, "below 0"), ({"total_input_tokens": -5}, "below 0")):
        (tmp_path / "run.json").write_text(json.dumps(result | change))
        one_line(run("measured", str(tmp_path / "run.json"), "--gpu", "h100-sxm", "-f", "json"), needle)
        one_line(run("calibrate", "--from-runs", str(tmp_path / "run.json"), "--gpu", "h100-sxm"), needle)
    raw = {"curves": {"gemm": [{"m": 1}]}, "runs": ["run 1"]}
    (tmp_path / "raw.json").write_text(json.dumps(raw))
    one_line(run("calibrate", "--engine", "reference", "--from-raw", str(tmp_path / "raw.json"), "--gpu", "h100-sxm"),
             "runs")


@pytest.mark.parametrize("kind, change, needle", [
    ("gpu", {"memory_gib": True}, "memory_gib: true is not a number"),
    ("gpu", {"memory_bandwidth_gbs": "3350"}, 'memory_bandwidth_gbs: "3350" is not a number'),
    ("engine", {"request_s": False}, "request_s: false is not a number"),
    ("calibration", {"kernel_s": "0.000006"}, 'kernel_s: "0.000006" is not a number'),
])
def test_a_bool_or_a_string_where_a_number_goes_is_refused(tmp_path, kind, change, needle):
    source = {"gpu": "presets/gpus/h100-sxm.yaml", "engine": "presets/engines/vllm.yaml",
              "calibration": "presets/calibration/h100-sxm.yaml"}[kind]
    data = yaml.safe_load((ROOT / source).read_text()) | change
    (tmp_path / "f.yaml").write_text(yaml.safe_dump(data))
    option = {"gpu": ["--gpu", str(tmp_path / "f.yaml")],
              "engine": ["--gpu", "h100-sxm", "--engine", str(tmp_path / "f.yaml")],
              "calibration": ["--gpu", "h100-sxm", "--calibration", str(tmp_path / "f.yaml")]}[kind]
    one_line(run("latency", "-p", "llama3-8b", *option), needle)


def test_a_number_in_exponent_form_without_a_point_is_a_number_in_yaml(tmp_path):
    """YAML 1.1 reads 1e-6 as a string; the files here read it as YAML 1.2 and JSON do, a number."""
    text = (ROOT / "presets/calibration/h100-sxm.yaml").read_text()
    lines = ["kernel_s: 6e-6" if line.startswith("kernel_s:") else line for line in text.splitlines()]
    (tmp_path / "p.yaml").write_text("\n".join(lines) + "\n")
    r = run("latency", "-p", "llama3-8b", "--gpu", "h100-sxm", "--calibration", str(tmp_path / "p.yaml"), "-f", "json")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("name, field, value", [
    ("attention_prefill", "heads", -1), ("gemm", "m", None), ("gemm", "seconds", "1"), ("gemm", "k", 1e308),
    ("gemm", "n", True), ("gemm", "a_new_size", "8"), ("gemm", "name", 5), ("mamba", "counted", [1]),
    ("mamba", "counted.calls", -5), ("mamba", "counted.launches", 1.5)])
def test_a_curve_point_that_is_no_size_or_time_is_refused_before_the_reference_fit(tmp_path, name, field, value):
    """Every field but the labels is a size or time (a field a new curve adds is checked too); labels are names;
    kernel counts are whole numbers from 0."""
    curves = json.loads((ROOT / "benchmarks/gpu/h100-2026-11-28-curves.json").read_text())
    point = curves["curves"][name][0]
    *inner, last = field.split(".")
    for key in inner:
        point = point[key]
    point[last] = value
    (tmp_path / "raw.json").write_text(json.dumps(curves))
    one_line(run("calibrate", "--engine", "reference", "--from-raw", str(tmp_path / "raw.json"), "--gpu", "h100-sxm"),
             f"curves.{name}[0].{field}")


@pytest.mark.parametrize("command, option", [
    (["serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "-n", "5"], "--rate"),
    (["latency", "-p", "llama3-8b", "--gpu", "h100-sxm"], "--compute-efficiency"),
    (["fit", "-p", "llama3-8b", "--gpu", "h100-sxm"], "--reserve")])
@pytest.mark.parametrize("text", ["1e309", "-1e400"])
def test_a_number_too_large_for_a_float_is_refused_not_read_as_inf(command, option, text):
    """1e309 is no float; read as one it is inf, which --rate takes as 'all at once'. Only inf spelt so is inf."""
    one_line(run(*command, option, text), option)


def test_rate_inf_spelt_so_is_still_all_at_once():
    r = run("serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "-n", "5", "--rate", "inf", "-f", "json")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("extra, needle", [
    (["--trace", "TRACE", "--prompt", "512"], "--prompt"),
    (["--trace", "TRACE", "--output", "64"], "--output"),
    (["--arrivals", "constant"], "--arrivals"),
    (["--concurrency", "4", "--arrivals", "poisson"], "--arrivals"),
    (["--plot-vs", "load"], "--plot-vs")])
def test_a_serve_option_that_would_be_ignored_is_refused(tmp_path, extra, needle):
    """An option the run would not read (lengths beside a trace that gives its own, arrivals with no rate to space,
    a plot axis with no plot) is refused rather than silently dropped."""
    trace = tmp_path / "t.csv"
    trace.write_text("arrival,prompt,output\n0,100,10\n0.5,200,20\n")
    args = [str(trace) if a == "TRACE" else a for a in extra]
    one_line(run("serve", "-p", "llama3-8b", "-n", "5", *args), needle)


def test_serve_options_given_where_they_are_read_still_run(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival,prompt,output\n0,100,10\n0.5,200,20\n")
    for extra in (["--trace", str(trace)], ["--rate", "2", "--arrivals", "constant", "--prompt", "512"]):
        r = run("serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "-n", "5", "-f", "json", *extra)
        assert r.returncode == 0, r.stderr


def test_a_load_curve_past_one_runs_bound_is_refused_before_any_run(tmp_path):
    """--plot-vs load runs the given load and six more: their output tokens in all are bounded as one run's are
    (100,000 requests of 300 tokens, seven times, ran for minutes)."""
    r = run("serve", "-p", "llama2-7b", "--gpu", "h100-sxm", "-n", "100000", "--output", "300", "--rate", "1000",
            "--plot", str(tmp_path / "x.png"), "--plot-vs", "load")
    one_line(r, "--requests", "load curve")
    assert not (tmp_path / "x.png").exists()


LONG = "x" * 300


@pytest.mark.parametrize("args, needle", [
    (["latency", "-p", "llama3-8b", "--gpu", LONG], "unknown GPU"),
    (["latency", "-p", "llama3-8b", "--gpu", "h100-sxm", "--engine", LONG], "unknown engine"),
    (["kv", "--hf-config", LONG], "File name too long"),
    (["kv", "--config", LONG + ".yaml"], "File name too long"),
    (["latency", "-p", "llama3-8b", "--gpu", ""], "the name is empty")])
def test_a_name_too_long_for_the_file_system_or_empty_is_a_name_error_not_a_write_error(args, needle):
    """A 300-character name was reported as a failed write ("free space or write somewhere ..."), naming no option,
    and echoed whole; an empty --gpu was "is a folder"."""
    line = one_line(run(*args), needle)
    assert "free space" not in line and LONG not in line


@pytest.mark.parametrize("args, needle", [
    (["compare", "mha", "mqa", "--groups", "8"], "--groups"),
    (["compare", "gqa", "mla", "--window", "1024"], "--window"),
    (["compare", "-p", "llama2-7b", "-p", "gpt2", "--groups", "4"], "--groups"),
    (["serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "-n", "5", "--spec-tokens", "7"], "--spec-tokens"),
    (["serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "-n", "5", "--acceptance", "0.1"], "--acceptance"),
    (["memory", "-p", "llama3-8b", "--optimizer", "sgd"], "--optimizer"),
    (["memory", "-p", "llama3-8b", "--grad-dtype", "fp32"], "--grad-dtype"),
    (["memory", "-p", "llama3-8b", "--dropout"], "--dropout"),
    (["memory", "-p", "llama3-8b", "--recompute", "full"], "--recompute"),
    (["kv", "-p", "llama3-8b", "--image-size", "896x896"], "--image-size"),
    (["latency", "-p", "llama3-8b", "--gpu", "h100-sxm", "--expert-skew", "9"], "--expert-skew"),
    (["scale", "--params", "70B", "--compute-dtype", "fp8"], "--gpu"),
    (["compare", "gqa", "mla", "--engine", "vllm"], "--engine"),
    (["sweep", "-p", "llama3-8b", "--time-model", "roofline"], "--time-model"),
    (["scale", "--params", "７０B"], "--params"),
    (["plan", "-p", "llama3-8b", "--rate", "1", "--slo-ttft", "1", "--price", "h100-sxm=1_000"], "--price")])
def test_an_option_that_would_change_nothing_is_refused(args, needle):
    """An option the command would not read here (a swap knob no variant compared reads, speculative decoding's
    shape without a drafter, a training option without --train, an image size without images, an expert skew
    without expert parallelism, a time model or engine without a GPU) is refused rather than dropped; a number in
    other than plain ASCII digits is no number, as with every count."""
    one_line(run(*args), needle)


@pytest.mark.parametrize("args", [
    ["compare", "gqa", "mla", "--groups", "8", "--kv-lora-rank", "256"],
    ["compare", "swa", "longformer", "--window", "1024", "--global-tokens", "16"],
    ["memory", "-p", "llama3-8b", "--train", "--optimizer", "sgd", "--recompute", "full", "--dropout"],
    ["scale", "--params", "70B", "--gpu", "h100-sxm", "--compute-dtype", "fp8"]])
def test_the_same_options_where_they_are_read_run(args):
    r = run(*args, "-f", "json")
    assert r.returncode == 0, r.stderr


def test_two_gpus_of_one_name_in_a_plan_are_refused(tmp_path):
    """A GPU file named as a preset (or as another file) made two GPUs the plan could not tell apart: it listed
    both under one name, and a candidate of one was simulated on the other (a traceback)."""
    shadow = tmp_path / "shadow.yaml"
    shadow.write_text((Path(__file__).parents[1] / "presets" / "gpus" / "h100-sxm.yaml").read_text()
                      .replace("name: h100-sxm", "name: a100-80gb"))
    r = run("plan", "-p", "llama2-7b", "--gpu", str(shadow), "--gpu", "a100-80gb", "--rate", "2", "--slo-tpot",
            "0.05", "--max-gpus", "1")
    one_line(r, "--gpu", "'a100-80gb'", "a name of its own")
    same = tmp_path / "same.yaml"  # one GPU given twice, as a preset and as a copy of its file: one GPU
    same.write_text((Path(__file__).parents[1] / "presets" / "gpus" / "h100-sxm.yaml").read_text())
    r = run("plan", "-p", "llama2-7b", "--gpu", str(same), "--gpu", "h100-sxm", "--rate", "2", "--slo-tpot", "0.05",
            "--max-gpus", "1", "-f", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["gpus"] == ["h100-sxm"], r.stderr


def test_train_refuses_a_quantised_checkpoint_as_memory_does_unless_a_dtype_is_given(tmp_path, hf_fixture):
    """`train` ran a checkpoint that ships quantised as bf16 without a word (its --weights-dtype defaulted to bf16),
    citing a memory figure `memory --train` refuses to give; now both refuse it, and --weights-dtype bf16 trains
    the unquantised model."""
    folder = tmp_path / "q"
    folder.mkdir()
    config = json.loads((hf_fixture("llama3-8b") / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": 128}
    (folder / "config.json").write_text(json.dumps(config))
    base = ("--hf-config", str(folder), "--gpu", "h100-sxm", "--gpus", "8", "--zero", "1", "--micro-batch", "1",
            "--batch", "64")
    one_line(run("train", *base), "--weights-dtype", "training quantised weights (gptq-int4-g128")
    assert run("train", *base, "--weights-dtype", "bf16", "-f", "json").returncode == 0


def test_lengths_take_the_suffix_every_count_takes():
    """`--prompt 4k` was refused as 'not a length from 1 to 1,099,511,627,776' while --seq 4k and a trace's cells
    read it as 4,096."""
    args = ("serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "-n", "5", "-f", "json")
    k = json.loads(run(*args, "--prompt", "4k", "--output", "uniform:1k,2k").stdout)
    n = json.loads(run(*args, "--prompt", "4096", "--output", "uniform:1024,2048").stdout)
    assert k["ttft_s"] == n["ttft_s"] and k["output_tokens_per_s"] == n["output_tokens_per_s"]
    one_line(run(*args, "--prompt", "４k"), "--prompt")


@pytest.mark.parametrize("args, needle", [
    (["serve", "-p", "llama2-7b", "--gpu", "h100-sxm", "-n", "5", "--force"], "--force"),
    (["sweep", "-p", "llama2-7b", "--force"], "--force"),
    (["sweep", "-p", "llama2-7b", "--bars", "--format", "json"], "--bars"),
    (["memory", "-p", "llama2-7b", "--group-size", "64"], "--group-size"),
    (["latency", "-p", "llama2-7b", "--gpu", "h100-sxm", "--weights-dtype", "fp8", "--group-size", "64"],
     "--group-size"),
    (["memory", "-p", "llama2-7b", "--weights-format", "int4-g64", "--group-size", "64"], "--group-size")])
def test_output_and_quantisation_options_that_would_change_nothing_are_refused(args, needle):
    """--force with no file to overwrite, --bars with no table to draw them in, --group-size with no int4 weights
    to group: each ran and changed nothing (byte-identical output)."""
    one_line(run(*args), needle)


def test_group_size_still_groups_int4():
    args = ("memory", "-p", "llama2-7b", "--weights-dtype", "int4", "-f", "json")
    g64, g128 = (json.loads(run(*args, *extra).stdout)["weights_bytes"] for extra in (("--group-size", "64"), ()))
    assert g64 > g128


def test_an_fp8_config_without_a_block_size_is_per_tensor(tmp_path, hf_fixture):
    """quant_method fp8 with no weight_block_size (AutoFP8's and vLLM's own checkpoints: one scale per matrix, as
    vLLM's Fp8Config reads it) was sized as 128 × 128 blocks."""
    from llmcalc.inputs.hf import load_hf_config

    config = json.loads((hf_fixture("llama3-8b") / "config.json").read_text())
    for block, name in ((None, "fp8-tensor"), ([128, 128], "fp8-block")):
        q = {"quant_method": "fp8", "activation_scheme": "static"} | ({"weight_block_size": block} if block else {})
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(config | {"quantization_config": q}))
        assert load_hf_config(path).checkpoint.formats.default == name


def test_emit_when_nothing_met_the_targets_is_a_plan_that_says_so():
    """--emit with no deployment listed said '--candidate: 1 is past the list' (exit 2) for a --candidate never
    given; a plan without --emit exits 0 there. Now it exits 0 and says no commands were written; a --candidate
    given past the list is still refused."""
    args = ("plan", "-p", "llama2-7b", "--gpu", "h100-sxm", "--rate", "2", "--slo-tpot", "0.0001", "--max-gpus", "1",
            "--emit", "vllm")
    r = run(*args, "-f", "json")
    assert r.returncode == 0 and any("no vllm commands written" in n for n in json.loads(r.stdout)["notes"])
    one_line(run(*args, "--candidate", "1"), "--candidate", "past the list")


def test_emitted_commands_are_printed_whole_at_80_columns(tmp_path, hf_fixture):
    """A command's long words (a placeholder model, a result file named after it) were folded mid-word at 80
    columns, so a pasted command broke; each line is now printed whole, and a deployment the engine cannot run
    asks for no placeholder to be replaced."""
    folder = tmp_path / ("a-long-model-name-" * 4 + "fp8")
    shutil.copytree(hf_fixture("llama3-8b"), folder)
    args = ("plan", "--hf-config", str(folder), "--gpu", "h100-sxm", "--rate", "2", "--slo-tpot", "0.05",
            "--max-gpus", "1")
    r = subprocess.run([sys.executable, "-m", "llmcalc", *args, "--emit", "vllm"], capture_output=True, text=True,
                       timeout=TIMEOUT, env=os.environ | {"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    e = json.loads(run(*args, "--emit", "vllm", "-f", "json").stdout)["emit"]
    assert len(e["result_file"]) > 80 and f"  --result-filename {e['result_file']}" in r.stdout.splitlines()
    long_prompt = json.loads(run(*args, "--emit", "vllm", "--prompt", "9000", "-f", "json").stdout)["emit"]
    assert long_prompt["unsupported"] and not long_prompt["notes"]


@pytest.mark.parametrize("args, needles", [
    (("scale", "--params", "7e9", "--gpu", "h100-sxm", "--gpus", "1" + "0" * 400), ("--gpus", "too large")),
    (("scale", "--params", "7e9", "--gpu", "h100-sxm", "--gpus", "99999999999"), ("--gpus", "1,048,576")),
    (("scale", "--params", "7e9", "--gpu", "h100-sxm", "--price", "1e-320"), ("--price", "smallest normal float")),
    (("scale", "--params", "7e9", "--gpu", "h100-sxm", "--mfu", "1e-320"), ("--mfu", "smallest normal float")),
    (("scale", "--params", "1e-300"), ("--params", "not a count of at least 1")),  # was "not a positive count"
    (("moe", "-p", "mixtral-8x7b", "--capacity-factor", "5e-324"), ("--capacity-factor", "where the option takes it")),
    (("plan", "-p", "llama3-8b", "--gpu", "h100-sxm", "--rate", "1", "--slo-ttft", "2", "--price",
      "h100-sxm=1e-320"), ("--price", "1e-06")),
])
def test_scale_and_plan_bound_their_gpu_count_and_price_as_every_command_does(args, needles):
    """scale --gpus of 401 digits was a traceback (OverflowError) and 10^11 GPUs ran; a subnormal price or mfu ran
    to a cost of $0; GPU counts are at most 2^20 and figures at least a millionth everywhere else. A count below 1
    is not called "not positive", and a subnormal is not offered 0 where the option refuses it."""
    one_line(run(*args), *needles)


def test_scale_gpus_take_the_suffix_every_count_takes(cli_json):
    assert cli_json("scale", "--params", "7e9", "--gpu", "h100-sxm", "--gpus", "1k")["gpus"] == 1024


@pytest.mark.parametrize("model", ["bert-base-uncased", "flan-t5-base"])
def test_compare_names_the_model_it_cannot_compare(model):
    """Among many models, 'model: an encoder-only model …' did not say which."""
    one_line(run("compare", "-p", "llama2-7b", "-p", model), f"compare {model}: ")


@pytest.mark.parametrize("kind, name", [("spec", "\x1b[31mred\x1b[0m"), ("spec", "a\nb"), ("gpu", "x\x07y")])
def test_a_name_with_a_control_character_is_refused(tmp_path, kind, name):
    """A spec named with an escape sequence drove the terminal `kv`'s table was printed on, and a newline split
    `params`' headline; a name is printable text."""
    path = tmp_path / f"{kind}.yaml"
    if kind == "spec":
        path.write_text(yaml.safe_dump(yaml.safe_load((ROOT / "presets/llama2-7b.yaml").read_text()) | {"name": name}))
        r = run("kv", "-c", str(path))
    else:
        path.write_text(yaml.safe_dump(yaml.safe_load((ROOT / "presets/gpus/h100-sxm.yaml").read_text()) | {"name": name}))
        r = run("latency", "-p", "gpt2", "--gpu", str(path))
    assert "\x1b" not in one_line(r, "name: holds the control character")


def test_a_raw_file_that_is_a_device_and_an_empty_trace_name_say_what_they_are():
    one_line(run("calibrate", "--engine", "reference", "--from-raw", "/dev/zero"), "not a regular file")
    one_line(run("serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "--trace", ""), "--trace", "folder or an empty name")


def test_a_cpu_validation_counts_the_attention_scores_torch_builds_on_the_cpu(monkeypatch):
    """validate --device cpu passed its memory check and then asked torch for 34 GB of attention scores (batch 8,
    4 heads, 16k² fp32) and died with a traceback: the check counts them, on a machine of 64 GiB as on any."""
    import os

    from llmcalc.inputs.presets import load_preset
    from llmcalc.views.validate import check_real_run, scaled_copy

    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": 64 * 2**30 // 4096}
    monkeypatch.setattr(os, "sysconf", lambda name: pages[name])
    small = scaled_copy(load_preset("llama3-8b"), 1, 8)
    with pytest.raises(UserError, match=r"needs about 35\.\d GB, more than half of this machine's memory"):
        check_real_run(small, 8, 16384, "cpu")
    check_real_run(small, 8, 4096, "cpu")  # a quarter of the context: a sixteenth of the scores


def test_a_curves_file_of_more_points_than_a_calibration_writes_is_refused_before_the_fit(tmp_path):
    """The bundled H100 curves file repeated 300 times (54.6 MB, under the 64 MiB bound) kept the fit busy past a
    minute; a file holds at most MAX_CURVE_POINTS points."""
    import json

    from llmcalc.inputs.raw_timings import MAX_CURVE_POINTS

    data = json.loads((ROOT / "benchmarks/gpu/h100-2026-11-28-curves.json").read_text())
    first = next(k for k, v in data["curves"].items() if isinstance(v, list) and v)
    data["curves"][first] = data["curves"][first] * (MAX_CURVE_POINTS // len(data["curves"][first]) + 1)
    path = tmp_path / "curves.json"
    path.write_text(json.dumps(data))
    one_line(run("calibrate", "--engine", "reference", "--from-raw", str(path)), "--from-raw", "20,000")


def test_a_step_budget_from_an_engine_file_says_it_is_the_engines(tmp_path):
    """An engine file whose tiers set a step of 2^40 tokens was refused as if --max-batched-tokens had been given;
    the refusal says whose default it was (giving the option still fixes it)."""
    text = (ROOT / "presets/engines/vllm.yaml").read_text()
    for budget in ("16384", "8192", "2048"):
        text = text.replace(f"max_num_batched_tokens: {budget}", "max_num_batched_tokens: 1099511627776")
    path = tmp_path / "engine.yaml"
    path.write_text(text)
    args = ("serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "--rate", "1", "-n", "10")
    one_line(run(*args, "--engine", str(path)), "--max-batched-tokens", "(vLLM's default on h100-sxm)")
    assert "default" not in one_line(run(*args, "--max-batched-tokens", "1000000000"), "--max-batched-tokens")


def test_weights_that_a_larger_engine_share_would_hold_name_the_share(tmp_path):
    """An engine file whose memory share is a millionth was refused as "more than the 0.0 GB usable", naming only
    --gpus; the refusal says the share was the engine's and names the option that sets it. Weights no share could
    hold on one GPU are not told to raise it."""
    text = (ROOT / "presets/engines/vllm.yaml").read_text().replace("memory_utilization: 0.92",
                                                                     "memory_utilization: 1.0e-6")
    path = tmp_path / "engine.yaml"
    path.write_text(text)
    args = ("serve", "--gpu", "h100-sxm", "--rate", "1", "-n", "10")
    one_line(run(*args, "-p", "llama3-8b", "--engine", str(path)), "--gpus", "--gpu-memory-utilization",
             "vLLM takes 1e-06")
    assert "--gpu-memory-utilization" not in one_line(run(*args, "-p", "llama3.1-70b"), "--gpus", "--tp 2")


def test_a_gpu_or_engine_file_nested_too_deep_is_not_called_a_spec(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("a: " + "[" * 200 + "]" * 200 + "\n")
    for given in (["--gpu", str(path)], ["--gpu", "h100-sxm", "--engine", str(path)]):
        line = one_line(run("serve", "-p", "llama3-8b", "--rate", "1", "-n", "5", *given), "nested more than")
        assert "spec" not in line and line.startswith(f"error: {given[-2][2:]} file"), line


def test_runs_of_one_output_token_fit_without_a_tpot_and_token_totals_are_counts(tmp_path):
    """A prefill-only benchmark (200 requests, 200 output tokens) records a TPOT of nothing to predict: the fit
    left step_s as it was, by a KeyError traceback; now it says why. A total of 1.5 or of fewer tokens than
    requests was read as output 1."""
    doc = json.loads((ROOT / "tests/fixtures/benchmarks/vllm_bench_serve.json").read_text())
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc | {"total_output_tokens": doc["completed"]}))
    r = run("calibrate", "--from-runs", str(path), "--gpu", "h100-sxm")
    assert r.returncode == 0, r.stderr[-800:]
    line = next(x for x in r.stderr.splitlines() if x.startswith("step_s: "))
    assert "(left as it was: the runs record TPOT or ITL but their requests predict none" in line, r.stderr
    for total, needle in ((1.5, "not a count"), (0, "under one token a request"),
                          (doc["completed"] - 1, "under one token a request")):
        path.write_text(json.dumps(doc | {"total_output_tokens": total}))
        one_line(run("measured", str(path), "--gpu", "h100-sxm"), "total_output_tokens", needle)
