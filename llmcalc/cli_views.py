"""Commands of the views built on the estimators: compare, explain, sweep, moe and schema. They register
on the `app` of cli.py and share its options; parse, load, call, render, no arithmetic here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from .cli import (CONVENTIONS, COUNT_HELP, MODEL, OUTPUT, TRAINING, WORKLOAD, AttentionOpt, BatchOpt, ConfigOpt,
                  DPOpt, EPOpt, FormatOpt, GPUsOpt, GroupOpt, HFOpt, KVDtypeOpt, LogitsOpt, MLADecodeOpt,
                  OptionalGPUOpt, PPOpt, PresetOpt, SeqOpt, TPOpt, UnitsOpt, WeightsDtypeOpt, _count_opt, _opt, app,
                  layout_of, load_gpu_named, load_model, positive, storage_of)
from .errors import UserError
from .render import emit

SWAP = "Swap rule"
"""Help panel of compare's swap-rule options."""


@app.command()
def compare(
    variants: Annotated[Optional[list[str]], typer.Argument(
        help="Attention variants to swap in: mha, gqa, mqa, mla, swa, longformer, linformer, reformer, dsa "
             "(default: mha, gqa, mqa, mla).", show_default=False, metavar="[VARIANT]...")] = None,
    preset: Annotated[Optional[list[str]], _opt(
        "--preset", "-p", help="Base model (default llama2-7b); repeat with no variants to compare models.",
        panel=MODEL, metavar="NAME")] = None,
    config: Annotated[Optional[list[Path]], _opt("--config", "-c", help="A spec YAML; repeatable.", panel=MODEL,
                                                 metavar="FILE")] = None,
    batch: BatchOpt = 1,
    seq: SeqOpt = 4096,
    gen: Annotated[int, _count_opt("--gen", "-g", help="Tokens to generate (latency with --gpu).")] = 256,
    groups: Annotated[Optional[int], _count_opt("--groups", help="GQA kv heads (default: the base's, else 8).",
                                                panel=SWAP)] = None,
    kv_lora_rank: Annotated[Optional[int], _count_opt("--kv-lora-rank", help="MLA latent d_c (default 4·d_h).",
                                                      panel=SWAP)] = None,
    rope_dim: Annotated[Optional[int], _count_opt("--rope-dim", help="MLA decoupled RoPE dim d_r (default d_h/2).",
                                                  panel=SWAP)] = None,
    q_lora_rank: Annotated[Optional[int], _count_opt("--q-lora-rank", help="MLA query latent (default: none).",
                                                     panel=SWAP)] = None,
    window: Annotated[int, _count_opt("--window", help="SWA and Longformer window in tokens.", panel=SWAP)] = 4096,
    global_tokens: Annotated[int, _count_opt("--global-tokens", help="Longformer global tokens (the first "
                                             "positions).", panel=SWAP)] = 64,
    topk: Annotated[int, _count_opt("--topk", help="DSA keys each query attends to (top-k of its indexer).",
                                    panel=SWAP)] = 2048,
    proj_len: Annotated[int, _count_opt("--proj-len", help="Linformer projected length k (rows of K and V).",
                                        panel=SWAP)] = 256,
    gpu: OptionalGPUOpt = None,
    gpus: GPUsOpt = None,
    tp: TPOpt = None,
    pp: PPOpt = 1,
    dp: DPOpt = 1,
    ep: EPOpt = 1,
    weights_dtype: WeightsDtypeOpt = "bf16",
    kv_dtype: KVDtypeOpt = "bf16",
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """Side by side: one model with its attention swapped (`compare gqa mla`), or several models
    (`compare -p llama2-7b -p mistral-7b`), with every figure's ratio to MHA or the first model."""
    from .compare import CompareOptions, compare_attention, compare_models
    from .presets import load_preset, load_spec_file

    positive(batch=batch, seq=seq, gen=gen, window=window, topk=topk, proj_len=proj_len,
             **{k: v for k, v in (("groups", groups), ("kv_lora_rank", kv_lora_rank), ("rope_dim", rope_dim),
                                  ("q_lora_rank", q_lora_rank)) if v is not None})
    opts = CompareOptions(batch=batch, seq=seq, gen=gen, weights_dtype=weights_dtype, kv_dtype=kv_dtype,
                          groups=groups, kv_lora_rank=kv_lora_rank, rope_dim=rope_dim, q_lora_rank=q_lora_rank,
                          window=window, global_tokens=global_tokens, topk=topk, proj_len=proj_len,
                          layout=layout_of(gpus, tp, pp, dp, ep))
    specs = [load_preset(p) for p in preset or []] + [load_spec_file(c) for c in config or []]
    device = load_gpu_named(gpu)
    if len(specs) > 1:
        if variants:
            raise UserError("compare: give attention variants with one base model, or several models without "
                            "variants, not both")
        emit(compare_models(specs, opts, device), format, units)
        return
    base = specs[0] if specs else load_preset("llama2-7b")
    emit(compare_attention(base, variants or ["mha", "gqa", "mqa", "mla"], opts, device), format, units)


TOPICS = ("params", "kv", "flops", "memory", "latency")


@app.command()
def explain(
    topic: Annotated[Optional[str], typer.Argument(
        help="The command whose figures to work out: params, kv, flops, memory or latency.", show_default=False,
        metavar="TOPIC")] = None,
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    batch: BatchOpt = 1,
    seq: SeqOpt = 4096,
    gen: Annotated[Optional[int], _count_opt(
        "--gen", "-g", help="Generated tokens (default: 1 for flops, 256 for latency).")] = None,
    kv_dtype: KVDtypeOpt = "bf16",
    weights_dtype: WeightsDtypeOpt = "bf16",
    attention: AttentionOpt = "causal",
    logits: LogitsOpt = "last",
    mla_decode: MLADecodeOpt = "absorbed",
    train: Annotated[bool, _opt("--train/--inference", help="memory: a training step.", panel=TRAINING)] = False,
    optimizer: Annotated[Literal["adamw", "adamw-8bit", "sgd"], _opt(
        "--optimizer", help="memory --train: adamw, adamw-8bit or sgd.", panel=TRAINING,
        metavar="NAME")] = "adamw",
    gpu: Annotated[Optional[str], _opt("--gpu", help="latency: GPU preset or GPU YAML file (required).",
                                       panel="GPUs and layout", metavar="NAME")] = None,
    gpus: GPUsOpt = None,
    tp: TPOpt = None,
    pp: PPOpt = 1,
    dp: DPOpt = 1,
    ep: EPOpt = 1,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """A command's figures worked out: formula, symbols, arithmetic, result, checked against the command;
    exit 1 if a total does not match."""
    from .explain import ExplainOptions
    from .explain import explain as work_out
    from .flops import Conventions

    if topic not in TOPICS:
        got = "no topic" if topic is None else f"unknown topic {topic!r}"
        raise UserError(f"explain: {got}; give one of {', '.join(TOPICS)}, e.g. llmcalc explain kv -p llama2-7b")
    positive(batch=batch, seq=seq, **({"gen": gen} if gen is not None else {}))
    spec = load_model(preset, config, hf_config)
    opts = ExplainOptions(batch=batch, seq=seq, gen=gen, kv_dtype=kv_dtype, weights_dtype=weights_dtype,
                          conventions=Conventions(attention=attention, logits=logits, mla_decode=mla_decode),
                          train=train, optimizer=optimizer, gpu=load_gpu_named(gpu),
                          layout=layout_of(gpus, tp, pp, dp, ep))
    report = work_out(topic, spec, opts)
    emit(report, format, units)
    if not report.matches:
        raise typer.Exit(1)


GRID_HELP = "a list (1,8,64), a range a..b doubling from a (1k..128k) or a..b:step stepping linearly (1k..8k:1k); " \
    + COUNT_HELP


@app.command()
def sweep(
    preset: Annotated[Optional[list[str]], _opt(
        "--preset", "-p", help="Preset name; repeat for several models.", panel=MODEL, metavar="NAME")] = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    seq: Annotated[str, _opt("--seq", "-s", help=f"Context lengths: {GRID_HELP}.", panel=WORKLOAD,
                             metavar="GRID")] = "1k..128k",
    batch: Annotated[str, _opt("--batch", "-b", help="Batch sizes (in all), written as --seq.", panel=WORKLOAD,
                               metavar="GRID")] = "1",
    gpu: OptionalGPUOpt = None,
    gpus: GPUsOpt = None,
    tp: TPOpt = None,
    pp: PPOpt = 1,
    dp: DPOpt = 1,
    ep: EPOpt = 1,
    weights_dtype: WeightsDtypeOpt = "bf16",
    kv_dtype: KVDtypeOpt = "bf16",
    group_size: GroupOpt = 128,
    attention: Annotated[Optional[str], _opt(
        "--attention", help="Attention variants of each model as separate series, e.g. mha,gqa,mla (the swap "
        "rule of `llmcalc compare`).", panel=CONVENTIONS, metavar="LIST")] = None,
    plot: Annotated[Optional[Path], _opt("--plot", help="Also draw memory vs context and time per output token vs "
                                         "batch to FILE.png or FILE.svg (pip install 'llmcalc-cost\\[plot]').",
                                         panel=OUTPUT, metavar="FILE")] = None,
    bars: Annotated[bool, _opt("--bars", help="Table view: a bar of memory per point.", panel=OUTPUT)] = False,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """KV cache, memory, FLOPs and (with --gpu) time and fit over a grid of batch sizes × context lengths."""
    from .grid import check_rows, check_size, parse_grid
    from .latency import LatencyOptions
    from .sweep import sweep as run

    seqs, batches = parse_grid(seq, "--seq"), parse_grid(batch, "--batch")
    check_size(batches, seqs)
    if plot is not None:
        from .render.plot import check_target, plot_sweep

        check_target(plot)
    sources = [(p, None, None) for p in preset or []]
    sources += [(None, config, None)] if config else []
    sources += [(None, None, hf_config)] if hf_config else []
    if not sources:
        raise UserError("give a model: --preset NAME (repeat for several), --config FILE.yaml or --hf-config PATH")
    opts = LatencyOptions(storage=storage_of(weights_dtype, kv_dtype, group_size),
                          layout=layout_of(gpus, tp, pp, dp, ep))
    specs = [load_model(*s) for s in sources]
    if attention is not None:
        from .compare import CompareOptions, attention_variant

        variants = [v.strip() for v in attention.split(",") if v.strip()]
        if not variants:
            raise UserError("--attention: no variant given; list some of mha, gqa, mqa, mla, swa")
        specs = [attention_variant(s, v, CompareOptions()) for s in specs for v in dict.fromkeys(variants)]
    check_rows(len(specs), len(batches) * len(seqs))
    report = run(specs, load_gpu_named(gpu), batches, seqs, opts)
    if plot is not None:
        plot_sweep(report, plot, units)
        sys.stderr.write(f"plot: wrote {plot}\n")
    emit(report, format, units, bars=bars)


@app.command()
def moe(
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    batch: BatchOpt = 1,
    seq: SeqOpt = 4096,
    capacity_factor: Annotated[Optional[float], _opt(
        "--capacity-factor", help="Expert capacity C = ceil(cf · tokens · top_k / experts); default: the spec's "
        "capacity_factor, else dropless.", panel=CONVENTIONS, metavar="CF")] = None,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """MoE routing: expert capacity, expected dropped tokens (uniform random routing), router FLOPs, and
    expert FLOPs dropless vs padded to capacity, for prefill (B·S tokens) and one decode step (B)."""
    import math

    from .moe import moe_report

    positive(batch=batch, seq=seq)
    if capacity_factor is not None and not (math.isfinite(capacity_factor) and capacity_factor > 0):
        raise UserError(f"--capacity-factor: must be a finite number > 0 (got {capacity_factor}); e.g. 1.25")
    emit(moe_report(load_model(preset, config, hf_config), batch, seq, capacity_factor), format, units)


@app.command()
def schema(
    command: Annotated[Optional[str], typer.Argument(help="A command name; all of them when left out.",
                                                     show_default=False, metavar="[COMMAND]")] = None,
) -> None:
    """The JSON Schema of each command's --format json output (Pydantic models, see docs/schemas.md)."""
    import json

    from .schema import COMMAND_REPORTS, command_schema

    if command is not None and command not in COMMAND_REPORTS:
        raise UserError(f"schema: unknown command {command!r}; give one of {', '.join(COMMAND_REPORTS)}")
    out = command_schema(command) if command else {c: command_schema(c) for c in COMMAND_REPORTS}
    sys.stdout.write(json.dumps(out, indent=2) + "\n")
