"""`llmcalc plan --emit ENGINE`: one listed deployment as the engine's own commands — its server, launched with
every setting the plan depends on, and the engine's serving benchmark at the plan's load, writing its results to
a file. The flags come only from the lists read in each engine's argument parser
(presets/engines/commands/<engine>.yaml, llmcalc/model/engine_commands.py); a deployment the engine cannot run
as one server is said so in one line instead.

What each engine is given (the plan's figure → the engine's flag):

  figure                vLLM                      SGLang                    TensorRT-LLM
  tp, pp                --tensor/pipeline-        --tp-size, --pp-size      --tp_size, --pp_size
                        parallel-size
  dp replicas           --data-parallel-size      --dp-size                 (none: one server per replica)
  ep (MoE models)       --enable-expert-parallel  --ep-size (divides tp)    --ep_size (divides tp)
                        (ep = tp · dp)
  weights bf16 / fp8    --dtype bfloat16 /        --dtype bfloat16 /        (fp8 weights come from a
                        + --quantization fp8      + --quantization fp8      pre-quantised checkpoint)
  KV in the weights'    --kv-cache-dtype auto /   --kv-cache-dtype auto /   (the model's dtype)
  dtype                 fp8                       fp8_e4m3
  a checkpoint shipped  --dtype auto,             --dtype auto,             (its own quantisation config)
  quantised             --kv-cache-dtype auto     --kv-cache-dtype auto
  longest request       --max-model-len           --context-length          --max_seq_len

and the settings the plan ran with, each by the flag its commands file names for it (`settings`: vLLM's
--max-num-seqs, SGLang's --max-running-requests, TensorRT-LLM's --max_batch_size for max_seqs; likewise the step
token budget and the memory share). The step budget and the memory share are the engine preset's for the
deployment's GPU (presets/engines/); the longest request is the prompt's and the output's bound (inputs/requests.py: Lengths.bound).
The benchmark sends `requests` prompts of random tokens at the plan's rate (Poisson), its lengths fixed at the
plan's (at their means where the plan drew them from a distribution, said in a note), ignoring end-of-sequence so
that every request generates its full output.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass

from llmcalc.errors import UserError
from llmcalc.inputs.requests import Lengths
from llmcalc.model.engine import Engine, Settings
from llmcalc.model.engine_commands import Command, EngineCommands
from llmcalc.model.formats import weight_format
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec
from llmcalc.reports.plan import EmittedCommands, PlanCandidate, PlanReport, ShellCommand
from llmcalc.views.serve import SLO
from llmcalc.workload import Layout

HF_REPO = re.compile(r"huggingface\.co/(?!datasets/|spaces/)([A-Za-z0-9][\w.-]*/[\w.-]+)")
"""A model's repo id in the URL of its config on the Hugging Face Hub (https://huggingface.co/ORG/NAME/...)."""


@dataclass(frozen=True)
class Load:
    """The plan's workload, as a benchmark replays it."""

    rate: float
    prompt: Lengths
    output: Lengths
    requests: int
    seed: int
    slo: SLO


class Argv:
    """A command's words, built flag by flag; a flag outside the command's accepted list is a bug, refused."""

    def __init__(self, command: Command, model: str):
        self.command, self.words = command, list(command.program)
        flag = command.model_flag()
        self.words += [model] if flag is None else []
        if flag is not None:
            self.add(flag, model)

    def add(self, flag: str, *values: object) -> None:
        if flag not in self.command.flags:
            raise RuntimeError(f"{flag} is not among the flags read for {' '.join(self.command.program)} "
                               f"({self.command.source.path})")
        self.words += [flag, *(_word(v) for v in values)]

    def setting(self, name: str, value: object) -> None:
        """The flag that sets the Settings value `name` (the command's `settings`), with `value`."""
        self.add(self.command.settings[name], value)

    def done(self) -> ShellCommand:
        return ShellCommand(argv=self.words, line=shlex.join(self.words))


def _word(v: object) -> str:
    """A value as a command-line word: integers plainly, floats without a needless .0, exactly otherwise."""
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() else repr(v)
    return str(v)


def model_id(spec: ModelSpec) -> tuple[str, bool]:
    """(the Hugging Face repo id named by the preset's source, False), or (a placeholder to replace, True)."""
    m = HF_REPO.search(spec.source or "")
    if m:
        return m[1], False
    return f"<hf-repo-or-path-of-{re.sub(r'[^A-Za-z0-9._-]+', '-', spec.name)}>", True


def emit_for(report: PlanReport, spec: ModelSpec, gpus: list[GPU], engine: Engine, commands: EngineCommands,
             rank: int, load: Load) -> PlanReport:
    """`report` (a plan of `spec` on `gpus` and `engine`) with `commands`' engine's commands for its deployment of
    rank `rank` (from 1), on the engine's settings for that deployment's GPU; a rank past the list is refused."""
    listed = report.candidates
    if not 1 <= rank <= len(listed):
        got = f"only {len(listed)} deployment(s) are listed" if listed else "no deployment met the targets"
        raise UserError(f"`candidate`: {rank} is past the list ({got}); give a rank from the list, or relax the "
                        "targets")
    c = listed[rank - 1]
    L = Layout(tp=c.tp, pp=c.pp, dp=c.dp, ep=c.ep)
    settings = engine.settings(next(g for g in gpus if g.name == c.gpu), L, context=spec.max_seq_len,
                               max_seqs=c.max_seqs)
    return report.model_copy(update={"emit": emit_commands(spec, c, rank, commands, settings, load)})


def emit_commands(spec: ModelSpec, c: PlanCandidate, rank: int, commands: EngineCommands, settings: Settings,
                  load: Load) -> EmittedCommands:
    """The commands of `commands`' engine for candidate `c` (rank `rank` from 1) of a plan of `spec`, on the
    engine's `settings` for c's GPU, and a benchmark of `load`."""
    model, placeholder = model_id(spec)
    engine = commands.engine
    result = f"{engine}-{re.sub(r'[^A-Za-z0-9._-]+', '-', spec.name)}-plan{rank}.json"
    max_len = load.prompt.bound + load.output.bound
    why = _unsupported(spec, c, engine, max_len)
    if why is not None:
        return EmittedCommands(engine=engine, candidate=rank, model=model, model_placeholder=placeholder, launch=None,
                               benchmark=None, result_file=None, unsupported=why, notes=[])
    notes = []
    if placeholder:
        notes.append(f"the model preset names no Hugging Face repo: replace {model} with the model's repo id or "
                     "local path in both commands")
    launch = Argv(commands.launch, model)
    LAUNCH[engine](launch, spec, c, settings, max_len)
    bench = Argv(commands.benchmark, model)
    lengths = [length.constant or round(length.mean) for length in (load.prompt, load.output)]
    BENCHMARK[engine](bench, load, *lengths, result)
    for what, length, n in (("prompt", load.prompt, lengths[0]), ("output", load.output, lengths[1])):
        if length.constant is None:
            notes.append(f"the benchmark's {what}s are all {n:,} tokens, the mean of the plan's {length}; the server "
                         f"admits up to {max_len:,} tokens per request")
    kv = (f"the weights as the checkpoint ships them ({c.weights_dtype}: its own quantisation config, no flag), KV "
          f"cache in the engine's default ({c.kv_dtype})" if c.shipped else
          f"KV cache in the weights' dtype ({c.weights_dtype})")
    notes.append(f"the server runs the plan's settings for {c.gpu}: {c.max_seqs} sequences and "
                 f"{settings.max_batched_tokens:,} tokens per step, memory share {_share(settings):g}, {kv}; the plan "
                 "has no speculative decoding")
    return EmittedCommands(engine=engine, candidate=rank, model=model, model_placeholder=placeholder,
                           launch=launch.done(), benchmark=bench.done(), result_file=result, unsupported=None,
                           notes=notes)


def _settings(a: Argv, c: PlanCandidate, s: Settings) -> None:
    """The plan's settings by the engine's own flags: the candidate's sequences, the step's token budget, the
    memory share."""
    a.setting("max_seqs", c.max_seqs)
    a.setting("max_batched_tokens", s.max_batched_tokens)
    a.setting("gpu_memory_utilization", _share(s))


def _share(settings: Settings) -> float:
    """The memory share as a flag writes it: four decimals (SGLang's is 1 − its reserve / the GPU's memory)."""
    return round(settings.gpu_memory_utilization, 4)


def _unsupported(spec: ModelSpec, c: PlanCandidate, engine: str, max_len: int) -> str | None:
    """Why candidate `c` cannot be launched as one server of `engine`, in one line; None when it can."""
    label = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}[engine]
    if c.prefill is not None:
        return (f"candidate is disaggregated (prefill tp {c.prefill.tp} × dp {c.prefill.dp} beside decode): {label} "
                "runs that as separate prefill and decode servers joined by a KV connector, which --emit does not "
                "write; pick a candidate without a prefill pool")
    if max_len > spec.max_seq_len:
        return (f"the longest request ({max_len:,} tokens of prompt and output) exceeds {spec.name}'s max_seq_len "
                f"{spec.max_seq_len:,}, which {label} refuses as a model length")
    moe = spec.ffn.routed_experts > 0
    if engine == "vllm" and moe and c.ep != (c.tp * c.dp if c.ep > 1 else 1):
        return (f"vLLM's expert parallelism spans all tp × dp GPUs of a pipeline stage ({c.tp * c.dp}), not ep "
                f"{c.ep}; pick a candidate with ep 1 or ep = tp × dp")
    if engine == "vllm" and moe and c.dp > 1 and c.ep == 1:
        return (f"vLLM shards a MoE model's experts over all dp × tp GPUs, not within each of the {c.dp} replicas "
                "(ep 1); pick a candidate with ep = tp × dp, or one replica")
    if engine in ("sglang", "trtllm") and c.tp % c.ep:
        return (f"{label} places experts within one tensor-parallel group (ep divides tp {c.tp}), not ep {c.ep} "
                "across replicas; pick a candidate with ep 1 or ep = tp")
    if engine == "trtllm" and c.dp > 1:
        return (f"trtllm-serve has no data-parallel size: the {c.dp} replicas are {c.dp} servers behind a load "
                "balancer, which --emit does not write; pick a candidate with dp 1")
    unrun = _weight_only(spec) if engine == "trtllm" and c.shipped else None
    if unrun is not None:  # TensorRT-LLM docs, PyTorch backend quantization: "supports FP8 and NVFP4 quantization"
        return (f"trtllm-serve's PyTorch backend runs checkpoints quantised to FP8 or FP4 (NVFP4, MXFP4), not "
                f"weight-only {unrun}; pick vllm or sglang, or another checkpoint")
    if engine == "trtllm" and c.weights_dtype == "fp8" and not c.shipped:
        return ("trtllm-serve takes fp8 weights and an fp8 KV cache from a pre-quantised (ModelOpt) checkpoint, "
                "not from a flag; pick a bf16 candidate, or quantise the checkpoint first")
    return None


def _weight_only(spec: ModelSpec) -> str | None:
    """The first of the checkpoint's quantised formats that no fp8 or fp4 matmul runs natively (GPTQ, AWQ,
    bitsandbytes, int8), or None."""
    formats = spec.checkpoint.formats
    for name in (formats.default, *formats.components.values()):
        f = weight_format(name)
        if f.quantized and f.compute not in ("fp8", "fp4"):
            return name
    return None


def _vllm(a: Argv, spec: ModelSpec, c: PlanCandidate, s: Settings, max_len: int) -> None:
    # vllm/engine/arg_utils.py: ParallelConfig, ModelConfig, CacheConfig (cache_dtype: auto, fp8, ...) and
    # SchedulerConfig flags; expert parallelism is a switch whose size is tp × dp
    a.add("--tensor-parallel-size", c.tp)
    a.add("--pipeline-parallel-size", c.pp)
    a.add("--data-parallel-size", c.dp)
    if c.ep > 1:
        a.add("--enable-expert-parallel")
    _precision(a, c, "fp8")
    a.add("--max-model-len", max_len)
    _settings(a, c, s)


def _precision(a: Argv, c: PlanCandidate, fp8_cache: str) -> None:
    """vLLM's and SGLang's dtype flags: bf16, or fp8 quantised at load with an fp8 KV cache (`fp8_cache`, the
    engine's name for it); a shipped checkpoint in its own dtype and quantisation (its config's), the KV cache in
    the engine's default."""
    a.add("--dtype", "auto" if c.shipped else "bfloat16")
    fp8 = c.weights_dtype == "fp8" and not c.shipped
    if fp8:
        a.add("--quantization", "fp8")
    a.add("--kv-cache-dtype", fp8_cache if fp8 else "auto")


def _sglang(a: Argv, spec: ModelSpec, c: PlanCandidate, s: Settings, max_len: int) -> None:
    # python/sglang/srt/server_args.py: kv_cache_dtype choices auto, fp8_e5m2, fp8_e4m3, ...; ep_size divides
    # tp_size (the experts of one tensor-parallel group)
    a.add("--tp-size", c.tp)
    a.add("--pp-size", c.pp)
    a.add("--dp-size", c.dp)
    if spec.ffn.routed_experts:
        a.add("--ep-size", c.ep)
    _precision(a, c, "fp8_e4m3")
    a.add("--context-length", max_len)
    _settings(a, c, s)


def _trtllm(a: Argv, spec: ModelSpec, c: PlanCandidate, s: Settings, max_len: int) -> None:
    # tensorrt_llm/commands/serve.py: the click options of `trtllm-serve`
    a.add("--backend", "pytorch")
    a.add("--tp_size", c.tp)
    a.add("--pp_size", c.pp)
    if spec.ffn.routed_experts:
        a.add("--ep_size", c.ep)
    a.add("--max_seq_len", max_len)
    _settings(a, c, s)


def _goodput(a: Argv, slo: SLO) -> None:
    """The targets as the benchmark's goodput (milliseconds, KEY:VALUE pairs)."""
    pairs = [f"{k}:{_word(round(v * 1000, 6))}" for k, v in (("ttft", slo.ttft_s), ("tpot", slo.tpot_s))
             if v is not None]
    if pairs:
        a.add("--goodput", *pairs)


def _bench_vllm(a: Argv, load: Load, prompt: int, output: int, result: str) -> None:
    # vllm/benchmarks/serve.py and datasets.py: random tokens, lengths in [L·(1 − r), L·(1 + r)]
    _bench_random(a, load, prompt, output, result, ("--backend", "vllm"), ("--dataset-name", "random"))


def _bench_random(a: Argv, load: Load, prompt: int, output: int, result: str, *dataset: tuple[str, ...]) -> None:
    """vLLM's benchmark client (TensorRT-LLM ships a copy): the `dataset` flags (backend, dataset), then fixed
    lengths (range ratio 0), the load, EOS ignored, p99 of TTFT, TPOT and ITL, goodput and a result file."""
    for flag, *values in dataset:
        a.add(flag, *values)
    a.add("--random-input-len", prompt)
    a.add("--random-output-len", output)
    a.add("--random-range-ratio", 0)
    a.add("--num-prompts", load.requests)
    a.add("--request-rate", load.rate)
    a.add("--seed", load.seed)
    a.add("--ignore-eos")
    a.add("--percentile-metrics", "ttft,tpot,itl")
    a.add("--metric-percentiles", 99)
    _goodput(a, load.slo)
    a.add("--save-result")
    a.add("--result-filename", result)


def _bench_sglang(a: Argv, load: Load, prompt: int, output: int, result: str) -> None:
    # python/sglang/bench_serving.py: random-ids draws lengths in [max(int(L·r), 1), L], so r = 1 fixes them; EOS
    # is ignored unless --disable-ignore-eos
    a.add("--backend", "sglang")
    a.add("--dataset-name", "random-ids")
    a.add("--random-input-len", prompt)
    a.add("--random-output-len", output)
    a.add("--random-range-ratio", 1)
    a.add("--num-prompts", load.requests)
    a.add("--request-rate", load.rate)
    a.add("--seed", load.seed)
    a.add("--output-file", result)


def _bench_trtllm(a: Argv, load: Load, prompt: int, output: int, result: str) -> None:
    # tensorrt_llm/serve/scripts/benchmark_serving.py: vLLM's benchmark, random ids rather than ShareGPT text
    _bench_random(a, load, prompt, output, result, ("--backend", "openai"), ("--dataset-name", "random"),
                  ("--random-ids",))


LAUNCH: dict[str, Callable[[Argv, ModelSpec, PlanCandidate, Settings, int], None]] = {
    "vllm": _vllm, "sglang": _sglang, "trtllm": _trtllm}
BENCHMARK: dict[str, Callable[[Argv, Load, int, int, str], None]] = {
    "vllm": _bench_vllm, "sglang": _bench_sglang, "trtllm": _bench_trtllm}
