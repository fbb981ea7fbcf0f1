"""The `llmcalc` command line: parse, load, estimate, render. No arithmetic lives here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from .errors import UserError
from .render import Format, Units, emit

app = typer.Typer(
    help="Exact, closed-form costs of transformer LLMs: parameters, FLOPs, KV cache, memory, latency.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

MODEL, WORKLOAD, PRECISION, GPUS, CONVENTIONS, TRAINING, OUTPUT = (
    "Model", "Workload", "Precision", "GPUs and layout", "Conventions", "Training", "Output")
"""Help panels: each option is listed under one of these."""
COUNT_HELP = "k = 1024, m = 1024² (32k, 128K, 1M)"


def count(text: str | int) -> int:
    """A whole number with an optional k or m suffix (k = 1024, m = 1024²), for every count option."""
    if isinstance(text, int):
        return text
    from .grid import parse_count

    try:
        return parse_count(text)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None


def _opt(*names: str, help: str, panel: str, metavar: str = "", **kw):
    return typer.Option(*names, help=help, rich_help_panel=panel, metavar=metavar, **kw)


def _count_opt(*names: str, help: str, panel: str = WORKLOAD, **kw):
    return _opt(*names, help=help, panel=panel, metavar="N", parser=count, **kw)


Dtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"]
DTYPES = "fp32, bf16, fp16, fp8, int8 or int4"
PresetOpt = Annotated[Optional[str], _opt("--preset", "-p", help="Preset name (see `llmcalc presets`).",
                                          panel=MODEL, metavar="NAME")]
ConfigOpt = Annotated[Optional[Path], _opt("--config", "-c", help="A llmcalc spec YAML written by you.", panel=MODEL,
                                           metavar="FILE")]
HFOpt = Annotated[Optional[Path], _opt("--hf-config", help="A Hugging Face config.json, or a folder holding one.",
                                       panel=MODEL, metavar="PATH")]
FormatOpt = Annotated[Format, _opt("--format", "-f", help="Output: table, json, yaml or csv.", panel=OUTPUT,
                                   metavar="FORMAT")]
UnitsOpt = Annotated[Units, _opt("--units", help="Byte labels in tables: both GB (10^9) and GiB (2^30), si or iec.",
                                 panel=OUTPUT, metavar="UNITS")]
BatchOpt = Annotated[int, _count_opt("--batch", "-b", help="Sequences in the batch, in all (over every replica).")]
SeqOpt = Annotated[int, _count_opt("--seq", "-s", help=f"Tokens per sequence: the prompt / context; {COUNT_HELP}.")]
KVDtypeOpt = Annotated[Dtype, _opt("--kv-dtype", help=f"KV cache elements: {DTYPES}.", panel=PRECISION,
                                   metavar="DTYPE")]
WeightsDtypeOpt = Annotated[Dtype, _opt("--weights-dtype", help=f"Weight storage: {DTYPES}.", panel=PRECISION,
                                        metavar="DTYPE")]
GroupOpt = Annotated[int, _count_opt("--group-size", help="int4: weights per fp16 scale, along each input.",
                                     panel=PRECISION)]
AttentionOpt = Annotated[Literal["causal", "dense"], _opt(
    "--attention", help="causal: only unmasked pairs (FlashAttention, Megatron); dense: the full S×S "
    "(FlopCounterMode).", panel=CONVENTIONS, metavar="causal|dense")]
LogitsOpt = Annotated[Literal["last", "all"], _opt(
    "--logits", help="Prefill logits of the last position (inference) or all (scoring).", panel=CONVENTIONS,
    metavar="last|all")]
MLADecodeOpt = Annotated[Literal["absorbed", "decompress"], _opt(
    "--mla-decode", help="MLA decode in the latent space, or re-projecting every cached latent.", panel=CONVENTIONS,
    metavar="absorbed|decompress")]
RecomputeOpt = Annotated[Literal["none", "selective", "full"], _opt(
    "--recompute", help="Training: activation recompute (none, selective, full).", panel=TRAINING, metavar="MODE")]


MAX_GPUS = 2**20
"""Sanity bound on --gpus and each parallel degree (the largest clusters hold ~10^5 GPUs)."""


def positive(**values: int) -> None:
    """Batch, lengths and sizes must be positive whole numbers, at most MAX_SIZE (GPU counts MAX_GPUS)."""
    from .blocks.base import MAX_SIZE

    for name, v in values.items():
        if v <= 0:
            raise UserError(f"--{name.replace('_', '-')}: must be > 0 (got {v}); give a positive whole number")
        bound = MAX_GPUS if name in ("gpus", "tp", "pp", "dp", "ep") else MAX_SIZE
        if v > bound:
            raise UserError(f"--{name.replace('_', '-')}: {v} is more than {bound:,}, beyond any real "
                            f"{'cluster' if bound == MAX_GPUS else 'workload'}; give a smaller number")


def load_model(preset: str | None, config: Path | None, hf_config: Path | None):
    """The ModelSpec named by exactly one of --preset, --config, --hf-config."""
    given = [x for x in (preset, config, hf_config) if x is not None]
    if len(given) != 1:
        raise UserError("give exactly one model: --preset NAME, --config FILE.yaml or --hf-config PATH")
    if preset is not None:
        from .presets import load_preset

        return load_preset(preset)
    if config is not None:
        from .presets import load_spec_file

        return load_spec_file(config)
    from .hf import load_hf_config

    return load_hf_config(hf_config)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("llmcalc-cost")
        except PackageNotFoundError:
            v = "unknown (not installed)"
        sys.stdout.write(f"llmcalc {v}\n")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.", callback=_version,
                                          is_eager=True, metavar="")] = False,
) -> None:
    pass


@app.command()
def params(
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """Parameters: total, active per token, per component and per layer type."""
    from .params import params as count_params

    emit(count_params(load_model(preset, config, hf_config)), format, units)


@app.command()
def kv(
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    batch: BatchOpt = 1,
    seq: SeqOpt = 4096,
    kv_dtype: KVDtypeOpt = "bf16",
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """KV cache bytes for BATCH sequences of SEQ tokens: total, per layer type, per token."""
    from .kv import kv_cache

    positive(batch=batch, seq=seq)
    emit(kv_cache(load_model(preset, config, hf_config), batch, seq, kv_dtype), format, units)


@app.command()
def flops(
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    batch: BatchOpt = 1,
    seq: SeqOpt = 4096,
    gen: Annotated[int, _count_opt("--gen", "-g", help="Tokens to generate after the prompt.")] = 1,
    attention: AttentionOpt = "causal",
    logits: LogitsOpt = "last",
    mla_decode: MLADecodeOpt = "absorbed",
    recompute: RecomputeOpt = "none",
    mtp: Annotated[bool, _opt("--mtp/--no-mtp", help="Include DeepSeek's MTP module.", panel=CONVENTIONS)] = False,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """FLOPs of prefill, one decode step, GEN decode steps and one training step."""
    from .flops import Conventions
    from .flops import flops as count_flops

    positive(batch=batch, seq=seq, gen=gen)
    conv = Conventions(attention=attention, logits=logits, mla_decode=mla_decode, recompute=recompute, mtp=mtp)
    emit(count_flops(load_model(preset, config, hf_config), batch, seq, gen, conv), format, units)


@app.command()
def memory(
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    batch: Annotated[int, _count_opt("--batch", "-b", help="Sequences in the batch (training: the global batch, "
                                     "over --dp GPUs).")] = 1,
    seq: SeqOpt = 4096,
    weights_dtype: WeightsDtypeOpt = "bf16",
    kv_dtype: KVDtypeOpt = "bf16",
    group_size: GroupOpt = 128,
    flash: Annotated[bool, _opt("--flash/--no-flash", help="Flash attention (no S×S scores).",
                                panel=CONVENTIONS)] = True,
    train: Annotated[bool, _opt("--train/--inference", help="A training step instead of inference.",
                                panel=TRAINING)] = False,
    optimizer: Annotated[Literal["adamw", "adamw-8bit", "sgd"], _opt(
        "--optimizer", help="adamw, adamw-8bit or sgd.", panel=TRAINING, metavar="NAME")] = "adamw",
    recompute: RecomputeOpt = "none",
    zero: Annotated[int, _opt("--zero", help="ZeRO stage 0-3 (shards over --dp).", panel=TRAINING, metavar="0-3",
                              min=0, max=3)] = 0,
    dp: Annotated[int, _count_opt("--dp", help="Data-parallel GPUs: each runs batch / dp sequences.",
                                  panel=TRAINING)] = 1,
    micro_batch: Annotated[Optional[int], _count_opt(
        "--micro-batch", help="Sequences one GPU runs at a time (default: batch / dp).", panel=TRAINING)] = None,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """Memory: weights, KV cache, activations (and gradients, optimizer states with --train)."""
    from .memory import MemoryOptions
    from .memory import memory as estimate

    positive(batch=batch, seq=seq, group_size=group_size, dp=dp,
             **({"micro_batch": micro_batch} if micro_batch is not None else {}))
    opts = MemoryOptions(weights_dtype=weights_dtype, kv_dtype=kv_dtype, group_size=group_size, train=train,
                         optimizer=optimizer, recompute=recompute, flash=flash, zero=zero, dp=dp,
                         micro_batch=micro_batch)
    emit(estimate(load_model(preset, config, hf_config), batch, seq, opts), format, units)


GPUOpt = Annotated[Optional[str], _opt("--gpu", help="GPU preset (see `llmcalc gpus`) or a GPU YAML file "
                                       "(required).", panel=GPUS, metavar="NAME")]
OptionalGPUOpt = Annotated[Optional[str], _opt(
    "--gpu", help="Add time per token and fit on this GPU (a preset or a GPU YAML file); none is assumed.",
    panel=GPUS, metavar="NAME")]
GPUsOpt = Annotated[Optional[int], _count_opt("--gpus", help="GPUs in all: tp · pp · dp.", panel=GPUS)]
TPOpt = Annotated[Optional[int], _count_opt("--tp", help="Tensor-parallel degree (default: gpus / (pp · dp)).",
                                            panel=GPUS)]
PPOpt = Annotated[int, _count_opt("--pp", help="Pipeline-parallel stages.", panel=GPUS)]
DPOpt = Annotated[int, _count_opt("--dp", help="Data-parallel replicas; each serves batch / dp sequences.",
                                  panel=GPUS)]
EPOpt = Annotated[int, _count_opt("--ep", help="Expert-parallel degree (whole experts over ep GPUs).", panel=GPUS)]
ReserveOpt = Annotated[float, _opt(
    "--reserve", help="Share of GPU memory kept for the runtime (0.10: vLLM's gpu_memory_utilization 0.9).",
    panel=GPUS, metavar="SHARE")]


def layout_of(gpus: int | None, tp: int | None, pp: int, dp: int, ep: int):
    """The parallel layout; --gpus must equal tp · pp · dp."""
    from .parallel import Layout

    positive(pp=pp, dp=dp, ep=ep, **({"gpus": gpus} if gpus is not None else {}), **({"tp": tp} if tp is not None else {}))
    if tp is None:
        tp = max(1, gpus // (pp * dp)) if gpus else 1
    if gpus is not None and gpus != tp * pp * dp:
        raise UserError(f"--gpus: {gpus} is not tp {tp} × pp {pp} × dp {dp} = {tp * pp * dp}; "
                        "make them agree or leave one out")
    return Layout(tp=tp, pp=pp, dp=dp, ep=ep)


def storage_of(weights_dtype: str, kv_dtype: str, group_size: int):
    from .shard import Storage

    positive(group_size=group_size)
    return Storage(weights_dtype=weights_dtype, kv_dtype=kv_dtype, group_size=group_size)


def reserve_ok(reserve: float) -> None:
    if not 0 <= reserve < 1:
        raise UserError(f"--reserve: {reserve} is not in [0, 1); give a share such as 0.1")


def load_gpu_named(name: str | None, needed_by: str | None = None):
    """The GPU named by --gpu; None when none is given, unless the command `needed_by` needs one."""
    if name is None:
        if needed_by:
            raise UserError(f"--gpu: {needed_by} needs a GPU and none is assumed; give --gpu NAME (see `llmcalc gpus`)")
        return None
    from .hardware import load_gpu

    return load_gpu(name)


@app.command()
def gpus(
    name: Annotated[Optional[str], typer.Argument(help="A GPU preset: show all of its figures.",
                                                  show_default=False, metavar="[NAME]")] = None,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """The GPU presets: dense peaks, memory, bandwidth, ridge point, interconnect; or one in full."""
    from .hardware import gpu_names, load_gpu

    if name is not None:
        emit(load_gpu(name).detail(), format, units)
        return
    emit([load_gpu(n).row() for n in gpu_names()], format, units)


@app.command()
def latency(
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    batch: BatchOpt = 1,
    seq: SeqOpt = 4096,
    gen: Annotated[int, _count_opt("--gen", "-g", help="Tokens to generate (the first comes from prefill).")] = 256,
    gpu: GPUOpt = None,
    gpus: GPUsOpt = None,
    tp: TPOpt = None,
    pp: PPOpt = 1,
    dp: DPOpt = 1,
    ep: EPOpt = 1,
    weights_dtype: WeightsDtypeOpt = "bf16",
    kv_dtype: KVDtypeOpt = "bf16",
    group_size: GroupOpt = 128,
    compute_dtype: Annotated[Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8"], _opt(
        "--compute-dtype", help="Matmul type that sets the peak: fp32, tf32, bf16, fp16, fp8 or int8 (weight-only "
        "quantization still computes in bf16).", panel=PRECISION, metavar="DTYPE")] = "bf16",
    compute_efficiency: Annotated[float, _opt("--compute-efficiency", help="Share of peak FLOP/s reached.",
                                              panel=GPUS, metavar="SHARE")] = 0.8,
    memory_efficiency: Annotated[float, _opt("--memory-efficiency", help="Share of memory bandwidth reached.",
                                             panel=GPUS, metavar="SHARE")] = 0.9,
    comm_efficiency: Annotated[float, _opt("--comm-efficiency", help="Share of one-way link bandwidth reached.",
                                           panel=GPUS, metavar="SHARE")] = 0.8,
    mla_decode: MLADecodeOpt = "absorbed",
    reserve: ReserveOpt = 0.10,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """Roofline time: time to first token, time per output token, tokens/s, per phase and op."""
    from .latency import LatencyOptions
    from .latency import latency as estimate

    positive(batch=batch, seq=seq, gen=gen)
    reserve_ok(reserve)
    for name, v in (("compute-efficiency", compute_efficiency), ("memory-efficiency", memory_efficiency),
                    ("comm-efficiency", comm_efficiency)):
        if not 0 < v <= 1:
            raise UserError(f"--{name}: {v} is not in (0, 1]; give a share such as 0.8")
    spec = load_model(preset, config, hf_config)
    opts = LatencyOptions(storage=storage_of(weights_dtype, kv_dtype, group_size), layout=layout_of(gpus, tp, pp, dp, ep),
                          compute_dtype=compute_dtype, compute_efficiency=compute_efficiency,
                          memory_efficiency=memory_efficiency, comm_efficiency=comm_efficiency,
                          mla_decode=mla_decode, reserve=reserve)
    emit(estimate(spec, load_gpu_named(gpu, "latency"), batch, seq, gen, opts), format, units)


@app.command()
def fit(
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    batch: Annotated[int, _count_opt("--batch", "-b", help="Sequences in all; max_seq is found for this batch.")] = 1,
    seq: Annotated[int, _count_opt("--seq", "-s", help=f"Tokens per sequence; max_batch is found for it; "
                                   f"{COUNT_HELP}.")] = 4096,
    gpu: GPUOpt = None,
    gpus: GPUsOpt = None,
    tp: TPOpt = None,
    pp: PPOpt = 1,
    dp: DPOpt = 1,
    ep: EPOpt = 1,
    weights_dtype: WeightsDtypeOpt = "bf16",
    kv_dtype: KVDtypeOpt = "bf16",
    group_size: GroupOpt = 128,
    reserve: ReserveOpt = 0.10,
    prefill_chunk: Annotated[int, _count_opt("--prefill-chunk", help="Tokens per prefill chunk (sizes the "
                                             "activation workspace).", panel=GPUS)] = 8192,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """Does it fit: weights, KV cache and workspace per GPU; the largest batch and longest context; when it
    does not, the fewest GPUs that hold it."""
    from .fit import FitOptions
    from .fit import fit as check

    positive(batch=batch, seq=seq, prefill_chunk=prefill_chunk)
    reserve_ok(reserve)
    spec = load_model(preset, config, hf_config)
    opts = FitOptions(storage=storage_of(weights_dtype, kv_dtype, group_size), layout=layout_of(gpus, tp, pp, dp, ep),
                      reserve=reserve, prefill_chunk=prefill_chunk)
    emit(check(spec, load_gpu_named(gpu, "fit"), batch, seq, opts), format, units)


@app.command()
def validate(
    preset: Annotated[Optional[list[str]], _opt("--preset", "-p", help="Preset name; repeat for several.",
                                                panel=MODEL, metavar="NAME")] = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    all_presets: Annotated[bool, _opt("--all", help="Every preset, with a progress bar.", panel=MODEL)] = False,
    batch: Annotated[int, _count_opt("--batch", "-b", help="Sequences in the batch.")] = 2,
    seq: SeqOpt = 128,
    device: Annotated[Literal["fake", "cpu", "cuda"], _opt(
        "--device", help="fake: full size under FakeTensorMode; cpu: a real (scaled) run; cuda: real time and "
        "memory.", panel=WORKLOAD, metavar="fake|cpu|cuda")] = "fake",
    layers: Annotated[Optional[int], _count_opt("--layers", help="Keep the first N layers (real runs).",
                                                panel=MODEL)] = None,
    scale: Annotated[int, _count_opt("--scale", help="Divide every width by this (real runs).", panel=MODEL)] = 1,
    mla_decode: MLADecodeOpt = "absorbed",
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """Check every estimate against the torch reference model; exit 1 when any row fails."""
    from .validate import check_measurable, check_real_run, require_device, scaled_copy
    from .validate import validate as run

    positive(batch=batch, seq=seq, scale=scale, **({"layers": layers} if layers is not None else {}))
    if all_presets:
        from .presets import load_preset, preset_names

        specs = [load_preset(n) for n in preset_names()]
    elif preset and len(preset) > 1 and not (config or hf_config):
        from .presets import load_preset

        specs = [load_preset(n) for n in preset]
    else:
        specs = [load_model(preset[0] if preset else None, config, hf_config)]
    if layers or scale > 1:
        specs = [scaled_copy(s, layers, scale) for s in specs]
    for s in specs:
        check_measurable(s, batch, seq)
    require_device(device)  # only now, so bad input is named before a missing torch
    if device != "fake":
        for s in specs:
            check_real_run(s, batch, seq, device)
    if len(specs) > 1 and format == "table":
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task("validating", total=len(specs))

            def step(spec):
                bar.update(task, advance=1, description=spec.name)

            report = run(specs, batch, seq, device, mla_decode, progress=step)
    else:
        report = run(specs, batch, seq, device, mla_decode)
    emit(report, format, units)
    if not report.ok:
        raise typer.Exit(1)


@app.command()
def presets(
    name: Annotated[Optional[str], typer.Argument(help="A preset: print its full spec, source and derived figures.",
                                                  show_default=False, metavar="[NAME]")] = None,
    format: Annotated[Optional[Format], _opt("--format", "-f", help="Output: table, json, yaml or csv (with NAME: "
                                             "yaml by default).", panel=OUTPUT, metavar="FORMAT")] = None,
    units: UnitsOpt = "both",
) -> None:
    """The presets: layers, width, context, attention and FFN per preset; or one in full."""
    from .presets import load_preset, preset_detail, preset_names, preset_row

    if name is not None:
        emit(preset_detail(load_preset(name)), format or "yaml", units)
        return
    emit([preset_row(load_preset(n)) for n in preset_names()], format or "table", units)


from . import cli_views  # noqa: E402, F401 - registers compare, explain, sweep, moe and schema on `app`


def main() -> None:
    """Entry point. Exit codes: 0 ok, 1 a check failed (validate, explain), 2 bad input. User errors are one
    line on stderr."""
    try:
        code = app(standalone_mode=False)
    except UserError as e:
        sys.stderr.write(f"error: {one_line(str(e))}\n")
        sys.exit(2)
    except Exception as e:  # typer/click usage errors carry exit_code and format_message()
        if hasattr(e, "format_message") and hasattr(e, "exit_code"):
            if message := e.format_message():  # empty after no-args help was shown
                sys.stderr.write(f"error: {' '.join(_usage_hint(e, message).split())} (see --help)\n")
            sys.exit(e.exit_code)
        raise
    sys.exit(code if isinstance(code, int) else 0)


def one_line(text: str) -> str:
    """A message as one line: line breaks (a file name or a YAML key may hold one) are escaped."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _usage_hint(e: Exception, message: str) -> str:
    """A usage error's message; an unknown command gets the nearest name and the list of commands."""
    import difflib

    message = message.replace("Value error, ", "")
    commands = sorted(getattr(getattr(getattr(e, "ctx", None), "command", None), "commands", None) or [])
    if message.startswith("No such command") and commands and message.count("'") >= 2:
        near = difflib.get_close_matches(message.split("'")[1], commands, n=1)
        hint = f" Did you mean {near[0]!r}?" if near and "Did you mean" not in message else ""
        message = f"{message}{hint} Commands: {', '.join(commands)}."
    return message
