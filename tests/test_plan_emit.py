"""`llmcalc plan --emit ENGINE` (llmcalc/views/emit.py): every emitted flag is one the engine's own argument parser
accepts, as presets/engines/commands/<engine>.yaml records it (read here as plain YAML), for many deployments;
three plans' commands read back flag by flag against the candidate they were written for; the deployments an engine
cannot run said so in one line; the exit codes and strict JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import run_cli, strict_json
from llmcalc.errors import UserError
from llmcalc.inputs.engines import load_engine, load_engine_commands
from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.presets import load_preset
from llmcalc.inputs.requests import parse_lengths
from llmcalc.model.engine_commands import EngineCommands
from llmcalc.reports.plan import PlanCandidate, PrefillPool
from llmcalc.views.emit import Load, emit_commands
from llmcalc.views.plan import layouts, precisions
from llmcalc.views.serve import SLO

COMMANDS = Path(__file__).parents[1] / "presets" / "engines" / "commands"
ENGINES = ("vllm", "sglang", "trtllm")
RECORDED = {e: yaml.safe_load((COMMANDS / f"{e}.yaml").read_text()) for e in ENGINES}
"""Each engine's commands as the data file records them, read without llmcalc's loader."""


def flags(argv: list[str], program: list[str]) -> dict[str, list[str]]:
    """The flags of `argv` after its program words, each with the values that follow it (a switch: none)."""
    assert argv[:len(program)] == program
    got: dict[str, list[str]] = {}
    current = None
    for word in argv[len(program):]:
        if word.startswith("--"):
            assert word not in got, f"{word} given twice"
            got[word], current = [], word
        elif current is not None:
            got[current].append(word)
    return got


def candidate(gpu: str, tp: int = 1, pp: int = 1, ep: int = 1, dp: int = 1, dtype: str = "bf16", max_seqs: int = 64,
              prefill: PrefillPool | None = None, shipped: bool = False, kv_dtype: str | None = None) -> PlanCandidate:
    """A listed deployment with these choices (its figures are not read by --emit)."""
    return PlanCandidate(gpu=gpu, gpus=tp * pp * dp, tp=tp, pp=pp, ep=ep, dp=dp, weights_dtype=dtype, shipped=shipped,
                         kv_dtype=kv_dtype or dtype, max_seqs=max_seqs, disaggregated=prefill is not None,
                         prefill=prefill, meets_slo=True,
                         simulated=True, output_tokens_per_s_per_gpu=100.0, full_batch=max_seqs, kv_tokens=10**6,
                         saturation_tokens_per_s=1000.0, headroom=2.0, usd_per_million_tokens=None, ttft_p99_s=0.1,
                         tpot_p99_s=0.01, utilization=0.5)


LOADS = [Load(10.0, parse_lengths("1024", "prompt"), parse_lengths("256", "output"), 400, 0, SLO(2.0, 0.05)),
         Load(0.5, parse_lengths("uniform:128,4096", "prompt"), parse_lengths("normal:300,50", "output"), 1000, 7,
              SLO(None, 0.03))]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("preset", ["llama3-8b", "qwen1.5-moe-a2.7b", "mixtral-8x7b"])
def test_every_emitted_flag_is_one_the_engines_parser_accepts(engine, preset):
    """Every layout a plan searches (tp, pp, dp, ep on up to 8 GPUs), each dtype of two GPUs, two loads: each
    command's flags are among those recorded for it, each given once; where the engine cannot run the deployment
    there is no command and one line says why."""
    spec, commands, serving = load_preset(preset), load_engine_commands(engine), load_engine(engine)
    recorded = RECORDED[engine]
    written = unsupported = 0
    for gpu in (load_gpu("h100-sxm"), load_gpu("a100-80gb")):
        settings = serving.settings(gpu, max_seqs=64)
        for L in layouts(spec, gpu, 8):
            for p in precisions(spec, gpu, serving):
                for load in LOADS:
                    c = candidate(gpu.name, L.tp, L.pp, L.ep, L.dp, p.label, shipped=p.shipped, kv_dtype=p.kv_dtype)
                    e = emit_commands(spec, c, 1, commands, settings, load)
                    if e.unsupported:
                        assert e.launch is None and e.benchmark is None and "\n" not in e.unsupported
                        unsupported += 1
                        continue
                    written += 1
                    for kind, cmd in (("launch", e.launch), ("benchmark", e.benchmark)):
                        program = recorded[kind]["program"]
                        assert set(flags(cmd.argv, program)) <= set(recorded[kind]["flags"]), (kind, cmd.line)
                        assert cmd.line.split() == cmd.argv  # nothing here needs quoting
    assert written
    if spec.ffn.routed_experts or engine == "trtllm":  # some MoE layouts, dp or fp8 do not fit each engine
        assert unsupported


def read_launch(e, engine: str) -> dict[str, list[str]]:
    return flags(e["launch"]["argv"], RECORDED[engine]["launch"]["program"])


def read_benchmark(e, engine: str) -> dict[str, list[str]]:
    return flags(e["benchmark"]["argv"], RECORDED[engine]["benchmark"]["program"])


def plan_json(*args: str) -> dict:
    r = run_cli("plan", *args, "--requests", "100", "--format", "json")
    assert r.returncode == 0, r.stderr
    return strict_json(r.stdout)


def test_vllm_commands_read_back_as_the_best_dense_deployment():
    r = plan_json("--preset", "llama3-8b", "--gpu", "h100-sxm", "--max-gpus", "2", "--rate", "5", "--slo-ttft", "2",
                  "--slo-tpot", "0.05", "--emit", "vllm")
    c, e = r["candidates"][0], r["emit"]
    assert e["candidate"] == 1 and e["model"] == "meta-llama/Meta-Llama-3-8B" and not e["unsupported"]
    launch = read_launch(e, "vllm")
    assert e["launch"]["argv"][2] == "meta-llama/Meta-Llama-3-8B"  # vllm serve MODEL
    assert launch["--tensor-parallel-size"] == [str(c["tp"])]
    assert launch["--pipeline-parallel-size"] == [str(c["pp"])]
    assert launch["--data-parallel-size"] == [str(c["dp"])]
    assert "--enable-expert-parallel" not in launch  # a dense model
    assert launch["--max-num-seqs"] == [str(c["max_seqs"])]
    # vLLM's own defaults for an 80 GiB H100 (vllm/engine/arg_utils.py get_batch_defaults, CacheConfig)
    assert launch["--max-num-batched-tokens"] == ["8192"] and launch["--gpu-memory-utilization"] == ["0.92"]
    assert launch["--max-model-len"] == [str(1024 + 256)]
    fp8 = c["weights_dtype"] == "fp8"
    assert launch["--kv-cache-dtype"] == ["fp8" if fp8 else "auto"] and ("--quantization" in launch) == fp8
    bench = read_benchmark(e, "vllm")
    assert bench["--model"] == [e["model"]]
    assert bench["--random-input-len"] == ["1024"] and bench["--random-output-len"] == ["256"]
    assert bench["--random-range-ratio"] == ["0"] and bench["--dataset-name"] == ["random"]
    assert bench["--num-prompts"] == ["100"] and float(bench["--request-rate"][0]) == r["rate"] == 5
    assert bench["--goodput"] == ["ttft:2000", "tpot:50"]
    assert "--save-result" in bench and bench["--result-filename"] == [e["result_file"]]
    assert e["result_file"].endswith(".json")


def test_sglang_commands_read_back_as_a_moe_deployment_with_expert_parallelism():
    r = plan_json("--preset", "qwen1.5-moe-a2.7b", "--gpu", "h100-sxm", "--max-gpus", "4", "--rate", "20",
                  "--slo-ttft", "2", "--slo-tpot", "0.05", "--top", "8", "--engine", "sglang", "--emit", "sglang",
                  "--prompt", "uniform:512,1536")
    ranked = [i for i, c in enumerate(r["candidates"], 1) if c["ep"] > 1 and c["tp"] % c["ep"] == 0]
    assert ranked, "no listed deployment with experts spread within tp"
    r = plan_json("--preset", "qwen1.5-moe-a2.7b", "--gpu", "h100-sxm", "--max-gpus", "4", "--rate", "20",
                  "--slo-ttft", "2", "--slo-tpot", "0.05", "--top", "8", "--engine", "sglang", "--emit", "sglang",
                  "--prompt", "uniform:512,1536", "--candidate", str(ranked[0]))
    c, e = r["candidates"][ranked[0] - 1], r["emit"]
    assert e["candidate"] == ranked[0] and not e["unsupported"]
    launch = read_launch(e, "sglang")
    assert launch["--model-path"] == ["Qwen/Qwen1.5-MoE-A2.7B"]
    assert launch["--tp-size"] == [str(c["tp"])] and launch["--ep-size"] == [str(c["ep"])]
    assert launch["--pp-size"] == [str(c["pp"])] and launch["--dp-size"] == [str(c["dp"])]
    assert launch["--max-running-requests"] == [str(c["max_seqs"])]
    assert launch["--context-length"] == [str(1536 + 256)]  # the longest prompt and the output
    # SGLang on a GPU of 80 GiB: chunked_prefill_size 8192 (server_args.py _handle_gpu_memory_settings)
    assert launch["--chunked-prefill-size"] == ["8192"]
    assert 0.5 < float(launch["--mem-fraction-static"][0]) < 1
    fp8 = c["weights_dtype"] == "fp8"
    assert launch["--kv-cache-dtype"] == ["fp8_e4m3" if fp8 else "auto"]
    bench = read_benchmark(e, "sglang")
    assert bench["--random-input-len"] == ["1024"]  # the uniform prompt's mean, said in a note
    assert any("1,024 tokens, the mean" in n for n in e["notes"])
    assert bench["--random-range-ratio"] == ["1"] and bench["--output-file"] == [e["result_file"]]
    assert bench["--num-prompts"] == ["100"] and float(bench["--request-rate"][0]) == 20


def test_trtllm_commands_read_back_and_fp8_is_said_unsupported():
    args = ["--preset", "llama3-8b", "--gpu", "h100-sxm", "--max-gpus", "2", "--rate", "5", "--slo-ttft", "2",
            "--slo-tpot", "0.05", "--engine", "trtllm", "--emit", "trtllm"]
    r = plan_json(*args)
    bf16 = next(i for i, c in enumerate(r["candidates"], 1) if c["weights_dtype"] == "bf16" and c["dp"] == 1)
    e = plan_json(*args, "--candidate", str(bf16))["emit"]
    c = r["candidates"][bf16 - 1]
    launch = read_launch(e, "trtllm")
    assert e["launch"]["argv"][1] == "meta-llama/Meta-Llama-3-8B"  # trtllm-serve MODEL
    assert launch["--tp_size"] == [str(c["tp"])] and launch["--pp_size"] == [str(c["pp"])]
    assert launch["--max_batch_size"] == [str(c["max_seqs"])] and launch["--max_seq_len"] == ["1280"]
    # llm_args.py BaseLlmArgs max_num_tokens 8192, KvCacheConfig free_gpu_memory_fraction 0.9
    assert launch["--max_num_tokens"] == ["8192"] and launch["--kv_cache_free_gpu_memory_fraction"] == ["0.9"]
    bench = read_benchmark(e, "trtllm")
    assert "--random-ids" in bench and bench["--result-filename"] == [e["result_file"]]
    fp8 = next((i for i, c in enumerate(r["candidates"], 1) if c["weights_dtype"] == "fp8"), None)
    if fp8 is not None:
        e = plan_json(*args, "--candidate", str(fp8))["emit"]
        assert e["launch"] is None and e["benchmark"] is None and "pre-quantised" in e["unsupported"]


@pytest.mark.parametrize("engine", ENGINES)
def test_each_setting_is_written_by_the_flag_the_commands_file_names(engine):
    """The running sequences, the step's token budget and the memory share go out under the flags the engine's
    commands file lists for them (`settings`), which its parser accepts; the flags that turn graphs and overlap
    scheduling off are never written."""
    commands, spec = load_engine_commands(engine), load_preset("llama3-8b")
    settings = load_engine(engine).settings(load_gpu("h100-sxm"), max_seqs=96)
    launch = emit_commands(spec, candidate("h100-sxm", max_seqs=96), 1, commands, settings, LOADS[0]).launch.argv
    named = commands.launch.settings
    for key, value in (("max_seqs", "96"), ("max_batched_tokens", str(settings.max_batched_tokens))):
        assert launch[launch.index(named[key]) + 1] == value
    assert float(launch[launch.index(named["gpu_memory_utilization"]) + 1]) == pytest.approx(
        settings.gpu_memory_utilization, abs=5e-5)
    assert set(named.values()) <= set(commands.launch.flags) and commands.launch.graphs_off not in launch
    assert commands.launch.overlap_off not in launch


def test_a_settings_flag_outside_the_accepted_list_is_refused():
    data = yaml.safe_load((COMMANDS / "vllm.yaml").read_text(encoding="utf-8"))
    data["launch"]["settings"]["max_seqs"] = "--max-seqs"
    with pytest.raises(UserError, match="`settings`: --max-seqs is not among `flags`"):
        EngineCommands.model_validate(data)


@pytest.mark.parametrize("engine", ENGINES)
def test_what_an_engine_cannot_run_is_one_line_and_no_command(engine):
    spec, gpu = load_preset("qwen1.5-moe-a2.7b"), load_gpu("h100-sxm")
    settings = load_engine(engine).settings(gpu)
    pool = PrefillPool(gpus=2, tp=2, dp=1, kv_transfer_s=0.001)
    cases = [candidate("h100-sxm", tp=2, prefill=pool),  # disaggregated: two servers and a KV connector
             candidate("h100-sxm", tp=2, ep=4, dp=2)]  # experts across replicas: vLLM only
    for c in cases[:1] + (cases[1:] if engine != "vllm" else []):
        e = emit_commands(spec, c, 3, load_engine_commands(engine), settings, LOADS[0])
        assert e.launch is None and e.benchmark is None and e.result_file is None
        assert e.unsupported and "\n" not in e.unsupported and e.candidate == 3


def test_a_model_without_a_hub_repo_gets_a_placeholder_said_so():
    spec = load_preset("tiny-decoder-example")
    e = emit_commands(spec, candidate("h100-sxm"), 1, load_engine_commands("vllm"),
                      load_engine("vllm").settings(load_gpu("h100-sxm")),
                      Load(1.0, parse_lengths("128", "p"), parse_lengths("64", "o"), 10, 0, SLO(1.0, None)))
    assert e.model_placeholder and e.model.startswith("<") and e.launch.argv[2] == e.model
    assert any(e.model in n and "replace" in n for n in e.notes)


@pytest.mark.parametrize("args, says", [
    (["--emit", "tgi"], "--emit"),
    (["--emit", "reference"], "--emit"),
    (["--emit", "vllm", "--candidate", "6"], "--candidate"),  # past --top 5
    (["--emit", "vllm", "--candidate", "0"], "--candidate"),
    (["--emit", "vllm", "--candidate", "-1"], "--candidate"),
    (["--emit", "vllm", "--candidate", "nan"], "--candidate"),
    (["--emit", "vllm", "--candidate", "1e999"], "--candidate"),
    (["--emit", "vllm", "--candidate", str(2**70)], "--candidate"),
    (["--emit", ""], "--emit"),
    (["--emit", "../../etc/passwd"], "--emit"),
    (["--candidate", "1"], "--candidate"),  # without --emit
    (["--emit", "vllm", "--engine", "sglang"], "--emit"),
    (["--emit", "vllm", "--candidate", "1", "--slo-tpot", "0.0001"], "--candidate"),  # nothing listed: no rank 1
])
def test_bad_emit_options_exit_2_in_one_line(args, says):
    base = ["plan", "--preset", "llama3-8b", "--gpu", "h100-sxm", "--max-gpus", "1", "--rate", "5", "--slo-ttft", "2",
            "--requests", "50"]
    r = run_cli(*base, *args)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in r.stderr


def test_the_table_prints_commands_a_shell_reads_as_the_json_argv():
    import shlex

    base = ["plan", "--preset", "llama3-8b", "--gpu", "h100-sxm", "--max-gpus", "1", "--rate", "5", "--slo-ttft", "2",
            "--requests", "50", "--emit", "vllm"]
    table = run_cli(*base)
    assert table.returncode == 0, table.stderr
    e = json.loads(run_cli(*base, "--format", "json").stdout)["emit"]
    text = table.stdout.split("launch (vllm for deployment 1):\n", 1)[1]
    launch, rest = text.split("benchmark (writes", 1)
    assert shlex.split(launch.replace("\\\n", " ")) == e["launch"]["argv"]
    bench = rest.split("\n", 1)[1].split("note:", 1)[0]
    assert shlex.split(bench.replace("\\\n", " ")) == e["benchmark"]["argv"]


def test_the_shell_completes_the_engines_emit_writes_for():
    import os
    import subprocess
    import sys

    env = os.environ | {"_LLMCALC_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "llmcalc plan --emit s"}
    code = "import sys; sys.argv[0] = 'llmcalc'; from llmcalc.cli import main; main()"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900).stdout
    assert '"sglang"' in out and "trtllm" not in out and "reference" not in out
