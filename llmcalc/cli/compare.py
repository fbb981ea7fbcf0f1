"""The `llmcalc compare` command: attention variants or models side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from llmcalc.cli import groups
from llmcalc.cli.app import command
from llmcalc.cli.options import (
    MODEL,
    HFGenericOpt,
    KVDtypeOpt,
    OptionalGPUOpt,
    _count_opt,
    _opt,
)

from llmcalc.errors import UserError

SWAP = "Swap rule"
"""Help panel of compare's swap-rule options."""


@command(rank=110, help=(
    "Side by side: one model with its attention swapped (`compare gqa mla`), or several models "
    "(`compare -p llama2-7b -p mistral-7b`), with every figure's ratio to MHA or the first model."))
def compare(
    *,
    variants: Annotated[Optional[list[str]], typer.Argument(
        help="Attention variants to swap in: mha, gqa, mqa, mla, swa, longformer, linformer, reformer, dsa, "
             "mamba2, gdn "
             "(default: mha, gqa, mqa, mla).", show_default=False, metavar="[VARIANT]...")] = None,
    preset: Annotated[Optional[list[str]], _opt(
        "--preset", "-p", help="Base model (default llama2-7b); repeat with no variants to compare models.",
        panel=MODEL, metavar="NAME")] = None,
    config: Annotated[Optional[list[Path]], _opt("--config", "-c", help="A spec YAML; repeatable.", panel=MODEL,
                                                 metavar="FILE")] = None,
    hf_config: Annotated[Optional[list[Path]], _opt(
        "--hf-config", help="A Hugging Face config.json or its folder; repeatable.", panel=MODEL,
        metavar="PATH")] = None,
    hf_model: Annotated[Optional[list[str]], _opt(
        "--hf-model", help="A Hub id, ORG/NAME or ORG/NAME@REV; repeatable.", panel=MODEL,
        metavar="ID")] = None,
    hf_generic: HFGenericOpt = False,
    shape: groups.Batch,
    gen: Annotated[int, _count_opt("--gen", "-g", help="Tokens to generate (latency with --gpu).")] = 256,
    groups: Annotated[Optional[int], _count_opt("--groups", help="GQA kv heads (default: the base's, else 8).",
                                                panel=SWAP)] = None,
    kv_lora_rank: Annotated[Optional[int], _count_opt("--kv-lora-rank", help="MLA latent d_c (default 4·d_h).",
                                                      panel=SWAP)] = None,
    rope_dim: Annotated[Optional[int], _count_opt("--rope-dim", help="MLA decoupled RoPE dim d_r (default d_h/2).",
                                                  panel=SWAP)] = None,
    q_lora_rank: Annotated[Optional[int], _count_opt("--q-lora-rank", help="MLA query latent (default: none).",
                                                     panel=SWAP)] = None,
    window: Annotated[Optional[int], _count_opt("--window", help="SWA and Longformer window in tokens (default "
                                                "4096).", panel=SWAP)] = None,
    global_tokens: Annotated[Optional[int], _count_opt("--global-tokens", help="Longformer global tokens, the first "
                                                       "positions (default 64).", panel=SWAP)] = None,
    topk: Annotated[Optional[int], _count_opt("--topk", help="DSA keys each query attends to, the top-k of its "
                                              "indexer (default 2048).", panel=SWAP)] = None,
    proj_len: Annotated[Optional[int], _count_opt("--proj-len", help="Linformer projected length k, rows of K and "
                                                  "V (default 256).", panel=SWAP)] = None,
    gpu: OptionalGPUOpt = None,
    layout: groups.Layout,
    timing: groups.EngineTime,
    weights: groups.Weights,
    kv_dtype: KVDtypeOpt = "bf16",
    out: groups.Output,
) -> None:
    from llmcalc import api
    from llmcalc.inputs.models import ModelRef

    if hf_generic and not (hf_config or hf_model):
        raise UserError("`hf_generic`: it reads a Hugging Face config; give `hf_config` PATH or `hf_model` ORG/NAME")
    models = ([ModelRef(preset=p) for p in preset or []] + [ModelRef(config=c) for c in config or []]
              + [ModelRef(hf_config=h, hf_generic=hf_generic) for h in hf_config or []]
              + [ModelRef(hf_model=h, hf_generic=hf_generic) for h in hf_model or []])
    report = api.compare(models, variants, **shape.values(), **layout.values(), **timing.values(), **weights.values(),
                         gen=gen, groups=groups, kv_lora_rank=kv_lora_rank, rope_dim=rope_dim,
                         q_lora_rank=q_lora_rank, window=window, global_tokens=global_tokens, topk=topk,
                         proj_len=proj_len, gpu=gpu, kv_dtype=kv_dtype)
    out.emit(report, of=compare)
