"""The Python API (`import llmcalc`) against the CLI as a user meets it: each function's report, dumped to JSON,
is the command's `--format json` output for the same inputs; every way of naming a model gives the same answer;
bad input raises llmcalc.UserError with the line the CLI prints; `import llmcalc` stays free of torch, typer and
rich; the examples of docs/python.md run and print what the page shows."""

from __future__ import annotations

import doctest
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import llmcalc
from llmcalc import UserError

ROOT = Path(__file__).parents[1]
BENCH = ROOT / "tests" / "fixtures" / "benchmarks"
VLLM, SGLANG, TRTLLM = (str(BENCH / name) for name in ("vllm_bench_serve.json", "sglang_bench_serving.jsonl",
                                                       "trtllm_bench_report.json"))
AIPERF = "aiperf__wellflat__gpt-oss-20b-vllm-a100-telemetry.json"
MARK = re.compile(r"`([a-z][a-z0-9_]*)`")


def flag(field: str) -> str:
    """The CLI's flag for an API keyword (the one that differs: lora_rank is --lora)."""
    return "--lora" if field == "lora_rank" else "--" + field.replace("_", "-")


def as_cli(value, keywords):
    """A report's JSON with each field a note marks that is one of the function's `keywords` (`groups`) written as
    the command writes its flag (--groups); other marks (`positions`, a JSON field) stay, as the command leaves
    them."""
    if isinstance(value, str):
        return MARK.sub(lambda m: flag(m[1]) if m[1] in keywords else m[0], value)
    if isinstance(value, list):
        return [as_cli(v, keywords) for v in value]
    if isinstance(value, dict):
        return {k: as_cli(v, keywords) for k, v in value.items()}
    return value


CASES = [
    ("params", ("llama2-7b",), {"bytes": True}, "params -p llama2-7b --bytes"),
    ("kv", ("llama2-7b",), {"batch": 64, "seq": 32768, "kv_dtype": "fp8"},
     "kv -p llama2-7b -b 64 -s 32k --kv-dtype fp8"),
    ("flops", ("deepseek-v3",), {"batch": 2, "seq": 2048, "gen": 16, "mla_decode": "decompress"},
     "flops -p deepseek-v3 -b 2 -s 2048 -g 16 --mla-decode decompress"),
    ("flops", ("llama3-8b",), {"lora_rank": 16, "lora_targets": "q,v", "recompute": "full"},
     "flops -p llama3-8b --lora 16 --lora-targets q,v --recompute full"),
    ("memory", ("llama3-8b",), {"train": True, "batch": 8, "tp": 2, "zero": 1, "dp": 2},
     "memory -p llama3-8b --train -b 8 --tp 2 --zero 1 --dp 2"),
    ("memory", ("llama3-8b",), {"qlora": True, "lora_rank": 8, "train": True},
     "memory -p llama3-8b --qlora --lora 8 --train"),
    ("latency", ("llama3-8b", "h100-sxm"), {"batch": 8, "seq": 2048, "gen": 128, "kv_dtype": "fp8", "tp": 2,
                                           "interval": True},
     "latency -p llama3-8b --gpu h100-sxm -b 8 -s 2048 -g 128 --kv-dtype fp8 --tp 2 --interval"),
    ("latency", ("llama3-8b", "a100-80gb"), {"time_model": "roofline", "compute_efficiency": 0.6},
     "latency -p llama3-8b --gpu a100-80gb --time-model roofline --compute-efficiency 0.6"),
    ("fit", ("llama3-8b", "h100-sxm"), {"seq": 8192, "weights_dtype": "fp8"},
     "fit -p llama3-8b --gpu h100-sxm -s 8192 --weights-dtype fp8"),
    ("compare", (None, ["gqa", "mla"]), {"seq": 8192, "groups": 4}, "compare gqa mla -s 8192 --groups 4"),
    ("compare", (["llama2-7b", "mistral-7b"],), {"gpu": "h100-sxm"},
     "compare -p llama2-7b -p mistral-7b --gpu h100-sxm"),
    ("explain", ("flops", "llama2-7b"), {"seq": 1024}, "explain flops -p llama2-7b -s 1024"),
    ("sweep", ("llama2-7b",), {"seq": [1024, 4096], "batch": "1,8", "gpu": "h100-sxm"},
     "sweep -p llama2-7b -s 1k,4k -b 1,8 --gpu h100-sxm"),
    ("moe", ("mixtral-8x7b",), {"batch": 4, "seq": 1024, "capacity_factor": 1.25},
     "moe -p mixtral-8x7b -b 4 -s 1024 --capacity-factor 1.25"),
    ("train", ("llama3-8b", "h100-sxm"), {"gpus": 64, "zero": 1, "micro_batch": 1, "recompute": "selective"},
     "train -p llama3-8b --gpu h100-sxm --gpus 64 --zero 1 --micro-batch 1 --recompute selective"),
    ("mfu", ("llama3-8b",), {"batch": 512, "step_time": 6.5, "gpus": 64, "gpu": "h100-sxm"},
     "mfu -p llama3-8b -b 512 --step-time 6.5 --gpus 64 --gpu h100-sxm"),
    ("serve", ("llama3-8b", "h100-sxm"), {"requests": 60, "rate": 4.0, "prompt": "uniform:128,1024", "output": 64,
                                         "slo_ttft": 0.5},
     "serve -p llama3-8b --gpu h100-sxm -n 60 --rate 4 --prompt uniform:128,1024 --output 64 --slo-ttft 0.5"),
    ("plan", ("llama3-8b",), {"rate": 2.0, "slo_ttft": 2.0, "requests": 40, "top": 2},
     "plan -p llama3-8b --rate 2 --slo-ttft 2 -n 40 --top 2"),
    ("measured", ([VLLM, TRTLLM],), {"gpu": "h100-sxm", "requests": 40},
     f"measured {VLLM} {TRTLLM} --gpu h100-sxm --requests 40"),
    ("measured", (SGLANG, "llama3-8b", "h100-sxm"), {"tp": 2, "kv_dtype": "fp8", "output": 64, "seed": 3},
     f"measured {SGLANG} -p llama3-8b --gpu h100-sxm --tp 2 --kv-dtype fp8 --output 64 --seed 3"),
    ("scale", (), {"params": "70B", "gpu": "h100-sxm", "gpus": 1024}, "scale --params 70B --gpu h100-sxm --gpus 1024"),
    ("scale", (), {"flops": 5.76e23, "method": "kaplan"}, "scale --flops 5.76e23 --method kaplan"),
    ("validate", ("tiny-decoder-example",), {"batch": 1, "seq": 64}, "validate -p tiny-decoder-example -b 1 -s 64"),
    ("validate", (["tiny-decoder-example", "gpt2"],), {"seq": 256}, "validate -p tiny-decoder-example -p gpt2 -s 256"),
    ("validate", ("gpt2",), {"train": True, "lora_rank": 4, "lora_targets": "q,v"},
     "validate -p gpt2 --train --lora 4 --lora-targets q,v"),
]


@pytest.mark.parametrize("name, args, kwargs, command", CASES, ids=[c[3] for c in CASES])
def test_a_function_returns_the_report_the_command_prints(name, args, kwargs, command, cli_json):
    if name == "validate":
        pytest.importorskip("torch")
    function = getattr(llmcalc, name)
    report = function(*args, **kwargs)
    keywords = set(inspect.signature(function).parameters)
    assert as_cli(report.model_dump(mode="json"), keywords) == cli_json(*command.split())


def test_measured_real_runs_as_the_command_reads_them(shared, cli_json):
    """A published AIPerf file (its telemetry names the GPU, its model the preset): the file's own model, GPU,
    load and lengths, as a str path and as a Path."""
    path = shared("benchmark-runs") / AIPERF
    cli = cli_json("measured", str(path), "--engine", "vllm")
    for given in (str(path), path, [path]):
        report = llmcalc.measured(given, engine="vllm")
        assert report.model_dump(mode="json") == cli
    [run] = report.runs
    assert (run.model, run.gpu, run.load) == ("gpt-oss-20b", "a100-80gb", "concurrency 1")


def test_calibrate_from_runs_returns_the_profile_the_command_prints(cli):
    """The refit's profile file is the command's stdout, its lines the command's stderr; nothing is written."""
    import yaml

    r = cli("calibrate", "--from-runs", SGLANG, "--preset", "llama3-8b", "--gpu", "h100-sxm")
    assert r.returncode == 0, r.stderr
    refit = llmcalc.calibrate_from_runs(SGLANG, "llama3-8b", "h100-sxm")
    assert refit.text() == r.stdout
    assert [f"{line}\n" for line in refit.lines] == r.stderr.splitlines(keepends=True)
    profile = yaml.safe_load(r.stdout)
    assert profile["gpu"] == refit.profile.gpu == "h100-sxm" and profile["step_s"] == refit.profile.step_s
    assert refit.profile.name == "calibrated"


def test_calibrate_from_runs_takes_the_options_of_its_command():
    """--from-runs, --gpu and --served-by with their defaults; --preset is `model`, as for every function."""
    import typer.main

    from llmcalc.cli import load_commands

    command = typer.main.get_command(load_commands(["calibrate"])).commands["calibrate"]
    keywords = inspect.signature(llmcalc.calibrate_from_runs).parameters
    defaults = {p.name: p.default for p in command.params}
    for name in ("gpu", "served_by"):
        assert keywords[name].default == defaults[name]
    assert "from_runs" in keywords and keywords["model"].default is None and defaults["preset"] is None


def test_paths_may_be_text_or_path_objects(tmp_path, cli_json):
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival,prompt,output\n0,100,10\n0.5,2000,20\n1.5,300,5\n")
    cli = cli_json("serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "--trace", str(trace))
    for given in (str(trace), trace):
        assert llmcalc.serve("llama3-8b", "h100-sxm", trace=given).model_dump(mode="json") == cli


def test_every_function_is_public_documented_and_covered():
    assert set(llmcalc.COMMANDS) <= set(llmcalc.__all__)
    assert {c[0] for c in CASES} == set(llmcalc.COMMANDS)
    for name in llmcalc.__all__:
        assert getattr(llmcalc, name).__doc__, name
    with pytest.raises(AttributeError):
        llmcalc.no_such_name  # noqa: B018


def test_every_way_of_naming_a_model_gives_the_same_answer(hf_fixture):
    folder = hf_fixture("llama2-7b")
    spec_file = ROOT / "presets" / "llama2-7b.yaml"
    forms = ["llama2-7b", str(spec_file), spec_file, folder, str(folder / "config.json"),
             llmcalc.load_model("llama2-7b"), llmcalc.ModelRef(hf_config=folder)]
    counts = {json.dumps({k: v for k, v in llmcalc.params(m).model_dump(mode="json").items() if k != "model"})
              for m in forms}
    assert len(counts) == 1
    caches = {llmcalc.kv(m, batch=4, seq=1000).model_dump(mode="json")["total_bytes"] for m in forms}
    assert len(caches) == 1


def test_a_config_json_counts_as_transformers_builds_it(hf_fixture):
    """The model read from a Hugging Face folder counts as transformers' own model of it (meta device)."""
    pytest.importorskip("torch")
    from hf_counts import transformers_counts

    folder = hf_fixture("llama3-8b")
    assert llmcalc.params(folder).total == transformers_counts(folder)["total"]


BAD = [
    ("latency", ("llama2-7b", "h100-sxm"), {"tp": 3}, "latency -p llama2-7b --gpu h100-sxm --tp 3"),
    ("latency", ("llama2-7b",), {}, "latency -p llama2-7b"),
    ("latency", ("llama2-7b", "h100-sxm"), {"compute_efficiency": 2.0},
     "latency -p llama2-7b --gpu h100-sxm --compute-efficiency 2"),
    ("kv", ("llama2-7b",), {"image_size": "12"}, "kv -p llama2-7b --image-size 12"),
    ("kv", ("llama-7b",), {}, "kv -p llama-7b"),
    ("memory", ("llama3-8b",), {"qlora": True}, "memory -p llama3-8b --qlora"),
    ("memory", ("llama3-8b",), {"train": True, "prefill_chunk": 512},
     "memory -p llama3-8b --train --prefill-chunk 512"),
    ("flops", ("llama3-8b",), {"recompute": "selective", "recompute_ops": "qkv"},
     "flops -p llama3-8b --recompute selective --recompute-ops qkv"),
    ("explain", ("foo", "llama2-7b"), {}, "explain foo -p llama2-7b"),
    ("mfu", ("llama3-8b",), {"tokens_per_s": 1e5}, "mfu -p llama3-8b --tokens-per-s 1e5"),
    ("serve", ("llama3-8b", "h100-sxm"), {"rate": 5.0, "concurrency": 3},
     "serve -p llama3-8b --gpu h100-sxm --rate 5 --concurrency 3"),
    ("plan", ("llama3-8b",), {"rate": 2.0}, "plan -p llama3-8b --rate 2"),
    ("sweep", ("llama2-7b",), {"attention": ","}, "sweep -p llama2-7b --attention ,"),
    ("measured", (SGLANG,), {"gpu": "h100-sxm"}, f"measured {SGLANG} --gpu h100-sxm"),
    ("measured", (VLLM,), {"gpu": "h100-sxm", "rate": 2.0, "concurrency": 3},
     f"measured {VLLM} --gpu h100-sxm --rate 2 --concurrency 3"),
    ("measured", (TRTLLM, "llama3-8b"), {"tp": 3}, f"measured {TRTLLM} -p llama3-8b --tp 3"),
    ("scale", (), {"params": 70e9, "tokens": "1T"}, "scale --params 70B --tokens 1T"),
    ("scale", (), {"tokens": "1.4T", "gpu": "h100-sxm", "mfu": 1.5}, "scale --tokens 1.4T --gpu h100-sxm --mfu 1.5"),
    ("scale", (), {"params": 70e9, "price": 3.0}, "scale --params 70B --price 3"),
    ("validate", ("tiny-decoder-example",), {"lora_rank": 8}, "validate -p tiny-decoder-example --lora 8"),
    ("validate", ("tiny-decoder-example",), {"train": True}, "validate -p tiny-decoder-example --train"),
    ("validate", ("tiny-decoder-example",), {"batch": 0}, "validate -p tiny-decoder-example --batch 0"),
    ("calibrate_from_runs", (SGLANG,), {"gpu": "h100-sxm"}, f"calibrate --from-runs {SGLANG} --gpu h100-sxm"),
    ("calibrate_from_runs", ([VLLM, TRTLLM],), {"gpu": "a100-80gb"},
     f"calibrate --from-runs {VLLM} --from-runs {TRTLLM} --gpu a100-80gb"),
]


@pytest.mark.parametrize("name, args, kwargs, command", BAD, ids=[c[3] for c in BAD])
def test_bad_input_raises_user_error_with_the_line_the_cli_prints(name, args, kwargs, command, cli):
    with pytest.raises(UserError) as e:
        getattr(llmcalc, name)(*args, **kwargs)
    r = cli(*command.split())
    assert r.returncode == 2
    assert r.stderr == f"error: {e.value.worded(flag)}\n"
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("call", [
    lambda: llmcalc.kv(123),
    lambda: llmcalc.kv("llama2-7b", kv_dtype="fp9"),
    lambda: llmcalc.kv("llama2-7b", batch=0),
    lambda: llmcalc.latency("llama2-7b", "h100-sxm", reserve=float("nan")),
    lambda: llmcalc.kv(Path("no/such/spec.yaml")),
    lambda: llmcalc.sweep(None),
])
def test_bad_input_never_escapes_as_anything_but_user_error(call):
    with pytest.raises(UserError) as e:
        call()
    assert "\n" not in str(e.value) and str(e.value)


def test_import_llmcalc_and_a_call_load_neither_torch_nor_typer_nor_rich():
    code = ("import sys, llmcalc\nbefore = set(sys.modules)\n"
            "llmcalc.latency('llama3-8b', 'h100-sxm', tp=2)\nllmcalc.sweep('llama2-7b', seq=[1024], gpu='h100-sxm')\n"
            "llmcalc.serve('llama3-8b', 'h100-sxm', requests=10)\n"
            "print(sorted(before & {'pydantic', 'yaml', 'llmcalc.api'}))\n"
            "print(sorted(m.split('.')[0] for m in sys.modules if m.split('.')[0] in "
            "{'torch', 'typer', 'rich', 'click', 'matplotlib', 'transformers'}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["[]", "[]"]


def test_the_examples_of_docs_python_md_print_what_the_page_shows(monkeypatch):
    monkeypatch.chdir(ROOT)
    result = doctest.testfile(str(ROOT / "docs" / "python.md"), module_relative=False, verbose=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 5
    assert result.failed == 0, "docs/python.md: an example prints something else (see the output above)"


CLI_ONLY = {"preset", "config", "hf_config", "hf_model", "hf_generic", "format", "units", "plot", "plot_vs", "force",
            "bars", "detail"}
"""Options of the command line that are no input of a function: the model's spellings (one `model` there),
how the report is printed, and the plot files."""


@pytest.mark.parametrize("name", llmcalc.COMMANDS)
def test_a_function_takes_every_option_of_its_command_with_its_default(name):
    import typer.main

    from llmcalc.cli import load_commands

    command = typer.main.get_command(load_commands([name])).commands[name]
    keywords = inspect.signature(getattr(llmcalc, name)).parameters
    for p in command.params:
        if p.name in CLI_ONLY:
            continue
        assert p.name in keywords, f"{name}: --{p.name} has no keyword"
        default = keywords[p.name].default
        if default is inspect.Parameter.empty:  # required in Python (explain's topic): the command refuses none
            continue
        assert default == p.default or (default is None and p.default in (None, ())), (name, p.name, default,
                                                                                        p.default)


KINDS = [
    (lambda: llmcalc.latency("llama3-8b", "h100-sxm", gpus="8"), "`gpus`"),
    (lambda: llmcalc.latency("llama3-8b", "h100-sxm", gpus=2.0), "`gpus`"),  # a float is no count
    (lambda: llmcalc.train("llama3-8b", "h100-sxm", zero=True), "`zero`"),  # a bool is no number
    (lambda: llmcalc.plan("llama3-8b", rate=1, slo_ttft=1, top=float("nan")), "`top`"),
    (lambda: llmcalc.mfu("llama3-8b", gpu="h100-sxm", tokens_per_s="1000"), "`tokens_per_s`"),
    (lambda: llmcalc.fit("llama3-8b", "h100-sxm", reserve="0.1"), "`reserve`"),
    (lambda: llmcalc.memory("llama3-8b", lora_targets=["q"]), "`lora_targets`"),
    (lambda: llmcalc.latency("llama3-8b", ["h100-sxm"]), "`gpu`"),
    (lambda: llmcalc.latency("llama3-8b", "h100-sxm", engine=1), "`engine`"),
    (lambda: llmcalc.latency("llama3-8b", "h100-sxm", calibration=1), "`calibration`"),
    (lambda: llmcalc.serve("llama3-8b", "h100-sxm", trace="a\0b"), "`trace`"),
    (lambda: llmcalc.plan("llama3-8b", rate=1, slo_ttft=1, price=2.5), "`price`"),
    (lambda: llmcalc.measured([]), "`files`"),
    (lambda: llmcalc.calibrate_from_runs([]), "`from_runs`"),
    (lambda: llmcalc.compare("llama2-7b", {"mha": 1}), "`variants`"),
    (lambda: llmcalc.validate("llama3-8b", device="bogus"), "`device`"),
]


@pytest.mark.parametrize("call, field", KINDS, ids=range(len(KINDS)))
def test_a_value_of_the_wrong_kind_raises_user_error_naming_the_keyword(call, field):
    """Each keyword annotated int, float, bool or str takes that kind only (a bool is no number, a float no count,
    a str no number), gpu and engine a name or the object itself, paths a str or path: a UserError naming it, not
    a TypeError, AttributeError or ValueError from deeper down."""
    with pytest.raises(UserError) as e:
        call()
    assert field in str(e.value) and "\n" not in str(e.value)


def test_compare_takes_the_variants_as_the_command_writes_them():
    assert [r.name for r in llmcalc.compare("llama2-7b", "gqa,mla").rows] == \
        [r.name for r in llmcalc.compare("llama2-7b", ["gqa", "mla"]).rows]
