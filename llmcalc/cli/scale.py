"""The `llmcalc scale` command: compute-optimal model size and training tokens under Chinchilla's and Kaplan's
scaling laws, and the training time and cost on a GPU."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from llmcalc.cli.app import command
from llmcalc.cli.options import (GPUS, PRECISION, WORKLOAD, FormatOpt, _count_opt, _opt, _real_opt, emit,
                                 grid_parser)

AMOUNT = "decimal K, M, B, T or an exponent"

amount = grid_parser("parse_amount", float, "A model size, token count or budget as papers print them (70B, "
                     "1.4T, 5.76e23).")

def _amount_opt(name: str, help: str):
    return _opt(name, help=help, panel=WORKLOAD, metavar="N", parser=amount)

@command(rank=190, help=(
    "Compute-optimal model size, training tokens and FLOPs (C = 6·N·D) from any one of them, under Chinchilla's "
    "approaches 1-3 and Kaplan's law; with --gpu, the training time and cost."))
def scale(
    flops: Annotated[Optional[float], _amount_opt(
        "--flops", f"Training compute budget C in FLOPs ({AMOUNT}: 5.76e23).")] = None,
    params: Annotated[Optional[float], _amount_opt(
        "--params", f"Model size N in parameters ({AMOUNT}: 70B).")] = None,
    tokens: Annotated[Optional[float], _amount_opt(
        "--tokens", f"Training tokens D ({AMOUNT}: 1.4T).")] = None,
    method: Annotated[Literal["all", "chinchilla-1", "chinchilla-2", "chinchilla-3", "kaplan"], _opt(
        "--method", help="Scaling law: chinchilla-1, chinchilla-2, chinchilla-3 (Hoffmann et al. 2022, approaches "
        "1-3), kaplan (Kaplan et al. 2020), or all in one table.", panel=WORKLOAD, metavar="NAME")] = "all",
    gpu: Annotated[Optional[str], _opt(
        "--gpu", help="Add training GPU-hours and days on this GPU (a preset or a GPU YAML file).", panel=GPUS,
        metavar="NAME")] = None,
    gpus: Annotated[Optional[int], _count_opt("--gpus", help="GPUs training together: days = GPU-hours / gpus / 24 "
                                              "(default 1).", panel=GPUS)] = None,
    mfu: Annotated[Optional[float], _real_opt(
        "--mfu", help="Model FLOPs utilisation, in (0, 1] (default 0.40: what large published pre-training runs "
        "reach; a matmul's own efficiency is no whole run's).", panel=GPUS, metavar="SHARE")] = None,
    price: Annotated[Optional[float], _real_opt(
        "--price", help="USD per GPU-hour for the cost (default: the GPU preset's on-demand price).", panel=GPUS,
        metavar="USD")] = None,
    compute_dtype: Annotated[Optional[Literal["fp32", "tf32", "bf16", "fp16", "fp8"]], _opt(
        "--compute-dtype", help="With --gpu: the matmul type whose dense peak sets the time: fp32, tf32, bf16 "
        "(default), fp16 or fp8.", panel=PRECISION, metavar="DTYPE")] = None,
    format: FormatOpt = "table",
) -> None:
    """Parse the amounts, compute (llmcalc/api.py: scale), render."""
    from llmcalc import api

    emit(api.scale(flops=flops, params=params, tokens=tokens, method=method, gpu=gpu, gpus=gpus, mfu=mfu, price=price,
                   compute_dtype=compute_dtype), format, of=scale)
