"""The options commands share (typer `Annotated` aliases, grouped in help panels) and the loaders they feed:
a count with a k/m suffix, the model named by --preset/--config/--hf-config, the GPU. Options that always go
together are declared once more, as groups (llmcalc/cli/groups.py)."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import typer

from llmcalc.render import Format, Units

MODEL, WORKLOAD, PRECISION, GPUS, CONVENTIONS, COUNTING, TRAINING, SERVING, OUTPUT, ADVANCED = (
    "Model", "Workload", "Precision", "GPUs and layout", "Conventions", "Counting", "Training", "Serving", "Output",
    "Advanced")
"""Help panels: each option is listed under one of these (Advanced: the rarely changed ones)."""
COUNT_HELP = "k = 1024, m = 1024² (32k, 128K, 1M)"


_KEPT: ContextVar[list | None] = ContextVar("kept_reports", default=None)
"""Where emit keeps reports instead of printing them, inside `kept_reports()`; None: print them."""


@contextmanager
def kept_reports() -> Iterator[list]:
    """Within the block, emit appends each report (its notes worded as the command would print them) to the
    yielded list and prints nothing: `llmcalc run` calls each command's own function this way."""
    kept: list = []
    token = _KEPT.set(kept)
    try:
        yield kept
    finally:
        _KEPT.reset(token)


def with_ranges(report, ranges: str):
    """`report` with its time figures' error bands (llmcalc/api.py: with_ranges)."""
    from llmcalc.api import with_ranges as add

    return add(report, ranges)


def emit(report, fmt: Format, units: Units = "both", *, of: Callable, **view) -> None:
    """render.emit, the report's notes worded for the command line: a field they mark (`tp`, llmcalc/errors.py)
    that is an option of the command `of` is written as its flag (--tp); any other mark (`positions`, a JSON
    field) stays as it is. Inside `kept_reports()` the worded report is kept, not printed."""
    from llmcalc.errors import FIELD
    from llmcalc.render import emit as render

    notes = getattr(report, "notes", None)
    imports = _best_effort_notes()
    if imports and notes is not None and "model_import" not in type(report).model_fields:
        report = report.model_copy(update={"notes": [*notes, *imports]})
        notes = report.notes
    if notes and any("`" in n for n in notes):
        import inspect

        options = inspect.signature(of).parameters

        def word(m) -> str:
            return "--" + m[1].replace("_", "-") if m[1] in options else m[0]

        report = report.model_copy(update={"notes": [FIELD.sub(word, n) for n in notes]})
    kept = _KEPT.get()
    if kept is not None:
        kept.append(report)
        return
    render(report, fmt, units, **view)


def _best_effort_notes() -> tuple[str, ...]:
    """The notes on the best-effort imports (--hf-generic) loaded since the last report, if the loader ran."""
    models = sys.modules.get("llmcalc.inputs.models")
    return models.best_effort_notes() if models is not None else ()


@contextmanager
def progress_bar(description: str, total: int | None) -> Iterator[Callable[..., None]]:
    """A transient rich progress bar on stderr, drawn from the start on a terminal and never otherwise (a pipe, a
    file: rich is not even imported); yields its update(advance=n, total=n)."""
    if not sys.stderr.isatty():
        yield lambda **change: None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda **change: bar.update(task, **change)


def grid_parser(parse_name: str, kind: type, doc: str) -> Callable[[str], Any]:
    """An option's parser: the function llmcalc/inputs/grid.py names `parse_name` (the module imported when an
    option is read), its ValueError as typer's BadParameter; a value already of `kind` (a default) passes as it
    is."""
    def read(text: str | Any) -> Any:
        if isinstance(text, kind):
            return text
        from llmcalc.inputs import grid

        try:
            return getattr(grid, parse_name)(text)
        except ValueError as e:
            raise typer.BadParameter(str(e)) from None
    read.__doc__ = doc
    return read


count = grid_parser("parse_count", int, "A whole number with an optional k or m suffix (k = 1024, m = 1024²), for "
                    "every count option.")


def real(text: str | float) -> float:
    """A number for every float option, as Python reads one (0.5, 1e-3, inf, nan), except a finite spelling too large
    for a float (1e309), refused by name rather than read as inf, and one below the smallest normal float (5e-324,
    1e-320: a quotient by it is infinite) but 0. -0 is 0. nan and inf, spelt so, go on to the option's own check
    (--rate takes inf: all at once)."""
    from llmcalc.inputs.grid import parse_number

    try:
        value = text if isinstance(text, float) else parse_number(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a number; give one such as 0.5, 4 or 1e-3") from None
    if isinstance(text, str) and math.isinf(value) and text.strip().lstrip("+-").lower() not in ("inf", "infinity"):
        raise typer.BadParameter(f"{text!r} is beyond any float (±1.8e308 at most); give a number within that "
                                 "range")
    if value and abs(value) < sys.float_info.min:
        raise typer.BadParameter(f"{text!r} is below the smallest normal float ({sys.float_info.min:.3g}); give a "
                                 "number such as 1e-3 (or 0, where the option takes it)")
    return value + 0.0  # -0 is 0


def completer(module: str, names: str) -> Callable[[str], list[str]]:
    """Shell completion of an option whose values are presets: the names `module`.`names`() lists (imported when
    the shell asks) that start with what was typed."""
    def complete(incomplete: str) -> list[str]:
        from importlib import import_module

        return [n for n in getattr(import_module(module), names)() if n.startswith(incomplete)]

    return complete


COMPLETIONS = {"--preset": completer("llmcalc.inputs.presets", "preset_names"),
               "--gpu": completer("llmcalc.inputs.gpus", "gpu_names"),
               "--engine": completer("llmcalc.inputs.engines", "engine_names"),
               "--emit": completer("llmcalc.inputs.engines", "emit_engines")}
"""Options whose values the shell completes (`llmcalc --install-completion`), wherever a command declares them."""


def _opt(*names: str, help: str, panel: str, metavar: str = "", **kw):
    for name in names:
        if name in COMPLETIONS:
            kw.setdefault("autocompletion", COMPLETIONS[name])
    return typer.Option(*names, help=help, rich_help_panel=panel, metavar=metavar, **kw)


def _real_opt(*names: str, help: str, panel: str, metavar: str, **kw):
    return _opt(*names, help=help, panel=panel, metavar=metavar, parser=real, **kw)


def _count_opt(*names: str, help: str, panel: str = WORKLOAD, **kw):
    return _opt(*names, help=help, panel=panel, metavar="N", parser=count, **kw)


Dtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"]
DTYPES = "fp32, bf16, fp16, fp8, int8 or int4"
PresetOpt = Annotated[Optional[str], _opt("--preset", "-p", help="Preset name (see `llmcalc presets`).",
                                          panel=MODEL, metavar="NAME")]
ConfigOpt = Annotated[Optional[Path], _opt("--config", "-c", help="A llmcalc spec YAML written by you.", panel=MODEL,
                                           metavar="FILE")]
HFOpt = Annotated[Optional[Path], _opt("--hf-config", help="A Hugging Face config.json or its folder.",
                                       panel=MODEL, metavar="PATH")]
HFModelOpt = Annotated[Optional[str], _opt("--hf-model", help="A Hugging Face Hub id: ORG/NAME or ORG/NAME@REV.",
                                           panel=MODEL, metavar="ID")]
HFGenericOpt = Annotated[bool, _opt("--hf-generic", help="Read an unknown model_type as llama (best effort).",
                                    panel=MODEL)]
FormatOpt = Annotated[Format, _opt("--format", "-f", help="table, json, yaml or csv.", panel=OUTPUT,
                                   metavar="FORMAT")]
UnitsOpt = Annotated[Units, _opt("--units", help="both, si (GB) or iec (GiB).",
                                 panel=OUTPUT, metavar="UNITS")]
BatchOpt = Annotated[int, _count_opt("--batch", "-b", help="Sequences in the batch, in all.")]
SeqOpt = Annotated[int, _count_opt("--seq", "-s", help="Tokens per sequence (32k = 32,768).")]
StepBatchOpt = Annotated[int, _count_opt("--batch", "-b", help="Global batch: sequences per optimizer step.")]
EncoderSeqOpt = Annotated[Optional[int], _count_opt(
    "--encoder-seq", help="Encoder tokens (default: --seq).", panel=ADVANCED)]
ImagesOpt = Annotated[int, _count_opt(
    "--images", help="Images per sequence (a vision-language model).")]
ImageSizeOpt = Annotated[Optional[str], _opt(
    "--image-size", help="Image pixels, e.g. 1080x1920 (default: native).", panel=ADVANCED, metavar="HxW")]


PlotForceOpt = Annotated[bool, _opt("--force", help="Overwrite the --plot file when it exists.", panel=OUTPUT)]
KVDtypeOpt = Annotated[Dtype, _opt("--kv-dtype", help=f"KV cache: {DTYPES}.", panel=PRECISION,
                                   metavar="DTYPE")]
EngineKVDtypeOpt = Annotated[Optional[Dtype], _opt(
    "--kv-dtype", help=f"KV cache: {DTYPES} (default: the checkpoint's where the engine takes it, else bf16).",
    panel=PRECISION, metavar="DTYPE")]
WeightsDtypeOpt = Annotated[Optional[Dtype], _opt(
    "--weights-dtype", help=f"Weights: {DTYPES} (default: the checkpoint's, else bf16).",
    panel=PRECISION, metavar="DTYPE")]
WeightsFormatOpt = Annotated[Optional[str], _opt(
    "--weights-format", help="Per-component formats, e.g. experts=mxfp4.",
    panel=PRECISION, metavar="SPEC")]
GroupOpt = Annotated[Optional[int], _count_opt("--group-size", help="int4: weights per fp16 scale (default 128).",
                                                panel=ADVANCED)]
AttentionOpt = Annotated[Literal["causal", "causal-half", "dense"], _opt(
    "--attention", help="Attention-core pairs: causal S(S+1)/2, causal-half S²/2 or dense S².", panel=CONVENTIONS,
    metavar="MODE")]
LogitsOpt = Annotated[Literal["last", "all"], _opt(
    "--logits", help="Prefill logits: last (inference) or all (scoring).", panel=CONVENTIONS, metavar="WHICH")]
MLADecodeOpt = Annotated[Literal["absorbed", "decompress"], _opt(
    "--mla-decode", help="MLA decode: absorbed (in the latent space) or decompress.", panel=CONVENTIONS,
    metavar="MODE")]
RecomputeOpt = Annotated[Literal["none", "selective", "full"], _opt(
    "--recompute", help="Activation recompute: none, selective or full.", panel=TRAINING, metavar="MODE")]
RecomputeOpsOpt = Annotated[Optional[str], _opt(
    "--recompute-ops", help="Ops to recompute, from qkv,attention,attention_out,ffn.", panel=ADVANCED,
    metavar="OPS")]
RecomputeLayersOpt = Annotated[Optional[int], _opt(
    "--recompute-layers", help="Recompute the first N layers only (default: all).", panel=ADVANCED, metavar="N")]
AttentionKernelOpt = Annotated[Literal["flash", "eager"], _opt(
    "--attention-kernel", help="Backward of the attention core: flash (2.5× forward) or eager (2×).",
    panel=ADVANCED, metavar="KERNEL")]


def load_model(preset: str | None, config: Path | None, hf_config: Path | None, hf_model: str | None = None,
               hf_generic: bool = False):
    """The ModelSpec named by exactly one of --preset, --config, --hf-config, --hf-model (llmcalc/inputs/models.py)."""
    from llmcalc.inputs.models import ModelRef, load_model as load

    return load(ModelRef(preset, config, hf_config, hf_model, hf_generic))


GPUOpt = Annotated[Optional[str], _opt("--gpu", help="GPU preset (`llmcalc gpus`) or YAML file; required.",
                                       panel=GPUS, metavar="NAME")]
OptionalGPUOpt = Annotated[Optional[str], _opt(
    "--gpu", help="Also time and fit on this GPU (a preset or YAML file).",
    panel=GPUS, metavar="NAME")]
GPUsOpt = Annotated[Optional[int], _count_opt("--gpus", help="GPUs in all: tp · pp · dp.", panel=GPUS)]
TPOpt = Annotated[Optional[int], _count_opt("--tp", help="Tensor-parallel degree (default gpus/(pp·dp)).",
                                            panel=GPUS)]
PPOpt = Annotated[int, _count_opt("--pp", help="Pipeline-parallel stages.", panel=GPUS)]
DPOpt = Annotated[int, _count_opt("--dp", help="Data-parallel replicas.", panel=GPUS)]
EPOpt = Annotated[int, _count_opt("--ep", help="Expert-parallel degree.", panel=GPUS)]
TimeModelOpt = Annotated[Optional[Literal["roofline", "calibrated"]], _opt(
    "--time-model", help="calibrated or roofline (default: calibrated if the GPU has a profile).", panel=ADVANCED,
    metavar="MODEL")]
EnforceEagerOpt = Annotated[bool, _opt(
    "--enforce-eager", help="No CUDA graphs: the host launches kernels.", panel=ADVANCED)]
IntervalOpt = Annotated[bool, _opt(
    "--interval", help="Also the range runs fell in (docs/intervals.md).", panel=OUTPUT)]
EngineOpt = Annotated[Optional[str], _opt(
    "--engine", help="vllm (default), vllm-v0, sglang, sglang-0.4, trtllm, trtllm-triton, reference or a file.",
    panel=ADVANCED, metavar="NAME")]
CalibrationOpt = Annotated[Optional[Path], _opt(
    "--calibration", help="Calibration profile YAML to use.", panel=ADVANCED, metavar="FILE")]
LoraOpt = Annotated[Optional[int], _count_opt(
    "--lora", help="Rank-N LoRA adapters, base frozen.",
    panel=TRAINING)]
LoraTargetsOpt = Annotated[Optional[str], _opt(
    "--lora-targets", help="LoRA matrices (default: q,k,v,o,gate,up,down).",
    panel=TRAINING, metavar="LIST")]


OptimizerOpt = Annotated[Literal["adamw", "adamw-8bit", "sgd"], _opt(
    "--optimizer", help="adamw, adamw-8bit or sgd.", panel=TRAINING, metavar="NAME")]
ZeroOpt = Annotated[int, _opt("--zero", help="ZeRO stage (shards over --dp).", panel=TRAINING, metavar="N",
                              min=0, max=3)]
ExpertSkewOpt = Annotated[Optional[float], _real_opt(
    "--expert-skew", help="Experts' load skew (a CV; 0: uniform; default 1.64).", panel=ADVANCED,
    metavar="CV")]
ReserveOpt = Annotated[float, _real_opt(
    "--reserve", help="Share of GPU memory kept for the runtime.", panel=ADVANCED, metavar="SHARE")]


def load_gpu_named(name: str | None, needed_by: str | None = None):
    """The GPU named by --gpu; None when none is given, unless the command `needed_by` needs one (llmcalc/api.py:
    load_gpu)."""
    from llmcalc.api import load_gpu

    return load_gpu(name, needed_by)


RequestsOpt = Annotated[int, _count_opt(
    "--requests", "-n", help="Requests to simulate (at most 100,000).",
    panel=SERVING)]
LENGTHS = "N (4k = 4,096), uniform:LO,HI or normal:MEAN,STD"
RateOpt = Annotated[Optional[float], _real_opt(
    "--rate", help="Requests/s (serve's default: all at once).", panel=SERVING, metavar="REQ/S")]
PromptLenOpt = Annotated[Optional[str], _opt("--prompt", help=f"Prompt tokens per request: {LENGTHS} (default: 1024).",
                                             panel=SERVING, metavar="LEN")]
OutputLenOpt = Annotated[Optional[str], _opt("--output", help=f"Output tokens per request: {LENGTHS} (default: 256).",
                                             panel=SERVING, metavar="LEN")]
SeedOpt = Annotated[int, _opt("--seed", help="Random seed.", panel=ADVANCED, metavar="N")]
SLOTTFTOpt = Annotated[Optional[float], _real_opt(
    "--slo-ttft", help="Target time to first token, in seconds.", panel=SERVING, metavar="S")]
SLOTPOTOpt = Annotated[Optional[float], _real_opt(
    "--slo-tpot", help="Target time per output token, in seconds.", panel=SERVING, metavar="S")]

