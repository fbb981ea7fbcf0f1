"""The Python API: each command as a function of the command line's inputs, returning the report the command
prints (`report.model_dump(mode="json")` is its `--format json` output). The command line parses its options
and calls these same functions, so there is one path from inputs to a report.

Inputs, as the command line takes them:

- `model`: a preset name (`"llama3-8b"`), the path of a spec YAML or of a Hugging Face config.json or its folder,
  or a ModelSpec (llmcalc/inputs/models.py: `load_model`, the one place a model is resolved);
- `gpu`: a GPU preset name (`"h100-sxm"`) or the path of a GPU YAML (or a GPU object);
- every other input is a keyword with the command's option name (`--kv-dtype` → `kv_dtype=`) and default;
  counts are ints (no `32k` suffixes; sweep's grids are the command's text or a list of ints).

Bad input raises llmcalc.UserError, one line that names the keyword (`tp`) and the fix. No function imports
torch, typer or rich; this module imports only what a function needs, when it runs.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from llmcalc.errors import Unread, UserError, clip

if TYPE_CHECKING:
    from llmcalc.model.engine import Engine

_KINDS = {"int": ((int,), "a whole number", "one such as 4"), "float": ((int, float), "a number", "one such as 0.5"),
          "bool": ((bool,), "True or False", "True or False"), "str": ((str,), "text", "its name as a str")}
"""The plain annotations of the functions' keywords, checked on every call (_public): the types, what such a value
is and an example."""


def _check_kinds(signature, args: tuple, kwargs: dict) -> None:
    """Each keyword of the function with `signature` annotated int, float, bool or str (or that | None) given a
    value of that kind: a bool is no number, a float no count, a str no number (the checks after it compare and
    divide)."""
    for name, value in signature.bind_partial(*args, **kwargs).arguments.items():
        annotation = str(signature.parameters[name].annotation)
        kind = annotation.removesuffix(" | None")
        if kind not in _KINDS or (value is None and kind != annotation):
            continue
        types, what, example = _KINDS[kind]
        if not isinstance(value, types) or (isinstance(value, bool) and kind != "bool"):
            raise UserError(f"`{name}`: {clip(repr(value))} is not {what}; give {example}")


def _public(function: Callable) -> Callable:
    """`function` raising UserError, never pydantic's ValidationError, on a model built from its inputs, and
    checking the kind of each plainly annotated keyword first (_check_kinds)."""
    import inspect

    signature = inspect.signature(function)

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        from pydantic import ValidationError

        _check_kinds(signature, args, kwargs)
        try:
            return function(*args, **kwargs)
        except ValidationError as e:
            from llmcalc.errors import validation_message

            raise UserError(validation_message(e)) from None

    return call


# --- inputs: each turned into what the costs take, in one place -----------------------------------------------

def load_model(model):
    """The ModelSpec `model` names (llmcalc/inputs/models.py: load_model)."""
    from llmcalc.inputs.models import load_model as load

    return load(model)


def load_gpu(gpu, needed_by: str | None = None):
    """The GPU `gpu` names (a preset name, a GPU YAML path, or a GPU); None when none is given, unless the
    command `needed_by` needs one."""
    if gpu is None:
        if needed_by:
            raise UserError(f"`gpu`: {needed_by} needs a GPU and none is assumed; give `gpu` NAME (see `llmcalc "
                            "gpus`)")
        return None
    from llmcalc.model.gpu import GPU

    if isinstance(gpu, GPU):
        return gpu
    if isinstance(gpu, os.PathLike):
        gpu = str(_path(gpu, "gpu"))
    if not isinstance(gpu, str):
        raise UserError(f"`gpu`: {clip(repr(gpu))} is not a GPU; give a preset's name (see `llmcalc gpus`), the path "
                        "of a GPU YAML, or a GPU")
    from llmcalc.inputs.gpus import load_gpu as load

    return load(gpu)


def layout(gpus: int | None = None, tp: int | None = None, pp: int = 1, dp: int = 1, ep: int = 1) -> dict:
    """The Workload field of the parallel degrees: tp defaults to gpus / (pp · dp)."""
    from llmcalc.workload import Layout

    return {"layout": Layout.of(gpus, tp, pp, dp, ep)}


def images(images: int = 0, image_size: str | tuple[int, int] | None = None) -> dict:
    """The Workload fields of the images: image_size from HEIGHTxWIDTH text (or a (height, width) pair)."""
    if image_size is None:
        return {"images": images}
    if not images:
        raise Unread("image_size", "`image_size` sizes each prompt's images; give `images` N, or leave it out")
    if isinstance(image_size, str):
        parts = image_size.lower().split("x")
        if len(parts) != 2 or not all(p.strip().isascii() and p.strip().isdigit() and len(p.strip()) <= 9
                                      for p in parts):  # ASCII digits only, as every count; no 5,000-digit side
            raise UserError(f"`image_size`: {image_size!r} is not HEIGHTxWIDTH; give pixels such as 896x896")
        image_size = (int(parts[0]), int(parts[1]))
    return {"images": images, "image_size": image_size}


def weights(weights_dtype: str | None = None, weights_format: str | None = None) -> dict:
    """The Workload fields of the weights' types: weights_format parsed (model/formats.py: WeightFormats.parse)."""
    formats = None
    if weights_format is not None:
        from llmcalc.model.formats import WeightFormats

        formats = WeightFormats.parse(weights_format)
    return {"weights_dtype": weights_dtype, "weights_format": formats}


def lora(lora_rank: int | None = None, lora_targets: str | None = None) -> dict:
    """The Workload fields of LoRA: lora_targets parsed when given."""
    if lora_targets is None:
        return {"lora_rank": lora_rank}
    from llmcalc.model.lora import parse_targets

    return {"lora_rank": lora_rank, "lora_targets": parse_targets(lora_targets)}


def recompute(recompute: str = "none", recompute_ops: str | None = None,
              recompute_layers: int | None = None) -> dict:
    """The Workload fields of activation recompute: recompute_ops a tuple in order, blanks dropped."""
    ops = recompute_ops
    return {"recompute": recompute, "recompute_layers": recompute_layers,
            "recompute_ops": None if ops is None else tuple(op.strip() for op in ops.split(",") if op.strip())}


def workload(*parts: dict, **fields: Any):
    """The Workload of converted parts (each a dict of fields, converted in the order given) and plain fields."""
    from llmcalc.workload import Workload

    given: dict = {}
    for part in parts:
        given.update(part)
    return Workload(**given, **fields)


def engine(name=None):
    """The serving engine `name` names (presets/engines/; None: the default one)."""
    from llmcalc.model.engine import Engine

    if isinstance(name, Engine):
        return name
    if isinstance(name, os.PathLike):
        name = str(_path(name, "engine"))
    if name is not None and not isinstance(name, str):
        raise UserError(f"`engine`: {clip(repr(name))} is not an engine; give vllm, vllm-v0, sglang, sglang-0.4, "
                        "trtllm, trtllm-triton, reference, the path of an engine YAML, or an Engine")
    from llmcalc.inputs.engines import load_engine

    return load_engine(name)


_engine = engine
"""engine(), for the functions whose `engine` keyword (the name the CLI's --engine gives) hides it."""


def time_model(device, kind: str | None = None, calibration=None, engine_name=None, serving: bool = False,
               **efficiencies: float | None):
    """The time model on `device` (inputs/time_models.py: load_time_model): under the serving engine named when
    `serving` (the command takes --engine), with `efficiencies` in place of its own; with no GPU, the roofline."""
    if device is None:
        from llmcalc.model.time_model import ROOFLINE

        given = next((k for k, v in (("time_model", kind), ("calibration", calibration), ("engine", engine_name))
                      if v is not None), None)
        if given is not None:
            raise Unread(given, f"`{given}` sets how a GPU's time is modelled; give `gpu` NAME, or leave it out")
        return ROOFLINE
    from llmcalc.inputs.time_models import load_time_model

    return load_time_model(kind, device, None if calibration is None else _path(calibration, "calibration"),
                           engine=engine(engine_name) if serving else None, **efficiencies)


def _path(value, field: str):
    """The Path a str or path-like `value` names; anything else (or a NUL in it) a UserError naming `field`."""
    from pathlib import Path

    if not isinstance(value, (str, os.PathLike)) or "\0" in str(value):
        raise UserError(f"`{field}`: {clip(repr(value))} is not a file's path; give one")
    return Path(value)


def with_ranges(report, ranges: str):
    """`report` with its time figures' error bands (llmcalc/costs/intervals.py: `ranges` names the function)."""
    from llmcalc.costs import intervals
    from llmcalc.inputs.intervals import load_bands

    return report.model_copy(update=getattr(intervals, ranges)(report, load_bands()))


DEFAULT_LENGTHS = ("1024", "256")
"""The prompt and output tokens per request of serve and plan when none are given."""


def _lengths(prompt, output) -> tuple:
    """(prompt, output) parsed, each an int or serve's text; None: its DEFAULT_LENGTHS."""
    from llmcalc.inputs.requests import parse_lengths

    return tuple(parse_lengths(str(default if given is None else given), name)
                 for given, default, name in zip((prompt, output), DEFAULT_LENGTHS, ("prompt", "output")))


def _slo(slo_ttft: float | None, slo_tpot: float | None):
    from llmcalc.views.serve import SLO

    return SLO(ttft_s=slo_ttft, tpot_s=slo_tpot)


def _grid(value, name: str) -> list[int]:
    from llmcalc.inputs.grid import parse_grid

    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    elif isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    return parse_grid(value, name)


def _models(model) -> list:
    """One model or a list of them, as a list (None: none)."""
    if model is None:
        return []
    return list(model) if isinstance(model, (list, tuple)) else [model]


# --- the commands --------------------------------------------------------------------------------------------

@_public
def params(model, *, bytes: bool = False):
    """Parameters: total, active per token, per component and per layer type (`llmcalc params`).

    bytes: also checkpoint_bytes, the checkpoint's tensor bytes as it ships. Returns a ParamsReport; counts
    are ints."""
    from llmcalc.costs.params import params as count

    spec = load_model(model)
    report = count(spec)
    if bytes:
        from llmcalc.costs.checkpoint import checkpoint_bytes

        size, how = checkpoint_bytes(spec)
        published = spec.checkpoint.index_total_size if spec.checkpoint is not None else None
        report = report.model_copy(update={"checkpoint_bytes": size, "checkpoint_formats": how,
                                           "hub_total_size_bytes": published})
    if spec.best_effort is not None:
        report = report.model_copy(update={"model_import": "best-effort", "assumed": spec.best_effort})
    return report


@_public
def kv(model, *, batch: int = 1, seq: int = 4096, encoder_seq: int | None = None, kv_dtype: str = "bf16",
       images: int = 0, image_size: str | tuple[int, int] | None = None):
    """KV cache bytes of `batch` sequences of `seq` tokens (`llmcalc kv`): total, per layer type, per token.

    kv_dtype: fp32, bf16, fp16, fp8, int8 or int4. Returns a KVReport; bytes are ints."""
    from llmcalc.costs.kv import kv_cache

    w = workload({"batch": batch, "seq": seq}, _images(images, image_size), encoder_seq=encoder_seq,
                 kv_dtype=kv_dtype)
    return kv_cache(load_model(model), w)


_images = images  # the keyword `images` hides the function in the commands below


@_public
def flops(model, *, batch: int = 1, seq: int = 4096, encoder_seq: int | None = None, gen: int = 1,
          images: int = 0, image_size: str | tuple[int, int] | None = None, attention: str = "causal",
          logits: str = "last",
          mla_decode: str = "absorbed", recompute: str = "none", recompute_ops: str | None = None,
          recompute_layers: int | None = None, attention_kernel: str = "flash", mtp: bool = False,
          elementwise: bool = False, embedding_matmul: bool = False, lora_rank: int | None = None,
          lora_targets: str | None = None):
    """FLOPs (a multiply-add is 2) of prefill, one decode step, `gen` decode steps and one training step
    (`llmcalc flops`).

    attention: causal, causal-half or dense pairs; logits: last or all; mla_decode: absorbed or decompress;
    lora_rank (--lora): LoRA adapters of that rank. Returns a FlopsReport; FLOPs are ints."""
    from llmcalc.costs.flops import flops as count

    w = workload({"batch": batch, "seq": seq}, _recompute(recompute, recompute_ops, recompute_layers),
                 lora(lora_rank, lora_targets), _images(images, image_size), encoder_seq=encoder_seq, gen=gen,
                 attention_core=attention, logits=logits, mla_decode=mla_decode, attention_kernel=attention_kernel,
                 mtp=mtp, elementwise=elementwise, embedding_matmul=embedding_matmul)
    return count(load_model(model), w)


_recompute = recompute
_lora = lora
_weights = weights
_layout = layout


@_public
def memory(model, *, batch: int = 1, seq: int = 4096, encoder_seq: int | None = None,
           weights_dtype: str | None = None, weights_format: str | None = None, kv_dtype: str = "bf16",
           group_size: int | None = None, flash: bool = True, train: bool = False, optimizer: str | None = None,
           recompute: str | None = None, zero: int = 0, micro_batch: int | None = None, lora_rank: int | None = None,
           lora_targets: str | None = None, qlora: bool = False, dp: int = 1, tp: int = 1, pp: int = 1,
           ep: int = 1, cp: int = 1, sp: bool = False, vpp: int = 1, first_stage_layers: int | None = None,
           last_stage_layers: int | None = None, embedding_in_split: bool = False, loss_in_split: bool = False,
           pp_layout: str | None = None, dropout: bool = False, grad_dtype: str | None = None,
           fusion: str = "fused", prefill_chunk: int | None = None, images: int = 0,
           image_size: str | tuple[int, int] | None = None):
    """Memory per GPU, in bytes: weights, KV cache, activations and, with train=True, gradients and optimizer
    states (`llmcalc memory`). batch: sequences (training: the global batch); tp, pp, dp, ep, cp, sp, vpp: the
    training layout; fusion: training's element-wise passes fused or eager (eager keeps more for the backward);
    prefill_chunk: inference activations of chunks of that many tokens; optimizer (default adamw), recompute
    (default none), grad_dtype and dropout shape a training step only. Returns a MemoryReport; bytes are ints."""
    from llmcalc.costs.memory import memory as estimate
    from llmcalc.workload import Layout

    if not train:
        given = [k for k, v in (("optimizer", optimizer), ("recompute", recompute), ("grad_dtype", grad_dtype),
                                ("dropout", dropout or None)) if v is not None]
        if given:
            raise Unread(given[0], f"`{given[0]}` shapes a training step's memory; add `train`, or leave it out")

    if qlora:
        if lora_rank is None:
            raise UserError("`qlora`: QLoRA trains LoRA adapters on the 4-bit base; add `lora_rank` RANK")
        if weights_format or weights_dtype:
            raise UserError("`qlora`: it sets the base format itself (nf4-dq, embedding and head bf16); drop "
                            "`weights_format` and `weights_dtype`, or drop `qlora`")
        from llmcalc.model.lora import QLORA_FORMATS

        weights_format = QLORA_FORMATS
    parallel = {"layout": Layout(dp=dp, tp=tp, pp=pp, ep=ep, cp=cp, sp=sp, vpp=vpp,
                                 first_stage_layers=first_stage_layers, last_stage_layers=last_stage_layers,
                                 embedding_in_split=embedding_in_split, loss_in_split=loss_in_split,
                                 pp_layout=pp_layout)}
    w = workload({"batch": batch, "seq": seq}, _weights(weights_dtype, weights_format), parallel,
                 lora(lora_rank, lora_targets), _images(images, image_size), encoder_seq=encoder_seq,
                 kv_dtype=kv_dtype, group_size=group_size, train=train, optimizer=optimizer or "adamw",
                 recompute=recompute or "none", flash=flash, zero=zero, dropout=dropout, grad_dtype=grad_dtype,
                 micro_batch=micro_batch, fusion=fusion,
                 **({"prefill_chunk": prefill_chunk} if prefill_chunk is not None else {}))
    if fusion != "fused" and not train:
        raise UserError(f"`fusion` {fusion} is how a training step runs its element-wise passes; add `train`, or "
                        "drop `fusion`")
    if prefill_chunk is not None and train:
        raise UserError("`prefill_chunk` sizes a server's prefill; a training step keeps every layer's activations: "
                        "drop `prefill_chunk` or `train`")
    return estimate(load_model(model), w, chunked=prefill_chunk is not None)


@_public
def latency(model, gpu=None, *, batch: int = 1, seq: int = 4096, encoder_seq: int | None = None, gen: int = 256,
            images: int = 0, image_size: str | tuple[int, int] | None = None, gpus: int | None = None,
            tp: int | None = None,
            pp: int = 1, dp: int = 1, ep: int = 1, weights_dtype: str | None = None,
            weights_format: str | None = None, kv_dtype: str | None = None, group_size: int | None = None,
            compute_dtype: str | None = None, attention_dtype: str | None = None,
            engine: str | os.PathLike | Engine | None = None,
            time_model: str | None = None, calibration=None, compute_efficiency: float | None = None,
            memory_efficiency: float | None = None, comm_efficiency: float | None = None,
            mla_decode: str = "absorbed", expert_skew: float | None = None, enforce_eager: bool = False,
            reserve: float = 0.10, interval: bool = False):
    """Time to first token, time per output token (seconds) and tokens/s, per phase and op, of `batch`
    sequences: a `seq`-token prompt, then `gen` tokens (the first by prefill), on `gpu` (required) with tp·pp·dp
    GPUs (`llmcalc latency`). time_model: calibrated or roofline (default: calibrated where the GPU has a
    profile, under `engine`); *_efficiency: shares of the peaks in place of the time model's; expert_skew: the
    experts' load skew under ep (a coefficient of variation; 0 uniform; default 1.64, docs/moe.md); enforce_eager:
    no CUDA graphs, each step at least the host's launches (docs/roofline.md#time-models); interval: also the range
    measured runs fell in. Returns a LatencyReport."""
    from llmcalc.costs.latency import latency as estimate

    w = workload(_weights(weights_dtype, weights_format), _layout(gpus, tp, pp, dp, ep),
                 _images(images, image_size), batch=batch, seq=seq, encoder_seq=encoder_seq, gen=gen,
                 kv_dtype=kv_dtype or "bf16", group_size=group_size, compute_dtype=compute_dtype,
                 attention_dtype=attention_dtype, mla_decode=mla_decode, expert_skew=expert_skew, reserve=reserve,
                 enforce_eager=enforce_eager)
    _skewed(w)
    device = load_gpu(gpu, "latency")
    tm = _time_model(device, time_model, calibration, engine, serving=True, compute_efficiency=compute_efficiency,
                     memory_efficiency=memory_efficiency, comm_efficiency=comm_efficiency)
    spec = load_model(model)
    w, notes = _engine_kv(w, kv_dtype, spec, _engine(engine))
    report = _noted(estimate(spec, device, w, tm), notes)
    return with_ranges(report, "latency_ranges") if interval else report


_time_model = time_model


def _engine_kv(w, kv_dtype: str | None, spec, serving) -> tuple[Any, list[str]]:
    """`w` under the KV dtype the engine `serving` runs `spec` with when `kv_dtype` is left out, and the note that
    says so: the KV quantisation the checkpoint states, where the engine's default cache dtype takes it
    (Engine.stated_kv_dtype); else `w` as it is (bf16)."""
    stated = None if kv_dtype is not None else serving.stated_kv_dtype(spec.checkpoint)
    if stated is None or stated == w.kv_dtype:
        return w, []
    return w.model_copy(update={"kv_dtype": stated}), [
        f"KV cache {stated}: the checkpoint states it and {serving.label}'s default cache dtype takes it; "
        "`kv_dtype` sets another"]


def _skewed(w) -> None:
    """Refuse an expert skew given where no expert-parallel ranks share the experts: it would time nothing."""
    if w.expert_skew is not None and w.layout.ep == 1:
        raise Unread("expert_skew", "`expert_skew` is the load skew between expert-parallel ranks; give `ep` > 1 "
                     "on a MoE model, or leave it out")


def _noted(report, notes: list[str]):
    """`report` with `notes` added to its own."""
    return report.model_copy(update={"notes": [*report.notes, *notes]}) if notes else report


@_public
def fit(model, gpu=None, *, batch: int = 1, seq: int = 4096, gpus: int | None = None, tp: int | None = None,
        pp: int = 1, dp: int = 1, ep: int = 1, weights_dtype: str | None = None, weights_format: str | None = None,
        kv_dtype: str | None = None, group_size: int | None = None, reserve: float | None = None,
        prefill_chunk: int | None = None, engine: str | os.PathLike | Engine | None = None,
        time_model: str | None = None, calibration=None,
        images: int = 0, image_size: str | tuple[int, int] | None = None):
    """Does it fit on `gpu` (required): weights, KV cache and workspace per GPU in bytes, the largest batch at
    `seq` and the longest context at `batch`; when it does not fit, the fewest GPUs that hold it (`llmcalc fit`).
    reserve: share of GPU memory kept for the runtime (default 0.1); prefill_chunk: tokens of the prefill
    chunk whose activations are held (default 8,192). With `engine` named, the KV budget is that serving engine's
    pool instead, by its rules, reserve defaulting to 1 − its GPU memory utilisation and prefill_chunk to its max
    batched tokens. Returns a FitReport."""
    from llmcalc.costs.fit import fit as check

    device = load_gpu(gpu, "fit")
    if reserve is not None and not 0 <= reserve < 1:
        raise UserError(f"`reserve`: {reserve} is not in [0, 1); give a share such as 0.1")
    if prefill_chunk is not None and prefill_chunk < 1:
        raise UserError(f"`prefill_chunk`: {prefill_chunk} tokens; give at least 1 (8192 is vLLM's step on an H100)")
    pool, layout = None, _layout(gpus, tp, pp, dp, ep)
    spec, notes = load_model(model), []
    if engine is not None:
        pool = _engine(engine).settings(device, layout["layout"], context=spec.max_seq_len,
                                        gpu_memory_utilization=None if reserve is None else 1 - reserve,
                                        max_batched_tokens=prefill_chunk, named=("prefill_chunk", "reserve"))
        reserve, prefill_chunk = pool.reserve, pool.max_batched_tokens
    w = workload(_weights(weights_dtype, weights_format), layout,
                 _images(images, image_size), batch=batch, seq=seq, kv_dtype=kv_dtype or "bf16",
                 group_size=group_size, reserve=0.10 if reserve is None else reserve,
                 prefill_chunk=prefill_chunk or 8192)
    tm = _time_model(device, time_model, calibration, engine, serving=True)
    if engine is not None:  # an engine's pool, in the engine's default cache dtype
        w, notes = _engine_kv(w, kv_dtype, spec, pool.engine)
    return _noted(check(spec, device, w, tm, pool), notes)


@_public
def compare(model=None, variants: list[str] | None = None, *, batch: int = 1, seq: int = 4096, gen: int = 256,
            groups: int | None = None, kv_lora_rank: int | None = None, rope_dim: int | None = None,
            q_lora_rank: int | None = None, window: int | None = None, global_tokens: int | None = None,
            topk: int | None = None, proj_len: int | None = None, gpu=None, gpus: int | None = None,
            tp: int | None = None, pp: int = 1, dp: int = 1, ep: int = 1,
            engine: str | os.PathLike | Engine | None = None,
            time_model: str | None = None, calibration=None, weights_dtype: str | None = None,
            weights_format: str | None = None, kv_dtype: str = "bf16"):
    """Side by side, with every figure's ratio to the first (`llmcalc compare`): one model (default, or an empty list:
    llama2-7b) with its attention swapped for each of `variants` (mha, gqa, mqa, mla, swa, longformer, linformer,
    reformer, dsa, mamba2, gdn, a list or the command's text "gqa,mla"; default mha, gqa, mqa, mla; groups,
    kv_lora_rank, … shape the swapped-in attention, each one a variant compared reads), or several models (a list)
    without variants. With `gpu`, also time and fit. Returns a CompareReport."""
    from llmcalc.views.compare import SwapRule, compare_attention, compare_models

    w = workload(_weights(weights_dtype, weights_format), _layout(gpus, tp, pp, dp, ep), batch=batch, seq=seq,
                 gen=gen, kv_dtype=kv_dtype)
    knobs = dict(groups=groups, kv_lora_rank=kv_lora_rank, rope_dim=rope_dim, q_lora_rank=q_lora_rank,
                 window=window, global_tokens=global_tokens, topk=topk, proj_len=proj_len)
    rule = SwapRule(**{k: v for k, v in knobs.items() if v is not None})  # its fields set: what was given
    if isinstance(variants, str):
        variants = [v.strip() for v in variants.replace(",", " ").split()]
    elif variants is not None and not (isinstance(variants, (list, tuple))
                                       and all(isinstance(v, str) for v in variants)):
        raise UserError(f"`variants`: {clip(repr(variants))} is not a list of variant names; give e.g. "
                        "[\"gqa\", \"mla\"]")
    specs = [load_model(m) for m in _models(model)]
    device = load_gpu(gpu)
    tm = _time_model(device, time_model, calibration, engine, serving=True)  # no GPU: no time
    from llmcalc.workload import Layout

    if device is None and w.layout != Layout():  # every other figure is the whole model's
        split = next(f for f, v in w.layout.model_dump().items() if v != Layout.model_fields[f].default)
        raise Unread(split, f"`{split}` splits the time over GPUs; give `gpu` NAME, or leave it out")
    if len(specs) > 1:
        if variants:
            raise UserError("compare: give attention variants with one base model, or several models without "
                            "variants, not both")
        if rule.model_fields_set:
            knob = sorted(rule.model_fields_set)[0]
            raise Unread(knob, f"`{knob}` shapes a swapped-in attention variant; several models are compared as "
                         "they are: leave it out")
        return compare_models(specs, w, device, tm)
    base = specs[0] if specs else load_model("llama2-7b")
    return compare_attention(base, variants or ["mha", "gqa", "mqa", "mla"], w, rule, device, tm)


EXPLAIN_TOPICS = ("params", "kv", "flops", "memory", "latency")
DEFAULT_GEN = {"flops": 1, "latency": 256}
"""explain's gen when not given: the default of the command the topic explains."""


@_public
def explain(topic: str | None, model, *, batch: int = 1, seq: int = 4096, gen: int | None = None,
kv_dtype: str = "bf16",
            weights_dtype: str | None = None, weights_format: str | None = None, attention: str = "causal",
            logits: str = "last", mla_decode: str = "absorbed", train: bool = False, optimizer: str = "adamw",
            gpu=None, engine: str | os.PathLike | Engine | None = None, time_model: str | None = None, calibration=None,
            gpus: int | None = None, tp: int | None = None, pp: int = 1, dp: int = 1, ep: int = 1, images: int = 0,
            image_size: str | tuple[int, int] | None = None):
    """A command's figures worked out (`llmcalc explain`): `topic` (params, kv, flops, memory or latency; latency
    needs `gpu`) as formula, symbols, arithmetic and result, checked against the command's own figure: the
    report's `matches` is False when a total does not match (the command then exits 1). gen: default 1 for
    flops, 256 for latency; engine: latency's serving engine (its profile and host costs, as `latency` takes
    them). Returns an ExplainReport."""
    from llmcalc.views.explain import explain as work_out

    if topic not in EXPLAIN_TOPICS:
        got = "no topic" if topic is None else f"unknown topic {clip(repr(topic))}"
        raise UserError(f"explain: {got}; give one of {', '.join(EXPLAIN_TOPICS)}, e.g. llmcalc explain kv -p "
                        "llama2-7b")
    w = workload({"batch": batch, "seq": seq}, _weights(weights_dtype, weights_format), _layout(gpus, tp, pp, dp, ep),
                 _images(images, image_size), gen=gen if gen is not None else DEFAULT_GEN.get(topic, 1),
                 kv_dtype=kv_dtype, attention_core=attention, logits=logits, mla_decode=mla_decode, train=train,
                 optimizer=optimizer)
    device = load_gpu(gpu)
    tm = _time_model(device, time_model, calibration, engine, serving=True)  # no GPU: no time
    return work_out(topic, load_model(model), w, device, tm)


def prepare_sweep(model, *, seq="1k..128k", batch="1", gpu=None, gpus: int | None = None, tp: int | None = None,
                  pp: int = 1, dp: int = 1, ep: int = 1, engine: str | os.PathLike | Engine | None = None,
                  time_model: str | None = None,
                  calibration=None, weights_dtype: str | None = None, weights_format: str | None = None,
                  kv_dtype: str | None = None, group_size: int | None = None, attention: str | None = None) -> Callable:
    """sweep's inputs read and checked, and the work left to do: call the result for the SweepReport."""
    from llmcalc.inputs.grid import check_rows, check_size
    from llmcalc.views.sweep import sweep as run

    seqs, batches = _grid(seq, "seq"), _grid(batch, "batch")
    check_size(batches, seqs)
    models = _models(model)
    if not models:
        raise UserError("give a model: `preset` NAME (repeat for several), `config` FILE.yaml, `hf_config` PATH or "
                        "`hf_model` ORG/NAME")
    w = workload(_weights(weights_dtype, weights_format), _layout(gpus, tp, pp, dp, ep), kv_dtype=kv_dtype or "bf16",
                 group_size=group_size)
    specs = [load_model(m) for m in models]
    serving = _engine(engine)
    taken = {s.name: _engine_kv(w, kv_dtype, s, serving) for s in specs}
    if len({t.kv_dtype for t, _ in taken.values()}) > 1:
        raise UserError("`kv_dtype`: the engine runs these models' KV caches in different dtypes, as their "
                        "checkpoints state; give one `kv_dtype` for the sweep")
    w, notes = next(iter(taken.values()))
    if attention is not None:
        from llmcalc.views.compare import attention_variant

        variants = [v.strip() for v in attention.split(",") if v.strip()]
        if not variants:
            raise UserError("`attention`: no variant given; list some of mha, gqa, mqa, mla, swa")
        specs = [attention_variant(s, v) for s in specs for v in dict.fromkeys(variants)]
    check_rows(len(specs), len(batches) * len(seqs))
    device = load_gpu(gpu)
    # no GPU: no time, and the engine sets the KV dtype only (above)
    tm = _time_model(device, time_model, calibration, engine if device is not None else None, serving=True)
    return _public(lambda: _noted(run(specs, device, batches, seqs, w, tm), notes))


@_public
def sweep(model, *, seq="1k..128k", batch="1", gpu=None, gpus: int | None = None, tp: int | None = None,
          pp: int = 1, dp: int = 1, ep: int = 1, engine: str | os.PathLike | Engine | None = None,
          time_model: str | None = None,
          calibration=None, weights_dtype: str | None = None, weights_format: str | None = None,
          kv_dtype: str | None = None, group_size: int | None = None, attention: str | None = None):
    """KV cache, memory, FLOPs and, with `gpu`, time and fit over a grid of batch sizes × context lengths
    (`llmcalc sweep`). model: one model or a list; seq, batch: a list of ints, or the command's grid text
    (`"1,8,64"`, `"1k..128k"` doubling, `"1k..8k:1k"` stepping); attention: variants of each model as separate
    series (`"mha,gqa,mla"`). Returns a SweepReport."""
    return prepare_sweep(model, seq=seq, batch=batch, gpu=gpu, gpus=gpus, tp=tp, pp=pp, dp=dp, ep=ep, engine=engine,
                         time_model=time_model, calibration=calibration, weights_dtype=weights_dtype,
                         weights_format=weights_format, kv_dtype=kv_dtype, group_size=group_size,
                         attention=attention)()


@_public
def moe(model, *, batch: int = 1, seq: int = 4096, capacity_factor: float | None = None,
        expert_skew: float | None = None):
    """MoE routing (`llmcalc moe`): expert capacity, expected dropped tokens under uniform random routing, router
    FLOPs, expert FLOPs dropless vs padded to capacity, for prefill (batch · seq tokens) and one decode step, and
    the busiest expert-parallel rank at expert_skew (latency's). capacity_factor: default the spec's, else
    dropless. Returns a MoEReport."""
    from llmcalc.costs.moe import moe_report

    return moe_report(load_model(model), workload({"batch": batch, "seq": seq}, expert_skew=expert_skew),
                      capacity_factor)


@_public
def train(model, gpu=None, *, batch: int = 512, seq: int = 4096, micro_batch: int | None = None,
          gpus: int | None = None, tp: int | None = None, pp: int = 1, dp: int = 1, ep: int = 1, cp: int = 1,
          sp: bool = False, tp_comm_overlap: bool = False, vpp: int = 1, first_stage_layers: int | None = None,
          last_stage_layers: int | None = None, embedding_in_split: bool = False, loss_in_split: bool = False,
          pp_layout: str | None = None, lora_rank: int | None = None,
          lora_targets: str | None = None, qlora: bool = False, weights_dtype: str | None = None,
          compute_dtype: str = "bf16", recompute: str = "none", optimizer: str = "adamw", zero: int = 0,
          attention: str = "causal", attention_impl: str = "cudnn", fusion: str = "fused",
          time_model: str | None = None, calibration=None, reserve: float = 0.10, auto: bool = False,
          interval: bool = False, engine: str | None = None):
    """Time (seconds), tokens/s and MFU of one training step of `batch` sequences of `seq` tokens on `gpu`
    (required) (`llmcalc train`): gpus alone spreads over data-parallel replicas (tp 1); a step that does not
    fit is refused (auto: the largest micro-batch that fits). `attention_impl`: the attention kernel whose
    published figures time the core (presets/kernels/attention.yaml), or "profile" (the time model's own).
    `fusion`: the element-wise passes fused (one kernel each) or eager (each PyTorch op a kernel).
    `engine` "reference": the bundled PyTorch model's step on one GPU, timed by its engine profile (its kernels
    counted under torch, which it needs); None: the time model's training stack. Returns a TrainReport."""
    from llmcalc.costs.training import training_step
    from llmcalc.inputs.kernels import with_attention_kernel
    from llmcalc.workload import Layout, require_sizes

    require_sizes(gpus=gpus, tp=tp, pp=pp, dp=dp, cp=cp)  # before they divide
    if gpus and tp is None and dp == 1:  # training spreads the GPUs over dp replicas unless told
        tp, dp = 1, max(1, gpus // (pp * cp))
    if qlora and lora_rank is None:
        raise UserError("`qlora`: QLoRA trains LoRA adapters on the 4-bit base; add `lora_rank` RANK")
    qlora_format = {}
    if qlora:
        from llmcalc.model.formats import WeightFormats
        from llmcalc.model.lora import QLORA_FORMATS

        qlora_format = {"weights_format": WeightFormats.parse(QLORA_FORMATS)}
    parallel = {"layout": Layout.of(gpus, tp, pp, dp, ep, cp, sp=sp, tp_comm_overlap=tp_comm_overlap, vpp=vpp,
                                    first_stage_layers=first_stage_layers,
                                    last_stage_layers=last_stage_layers, embedding_in_split=embedding_in_split,
                                    loss_in_split=loss_in_split, pp_layout=pp_layout)}
    w = workload({"batch": batch, "seq": seq}, parallel, lora(lora_rank, lora_targets), train=True,
                 micro_batch=micro_batch, weights_dtype=weights_dtype, compute_dtype=compute_dtype,
                 recompute=recompute, optimizer=optimizer, zero=zero, attention_core=attention, logits="all",
                 fusion=fusion, reserve=reserve, **qlora_format)
    device = load_gpu(gpu, "train")
    if engine is not None:
        from llmcalc.views.train_engine import train_on_engine

        return train_on_engine(load_model(model), device, w, engine, time_model=time_model, calibration=calibration,
                               auto=auto, interval=interval,
                               attention_impl=attention_impl if attention_impl != "cudnn" else None)
    tm = with_attention_kernel(_time_model(device, time_model, calibration), attention_impl, device)
    report = training_step(load_model(model), device, w, tm, auto=auto)
    return with_ranges(report, "train_ranges") if interval else report


@_public
def mfu(model, *, batch: int = 1, seq: int = 4096, tokens_per_s: float | None = None,
        step_time: float | None = None, gpus: int = 1, gpu=None, peak_tflops: float | None = None,
        compute_dtype: str = "bf16", attention: str = "causal", attention_kernel: str = "flash",
        recompute: str = "none", recompute_ops: str | None = None, recompute_layers: int | None = None):
    """MFU and HFU of a training run (`llmcalc mfu`): its measured throughput (tokens_per_s, all GPUs together,
    or step_time seconds per step of `batch` sequences) times the model's and the hardware's FLOPs per token,
    over the peak of `gpus` accelerators (`gpu` a preset, or peak_tflops one accelerator's dense TFLOP/s).
    Returns an MFUReport."""
    from llmcalc.costs.mfu import utilisation

    if (gpu is None) == (peak_tflops is None):
        raise UserError("`gpu`: give the accelerator as a preset (`gpu` NAME, see `llmcalc gpus`) or its peak "
                        "(`peak_tflops` N), one of the two")
    w = workload({"batch": batch, "seq": seq}, _recompute(recompute, recompute_ops, recompute_layers),
                 compute_dtype=compute_dtype, attention_core=attention, logits="all",
                 attention_kernel=attention_kernel)
    if gpu is not None:
        device = load_gpu(gpu)
        peak, name = device.peak(compute_dtype), device.name
    else:
        peak, name = peak_tflops * 1e12, None
    return utilisation(load_model(model), w, gpus=gpus, peak_flops=peak, tokens_per_s=tokens_per_s,
                       step_s=step_time, gpu=name)


SPEC_DEFAULTS = (3, 0.7)
"""Speculative decoding's draft tokens per step and each one's chance of acceptance, when not given."""


def prepare_serve(model, gpu=None, *, gpus: int | None = None, tp: int | None = None, pp: int = 1, dp: int = 1,
                  ep: int = 1, rate: float | None = None, concurrency: int | None = None, arrivals: str | None = None,
                  requests: int = 1000, prompt=None, output=None, trace=None, max_seqs: int | None = None,
                  max_batched_tokens: int | None = None, block_size: int | None = None,
                  gpu_memory_utilization: float | None = None, prefix_hit: float = 0.0, seed: int = 0,
                  slo_ttft: float | None = None, slo_tpot: float | None = None, draft=None, mtp: bool = False,
                  spec_tokens: int | None = None, acceptance: float | None = None, weights_dtype: str | None = None,
                  weights_format: str | None = None, kv_dtype: str | None = None, compute_dtype: str | None = None,
                  expert_skew: float | None = None, engine: str | os.PathLike | Engine | None = None,
                  time_model: str | None = None,
                  calibration=None, enforce_eager: bool = False):
    """serve's inputs read and checked: a ServeRun, whose run(update) simulates (update(advance=n) as requests
    finish, update(total=n) once a trace is read) and whose curve() sweeps the arrival rate."""
    from llmcalc.views.serve import Load, speculative

    if trace is not None and (rate is not None or concurrency is not None):
        raise UserError("`trace` gives the arrivals itself; leave out `rate` and `concurrency`")
    if trace is not None and (prompt is not None or output is not None):
        raise Unread("prompt" if prompt is not None else "output", "`trace` gives each request's prompt and output "
                     "lengths itself; leave out `prompt` and `output`")
    if arrivals not in (None, "poisson", "constant"):
        raise UserError(f"`arrivals`: {clip(repr(arrivals))} is no kind of arrivals; give poisson or constant")
    if arrivals is not None and rate is None:
        raise Unread("arrivals", f"`arrivals`: {clip(str(arrivals))} spaces the arrivals of a `rate`; give `rate`, or "
                     "leave out `arrivals`")
    if rate is not None and concurrency is not None:
        raise UserError("`rate` and `concurrency` are two loads; give one")
    if isinstance(draft, bool):
        raise UserError(f"`draft`: {draft} is not a model; give the draft model (a preset name), or `mtp`")
    if draft is not None and mtp:
        raise UserError("`draft` and `mtp` are two speculative decoders; give one")
    if draft is None and not mtp and (spec_tokens is not None or acceptance is not None):
        shaping = "spec_tokens" if spec_tokens is not None else "acceptance"
        raise Unread(shaping, f"`{shaping}` shapes speculative decoding; give `draft` NAME or `mtp`, or leave it out")
    load = Load(rate=float("inf") if rate is None and concurrency is None else rate, constant=arrivals == "constant",
                concurrency=concurrency)
    slo = _slo(slo_ttft, slo_tpot)
    lengths = None if trace is not None else _lengths(prompt, output)
    w = workload(_weights(weights_dtype, weights_format), _layout(gpus, tp, pp, dp, ep), kv_dtype=kv_dtype or "bf16",
                 compute_dtype=compute_dtype, expert_skew=expert_skew, enforce_eager=enforce_eager)
    _skewed(w)
    spec = load_model(model)
    device = load_gpu(gpu, "serve")
    tm = _time_model(device, time_model, calibration, engine, serving=True)
    serving = _engine(engine)
    w, notes = _engine_kv(w, kv_dtype, spec, serving)
    if w.enforce_eager:
        from llmcalc.costs.latency import eager_note
        from llmcalc.costs.step_time import StepTime

        notes.append(eager_note(StepTime(spec, device, w, tm, prefill=False), tm))
    settings = serving.settings(device, w.layout, w.enforce_eager, spec.max_seq_len, max_seqs=max_seqs,
                                max_batched_tokens=max_batched_tokens, block_size=block_size,
                                gpu_memory_utilization=gpu_memory_utilization)
    spec_dec = None
    if draft is not None or mtp:
        spec_dec = speculative(spec, device, w, tm, SPEC_DEFAULTS[0] if spec_tokens is None else spec_tokens,
                               SPEC_DEFAULTS[1] if acceptance is None else acceptance,
                               None if draft is None else _draft(draft), settings.max_batched_tokens)
    return ServeRun(spec, device, w, tm, load, lengths, None if trace is None else _path(trace, "trace"), requests,
                    seed, dict(engine=settings, slo=slo, seed=seed, spec_dec=spec_dec, prefix_hit=prefix_hit), notes)



def _draft(draft):
    """The draft model `draft` names; where it names no preset, the error names `draft`, not `preset`."""
    try:
        return load_model(draft)
    except UserError as e:
        raise UserError(e.worded(lambda field: "`draft`" if field == "preset" else f"`{field}`")) from None


class ServeRun:
    """A serving simulation ready to run: the model, GPU, workload, time model, load and requests of serve."""

    def __init__(self, spec, device, w, tm, load, lengths, trace, requests: int, seed: int, args: dict,
                 notes: list[str]) -> None:
        self.spec, self.device, self.w, self.tm = spec, device, w, tm
        self.load, self.lengths, self.trace, self.requests, self.seed, self.args = (
            load, lengths, trace, requests, seed, args)
        self.notes = notes
        """What the inputs decided that the report's own notes do not say (the KV dtype the engine took)."""

    def run(self, update: Callable[..., None] = lambda **change: None):
        """The ServeReport: requests drawn (or the trace read), then simulated."""
        from llmcalc.inputs.requests import load_trace
        from llmcalc.views.serve import Load, make_requests
        from llmcalc.views.serve import serve as simulate

        load = self.load
        if self.lengths is None:
            rows = load_trace(self.trace, self.requests)
            prompt_text = output_text = label = f"trace {self.trace.name}"
            load = Load(rate=None)
            update(total=len(rows))
        else:
            rows = make_requests(self.requests, *self.lengths, load, self.seed)
            prompt_text, output_text = (str(x) for x in self.lengths)
            label = None
        self._texts = dict(prompt=prompt_text, output=output_text, load_label=label)
        return _noted(simulate(self.spec, self.device, self.w, self.tm, rows, load=load,
                               progress=lambda n: update(advance=n), **self._texts, **self.args), self.notes)

    def check_curve(self) -> None:
        """Refuse the curve() that this run's load or size would not bound, before the run (views/serve.py:
        check_curve)."""
        from llmcalc.views.serve import check_curve

        if self.lengths is None:
            raise UserError("`plot_vs`: load sweeps the arrival rate a trace gives itself; leave out `trace`")
        check_curve(self.requests, self.lengths[1], self.load)

    def curve(self):
        """Goodput and latency over arrival rates up to the load's (after run)."""
        from llmcalc.views.serve import load_curve

        return load_curve(self.spec, self.device, self.w, self.tm, self.requests, *self.lengths, self.load,
                          **self._texts, **self.args)


@_public
def serve(model, gpu=None, *, gpus: int | None = None, tp: int | None = None, pp: int = 1, dp: int = 1, ep: int = 1,
          rate: float | None = None, concurrency: int | None = None, arrivals: str | None = None, requests: int = 1000,
          prompt=None, output=None, trace=None, max_seqs: int | None = None, max_batched_tokens: int | None = None,
          block_size: int | None = None, gpu_memory_utilization: float | None = None, prefix_hit: float = 0.0,
          seed: int = 0, slo_ttft: float | None = None, slo_tpot: float | None = None, draft=None,
          mtp: bool = False, spec_tokens: int | None = None, acceptance: float | None = None,
          weights_dtype: str | None = None, weights_format: str | None = None, kv_dtype: str | None = None,
          compute_dtype: str | None = None, expert_skew: float | None = None,
          engine: str | os.PathLike | Engine | None = None,
          time_model: str | None = None, calibration=None, enforce_eager: bool = False, interval: bool = False,
          progress: Callable[..., None] | None = None):
    """Throughput, goodput and latency (seconds) of a continuous-batching `engine` on `gpu` (required), simulated
    step by step under `requests` requests (`llmcalc serve`): arriving at `rate` per second (default all at
    once) or from `concurrency` clients, or read from a `trace` file; prompt and output lengths an int or the
    command's text (`"uniform:128,2048"`); slo_ttft, slo_tpot: latency targets in seconds; draft (a model) or mtp:
    speculative decoding; expert_skew: the experts' load skew under ep (latency's); enforce_eager: no CUDA graphs
    (latency's). progress(advance=n) is called as requests finish. Returns a ServeReport."""
    run = prepare_serve(model, gpu, gpus=gpus, tp=tp, pp=pp, dp=dp, ep=ep, rate=rate, concurrency=concurrency,
                        arrivals=arrivals, requests=requests, prompt=prompt, output=output, trace=trace,
                        max_seqs=max_seqs, max_batched_tokens=max_batched_tokens, block_size=block_size,
                        gpu_memory_utilization=gpu_memory_utilization, prefix_hit=prefix_hit, seed=seed,
                        slo_ttft=slo_ttft, slo_tpot=slo_tpot, draft=draft, mtp=mtp, spec_tokens=spec_tokens,
                        acceptance=acceptance, weights_dtype=weights_dtype, weights_format=weights_format,
                        kv_dtype=kv_dtype, compute_dtype=compute_dtype, expert_skew=expert_skew, engine=engine,
                        time_model=time_model, calibration=calibration, enforce_eager=enforce_eager)
    report = run.run(progress or (lambda **change: None))
    return with_ranges(report, "serve_ranges") if interval else report


@_public
def plan(model, gpu=None, *, max_gpus: int = 8, rate: float | None = None, prompt=None, output=None,
         slo_ttft: float | None = None, slo_tpot: float | None = None, price=None, disaggregated: bool = False,
         top: int = 5, requests: int = 400, seed: int = 0, engine: str | os.PathLike | Engine | None = None,
         time_model: str | None = None,
         timings: bool = False, emit: str | None = None, candidate: int | None = None,
         expert_skew: float | None = None, progress: Callable[[str, int, int], None] | None = None):
    """The cheapest deployments (tp/pp/ep/dp, dtype, max batch) that meet p99 TTFT / TPOT targets (slo_ttft,
    slo_tpot, seconds; at least one) at `rate` requests/s (`llmcalc plan`). gpu: a GPU or a list (default
    h100-sxm); price: USD per GPU-hour, a dict {gpu: usd} or a list of "GPU=USD"; requests: each finalist's
    simulation; emit: "vllm", "sglang" or "trtllm" adds that engine's launch and benchmark commands for the
    deployment ranked `candidate` (1, the best, by default); expert_skew: the experts' load skew under ep
    (latency's). progress(what, done, total) is called as the search goes. Returns a PlanReport."""
    from llmcalc.inputs.engines import load_engine
    from llmcalc.inputs.grid import parse_number
    from llmcalc.inputs.time_models import load_time_model
    from llmcalc.model.gpu import FIGURE_MAX, FIGURE_MIN
    from llmcalc.views.plan import plan as search

    if rate is None:
        raise UserError("`rate`: give the requests/s to serve, e.g. `rate` 10")
    if slo_ttft is None and slo_tpot is None:
        raise UserError("`slo_ttft` / `slo_tpot`: give at least one target, e.g. `slo_ttft` 2 `slo_tpot` 0.05")
    if max_gpus < 1 or top < 1:
        raise UserError("`max_gpus` and `top`: give at least 1")
    if candidate is not None and emit is None:
        raise UserError("`candidate`: it picks the deployment `emit` writes for; give `emit` vllm, sglang or trtllm")
    if candidate is not None and not 1 <= candidate <= top:
        raise UserError(f"`candidate`: {candidate} is not a rank from 1 to `top` ({top}); give e.g. `candidate` 1")
    commands = None
    if emit is not None:
        from llmcalc.inputs.engines import load_engine_commands

        commands = load_engine_commands(emit)
        if engine is None:
            engine = emit
        elif engine != emit:
            raise UserError(f"`emit`: the plan runs on `engine` {engine}'s settings, not {emit}'s; give `engine` "
                            f"{emit}, or leave `engine` out")
    named = gpu if isinstance(gpu, (list, tuple)) else [gpu] if gpu is not None else []
    devices = []
    for device in (load_gpu(g, "plan") for g in dict.fromkeys(named or ["h100-sxm"])):
        if device in devices:  # one GPU given twice (a preset and a copy of its file)
            continue
        if any(d.name == device.name for d in devices):
            raise UserError(f"`gpu`: two GPUs given are named {clip(device.name, 60)!r} with different figures (a "
                            "GPU file's name and a preset's, or two files'); give each GPU file a name of its own")
        devices.append(device)
    prices = {d.name: d.price_per_hour for d in devices}
    items = [f"{k}={v}" for k, v in price.items()] if isinstance(price, dict) else price
    if items is not None and not (isinstance(items, (list, tuple)) and all(isinstance(i, str) for i in items)):
        raise UserError(f"`price`: {clip(repr(price))} is not a list of GPU=USD or a mapping of GPU to USD; give "
                        "e.g. [\"h100-sxm=2.5\"]")
    priced: set[str] = set()
    for item in items or []:
        name, _, usd = item.partition("=")
        if name in priced:
            raise UserError(f"`price`: {name} is priced twice; give each GPU's price once")
        priced.add(name)
        try:
            value = parse_number(usd)
        except ValueError:
            value = -1.0
        if name not in prices or not FIGURE_MIN <= value <= FIGURE_MAX:  # NaN fails both comparisons, inf the second
            raise UserError(f"`price`: {clip(item, 60)!r} is not GPU=USD ({FIGURE_MIN:g} to {FIGURE_MAX:,.0f}) for a "
                            "`gpu` given "
                            f"({', '.join(prices)}); write e.g. {next(iter(prices))}=2.5")
        prices[name] = value
    lengths = _lengths(prompt, output)
    serving = load_engine(engine)
    tms = {d.name: load_time_model(time_model, d, None, engine=serving) for d in devices}
    args = (load_model(model), devices, tms, max_gpus, rate, *lengths, *(str(x) for x in lengths),
            _slo(slo_ttft, slo_tpot), prices, serving)
    report = search(*args, disaggregated=disaggregated, top=top, requests=requests, seed=seed, timings=timings,
                    expert_skew=expert_skew, progress=progress or (lambda what, done, total: None))
    if commands is None:
        return report
    if candidate is None and not report.candidates:  # as a plan without emit: exit 0, the note says why
        return _noted(report, [f"no {commands.engine} commands written: no deployment met the targets"])
    from llmcalc.views.emit import Load, emit_for

    load = Load(rate=rate, prompt=lengths[0], output=lengths[1], requests=requests, seed=seed,
                slo=_slo(slo_ttft, slo_tpot))
    return emit_for(report, args[0], devices, serving, commands, candidate or 1, load)


def _files(files, field: str) -> list:
    """One path, or any iterable of them (a list, a glob), as a list of at least one; anything else a UserError
    naming `field`."""
    single = isinstance(files, (str, os.PathLike))
    many = not single and hasattr(files, "__iter__") and not isinstance(files, (bytes, dict))
    paths = [files] if single else list(files) if many else None
    if not paths or not all(isinstance(p, (str, os.PathLike)) and "\0" not in str(p) for p in paths):
        raise UserError(f"`{field}`: {clip(repr(files))} is not a result file's path or a list of them; give at "
                        "least one")
    return list(paths)


@_public
def measured(files, model=None, gpu=None, *, gpus: int | None = None, tp: int | None = None, pp: int = 1,
             dp: int = 1, ep: int = 1, rate: float | None = None, concurrency: int | None = None,
             requests: int | None = None, prompt=None, output=None, seed: int = 0, weights_dtype: str | None = None,
             weights_format: str | None = None, kv_dtype: str | None = None,
             engine: str | os.PathLike | Engine | None = None,
             time_model: str | None = None, calibration=None):
    """Serving-benchmark result files (vLLM, SGLang, genai-perf, AIPerf, trtllm-bench; one path or a list), each
    run beside `llmcalc serve`'s prediction of the same model, GPU, engine, layout and workload (`llmcalc
    measured`). Each input left None is the file's: model (the preset whose source the file names), gpu (the
    one its telemetry names), engine, the layout (trtllm-bench's), requests, the load (rate or concurrency) and
    the prompt and output lengths (an int or serve's text; default the file's mean); kv_dtype, as serve's (default
    the engine's default cache dtype). Returns a MeasuredReport;
    each run's `serve_args` are the `llmcalc serve` arguments of its prediction."""
    from llmcalc.views.measured import measured as compare

    if rate is not None and concurrency is not None:
        raise UserError("`rate` and `concurrency` are two loads; give one")
    paths = _files(files, "files")
    return compare(paths, model, gpu, gpus=gpus, tp=tp, pp=pp, dp=dp, ep=ep, weights_dtype=weights_dtype,
                   weights_format=weights_format, kv_dtype=kv_dtype, engine=engine, time_model=time_model,
                   calibration=calibration, rate=rate, concurrency=concurrency, requests=requests, prompt=prompt,
                   output=output, seed=seed)


@_public
def calibrate_from_runs(from_runs, model=None, gpu=None, *, served_by: str | None = None):
    """The time-model profile of the GPU and engine that served the runs in `from_runs` (result files as `measured`
    reads them), refitted to their measured TTFT and TPOT (`llmcalc calibrate --from-runs`; no torch). model,
    gpu: the runs' (default: the files'); served_by: the engine, where the files do not say. Returns a Refit:
    `profile` (a TimeModel), `lines` (each term before and after, the leave-one-out) and `text()`, the profile
    file the command prints; nothing is written."""
    from llmcalc.views.measured import refit_runs

    return refit_runs(_files(from_runs, "from_runs"), model, gpu, served_by)


def _amount(value, name: str) -> float:
    """A count as papers print it (70B, 1.4T, 5.76e23) or a number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    from llmcalc.inputs.grid import parse_amount

    try:
        return parse_amount(str(value))
    except ValueError as e:
        raise UserError(f"`{name}`: {e}") from None


@_public
def scale(*, flops=None, params=None, tokens=None, method: str = "all", gpu=None, gpus: int | None = None,
          mfu: float | None = None, price: float | None = None, compute_dtype: str | None = None):
    """Compute-optimal model size N, training tokens D and FLOPs (C = 6·N·D) from exactly one of flops, params or
    tokens (a number, or text as papers print it: "70B", "1.4T", "5.76e23"), under Chinchilla's approaches 1-3
    and Kaplan's law (`llmcalc scale`); method: all, chinchilla-1, chinchilla-2, chinchilla-3 or kaplan. With
    `gpu`, the training GPU-hours, days on `gpus` GPUs at `mfu` (default 0.40) and cost at `price` USD per
    GPU-hour (default the preset's). Returns a ScaleReport."""
    from llmcalc.costs.scaling import scale as compute

    given = {k: _amount(v, k) for k, v in (("flops", flops), ("params", params), ("tokens", tokens)) if v is not None}
    if len(given) != 1:
        raise UserError("give exactly one of `flops` C, `params` N or `tokens` D")
    (what, value), = given.items()
    return compute(what, value, method, load_gpu(gpu), gpus, mfu, price, compute_dtype)


class ValidateRun:
    """validate's inputs read and checked: `models` specs to check; call it for the ValidationReport, with
    progress(name) called before each model is measured."""

    def __init__(self, specs: list, batch: int, seq: int, device: str, mla_decode: str, adapters) -> None:
        self.specs, self.args, self.adapters = specs, (batch, seq, device, mla_decode), adapters
        self.models = len(specs)

    def __call__(self, progress: Callable[[str], None] | None = None):
        from llmcalc.views.validate import validate as run

        step = None if progress is None else (lambda spec: progress(spec.name))
        return _public(run)(self.specs, *self.args, progress=step, lora=self.adapters)


def prepare_validate(model=None, *, all_presets: bool = False, batch: int = 2, seq: int = 128, device: str = "fake",
                     layers: int | None = None, scale: int = 1, mla_decode: str = "absorbed", train: bool = False,
                     lora_rank: int | None = None, lora_targets: str | None = None) -> ValidateRun:
    """validate's inputs read and checked (sizes, LoRA, the models, the device: torch there), the models loaded:
    a ValidateRun."""
    from llmcalc.inputs.models import ModelRef
    from llmcalc.views.validate import check_measurable, check_real_run, require_device, scaled_copy
    from llmcalc.workload import require_sizes

    require_sizes(batch=batch, seq=seq, scale=scale, layers=layers)
    if device not in ("fake", "cpu", "cuda"):
        raise UserError(f"`device`: {clip(repr(device))} is not fake, cpu or cuda; give one of them")
    workload(mla_decode=mla_decode)  # one of the conventions, or refused naming it
    adapters = None
    if train or lora_rank is not None:
        if not train:
            raise UserError("`lora_rank`: LoRA adapters are trained; add `train`")
        if lora_rank is None:
            raise UserError("`train`: validate's training step is a LoRA one (full training's FLOPs are in the "
                            "default rows); add `lora_rank` RANK")
        adapters = workload(_lora(lora_rank, lora_targets), train=True)
    if all_presets:
        from llmcalc.inputs.presets import preset_names

        models = [ModelRef(preset=name) for name in preset_names()]
    else:
        models = _models(model) or [ModelRef()]
    specs = [load_model(m) for m in models]
    if layers or scale > 1:
        specs = [scaled_copy(s, layers, scale) for s in specs]
    for s in specs:
        check_measurable(s, batch, seq)
    require_device(device)  # only now, so bad input is named before a missing torch
    if device != "fake":
        for s in specs:
            check_real_run(s, batch, seq, device)
    return ValidateRun(specs, batch, seq, device, mla_decode, adapters)


@_public
def validate(model=None, *, all_presets: bool = False, batch: int = 2, seq: int = 128, device: str = "fake",
             layers: int | None = None, scale: int = 1, mla_decode: str = "absorbed", train: bool = False,
             lora_rank: int | None = None, lora_targets: str | None = None,
             progress: Callable[[str], None] | None = None):
    """Every estimate (params, FLOPs, KV cache, memory; with train and lora_rank, a LoRA training step) against
    the torch reference model built from the spec (`llmcalc validate`; needs torch, imported only here). model:
    one or a list; all_presets: every preset. device: fake (full size, FakeTensorMode), cpu (a real run: scale
    divides every width, layers keeps the first N) or cuda. progress(name) is called before each model is measured.
    Returns a ValidationReport; its `ok` is False when a row fails (the command then exits 1)."""
    return prepare_validate(model, all_presets=all_presets, batch=batch, seq=seq, device=device, layers=layers,
                            scale=scale, mla_decode=mla_decode, train=train, lora_rank=lora_rank,
                            lora_targets=lora_targets)(progress)
