"""Compute-optimal model size and training tokens (`llmcalc scale`). See docs/formulas.md#compute-optimal-scaling.

Every law here is a power law N_opt = G · C^a in the training FLOPs C, with C = 6·N·D (Kaplan et al. 2020,
§2.1; Hoffmann et al. 2022, §3): then D_opt = C / (6·N_opt) = C^(1 − a) / (6·G), and the inverses are
C = (N / G)^(1/a) from a size and C = (6·G·D)^(1/(1 − a)) from a token count.

  chinchilla-1, chinchilla-2: Hoffmann et al. 2022 (arXiv 2203.15556), approaches 1 (the envelope of training
      curves) and 2 (IsoFLOP profiles). The paper prints their exponents rounded (Table 2: a = 0.50 and 0.49)
      and their projections (Table 3, approach 1; Table A3, approach 2), not the constants. Each projection
      table is one power law: its exponent, from the table's 400M and 10T rows (tokens to 4 digits), is
      a = 0.4981 (approach 1) and 0.4899 (approach 2), inside Table 2's confidence intervals, and the law runs
      through the 400M row (400M parameters, 8.0B tokens; 7.7B for approach 2).
  chinchilla-3: the minimum over N of the fitted loss L(N, D) = E + A/N^α + B/D^β at fixed C = 6·N·D
      (§3.3, Eq. 4; fitted in Appendix D.2: E = 1.69, A = 406.4, B = 410.7, α = 0.34, β = 0.28):
      N_opt = G·(C/6)^a, D_opt = G⁻¹·(C/6)^b, G = (α·A / (β·B))^(1/(α+β)), a = β/(α+β), b = α/(α+β).
  kaplan: Kaplan et al. 2020 (arXiv 2001.08361), §6.1 and Figure 14: N_opt = 1.3·10⁹ · C_min^0.73 with C_min
      in PF-days (8.64·10¹⁹ FLOPs) of non-embedding compute, and C_min = C / 2 when training at the critical
      batch size (Eq. 5.5: C_min = C / (1 + B/B_crit)); tokens D = C / (6·N), so D ∝ C^0.27.

The loss of every row is approach 3's L(N, D). Training time: GPU-hours = C / (peak · mfu) / 3600.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from llmcalc.errors import Unread, UserError, clip
from llmcalc.model.base import AMOUNT_MAX, SHARE_MIN
from llmcalc.model.gpu import FIGURE_MAX, FIGURE_MIN, GPU
from llmcalc.reports.scaling import ScaleReport, ScaleRow
from llmcalc.workload import MAX_GPUS

TRAIN_FLOPS = 6
"""FLOPs per parameter per training token: forward 2 (a multiply-add is 2 FLOPs) + backward 4."""
PF_DAY = 10**15 * 86_400
"""One petaflop/s-day in FLOPs, Kaplan's unit of compute."""
LOSS = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}
"""Chinchilla's approach-3 fit of L(N, D) = E + A/N^α + B/D^β (Hoffmann et al. 2022, §3.3)."""


def loss(params: float, tokens: float) -> float:
    """Chinchilla's approach-3 loss L(N, D) = E + A/N^α + B/D^β."""
    return LOSS["E"] + LOSS["A"] / params ** LOSS["alpha"] + LOSS["B"] / tokens ** LOSS["beta"]


@dataclass(frozen=True)
class ScalingLaw:
    """N_opt = coefficient · C^exponent, with C = 6·N·D."""

    name: str
    coefficient: float
    exponent: float
    source: str

    def params(self, flops: float) -> float:
        """N_opt = G · C^a."""
        return self.coefficient * flops ** self.exponent

    def flops_for_params(self, params: float) -> float:
        """The budget whose optimal size is `params`: C = (N / G)^(1/a)."""
        return (params / self.coefficient) ** (1 / self.exponent)

    def flops_for_tokens(self, tokens: float) -> float:
        """The budget whose optimal token count is `tokens`: D = C^(1−a) / (6·G), so C = (6·G·D)^(1/(1−a))."""
        return (TRAIN_FLOPS * self.coefficient * tokens) ** (1 / (1 - self.exponent))


def _through(params: float, tokens: float, exponent: float) -> float:
    """G of the law N = G·C^a through the point (N, D), C = 6·N·D."""
    return params / (TRAIN_FLOPS * params * tokens) ** exponent


def _approach3() -> ScalingLaw:
    alpha, beta = LOSS["alpha"], LOSS["beta"]
    g = (alpha * LOSS["A"] / (beta * LOSS["B"])) ** (1 / (alpha + beta))
    a = beta / (alpha + beta)
    return ScalingLaw("chinchilla-3", g / TRAIN_FLOPS ** a, a,
                      "Hoffmann et al. 2022, §3.3: the minimum of L(N, D) = 1.69 + 406.4/N^0.34 + 410.7/D^0.28")


LAWS: dict[str, ScalingLaw] = {law.name: law for law in (
    ScalingLaw("chinchilla-1", _through(400e6, 8.0e9, 0.4981), 0.4981,
               "Hoffmann et al. 2022, Table 3 (approach 1): the power law through its 400M and 10T rows"),
    ScalingLaw("chinchilla-2", _through(400e6, 7.7e9, 0.4899), 0.4899,
               "Hoffmann et al. 2022, Table A3 (approach 2): the power law through its 400M and 10T rows"),
    _approach3(),
    ScalingLaw("kaplan", 1.3e9 / (2 * PF_DAY) ** 0.73, 0.73,
               "Kaplan et al. 2020, §6.1 and Figure 14: N = 1.3e9·C_min^0.73, C_min = C/2 in PF-days"),
)}
"""Each law by the name `method` takes."""
METHODS = ("all", *LAWS)
Method = Literal["all", "chinchilla-1", "chinchilla-2", "chinchilla-3", "kaplan"]
Given = Literal["flops", "params", "tokens"]

FORMULA = ("N_opt = G·C^a, D_opt = C/(6·N_opt), C = 6·N·D; chinchilla-3: G, a from the minimum of "
           "L = E + A/N^α + B/D^β (a = β/(α+β)); kaplan: N = 1.3e9·(C/2 PF-days)^0.73; "
           "GPU-hours = C / (peak · mfu) / 3600")


def optimum(law: ScalingLaw, given: Given, value: float) -> tuple[float, float, float]:
    """(N, D, C) on `law` from one of them: a budget C (flops), a size N (params) or a token count D (tokens)."""
    if given == "flops":
        c = value
        n = law.params(c)
        return n, c / (TRAIN_FLOPS * n), c
    if given == "params":
        c = law.flops_for_params(value)
        return value, c / (TRAIN_FLOPS * value), c
    c = law.flops_for_tokens(value)
    return c / (TRAIN_FLOPS * value), value, c


PUBLISHED_MFU = 0.40
"""The MFU a time assumes where none is given: what large pre-training runs publish, not a matmul's best. Llama 3
405B on 8,192–16,384 H100s: 38–43% in bf16 (Dubey et al. 2024, "The Llama 3 Herd of Models", Table 4); PaLM 540B
on 6,144 TPU v4: 46.2% (Chowdhery et al. 2022, Table 3); MegaScale's 175B on 12,288 GPUs: 55.2% (Jiang et al.
2024, Table 2)."""
PUBLISHED_MFU_SOURCE = ("a published large run's MFU, 40% (Llama 3 405B on 16k H100s: 38–43%, Dubey et al. 2024, "
                        "Table 4; PaLM 540B: 46.2%)")


def scale(given: Given, value: float, method: Method = "all", gpu: GPU | None = None,
          gpus: int | None = None, mfu: float | None = None, price: float | None = None,
          compute_dtype: str | None = None) -> ScaleReport:
    """The compute-optimal (N, D, C) under each law `method` names (all: every law) from `value` of `given`;
    with a `gpu`, the GPU-hours C / (peak · mfu) / 3600, the days on `gpus` GPUs (None: 1) and the cost at
    `price` USD per GPU-hour (None: the GPU's price_per_hour). mfu None: PUBLISHED_MFU, what large runs reach (a
    large matmul's efficiency, 80–94%, is no whole run's); compute_dtype None: bf16's peak."""
    if not (math.isfinite(value) and value >= 1):
        raise UserError(f"`{given}`: {value:g} is not a count of at least 1; give a number such as 1e21 or 70B")
    if method not in METHODS:
        raise UserError(f"`method`: unknown method {method!r}; use one of {', '.join(METHODS)}")
    if gpus is not None and not 1 <= gpus <= MAX_GPUS:
        raise UserError(f"`gpus`: {clip(str(gpus), 24)} is not a count of GPUs from 1 to {MAX_GPUS:,}; give one such "
                        "as 1024")
    if mfu is not None and not SHARE_MIN <= mfu <= 1:
        raise UserError(f"`mfu`: {mfu!r} is not in [{SHARE_MIN:g}, 1]; give a share such as 0.4")
    if price is not None and not FIGURE_MIN <= price <= FIGURE_MAX:  # NaN fails both comparisons, inf the second
        raise UserError(f"`price`: {price:g} is not a price from {FIGURE_MIN:g} to {FIGURE_MAX:,.0f}; give USD per "
                        "GPU-hour such as 2.5")
    if gpu is None and (mfu is not None or price is not None or gpus is not None):
        raise UserError("`gpu`: a time or a cost needs a GPU; give `gpu` NAME (see `llmcalc gpus`)")
    if gpu is None and compute_dtype is not None:
        raise Unread("compute_dtype", "`compute_dtype` sets the peak a time is worked out at; give `gpu` NAME, or "
                     "leave it out")
    gpus = gpus or 1
    peak = source = dtype = None
    if gpu is not None:
        dtype = compute_dtype or "bf16"
        peak = gpu.peak(dtype)
        mfu, source = (mfu, "given") if mfu is not None else (PUBLISHED_MFU, PUBLISHED_MFU_SOURCE)
        price = price if price is not None else gpu.price_per_hour
    rows = []
    for law in (LAWS.values() if method == "all" else [LAWS[method]]):
        n, d, c = optimum(law, given, value)
        if not max(n, d, c) < AMOUNT_MAX:
            raise UserError(f"`{given}`: {value:g} puts {law.name}'s optimum at {n:.3g} parameters, {d:.3g} tokens and "
                            f"{c:.3g} FLOPs, past {AMOUNT_MAX:g}; give a smaller `{given}`")
        if min(n, d) < 1:  # a model of no parameter, or trained on no token
            raise UserError(f"`{given}`: {value:g} puts {law.name}'s optimum at {n:.3g} parameters and {d:.3g} tokens, "
                            f"less than one; give a larger `{given}` (the laws were fitted on models of millions of "
                            "parameters)")
        hours = c / (peak * mfu) / 3600 if peak else None
        if hours is not None and not math.isfinite(hours * (price or 1)):  # a tiny mfu, a huge price
            name, x = ("price", price) if math.isfinite(hours) else ("mfu", mfu)
            raise UserError(f"`{name}`: {x:g} puts the training time or cost of {c:.3g} FLOPs beyond any float; give "
                            f"a realistic {'USD per GPU-hour' if name == 'price' else 'share such as 0.4'}")
        rows.append(ScaleRow(
            method=law.name, params=round(n), tokens=round(d), flops=round(c), tokens_per_param=d / n,
            exponent=law.exponent, loss=loss(n, d), gpu_hours=hours,
            days=hours / gpus / 24 if hours is not None else None,
            cost_usd=hours * price if hours is not None and price is not None else None))
    return ScaleReport(given=given, value=round(value), rows=rows, gpu=gpu.name if gpu else None,
                       gpus=gpus if gpu else None, compute_dtype=dtype, peak_flops=peak, mfu=mfu, mfu_source=source,
                       price_per_hour=price, formula=FORMULA, notes=_notes(gpu, mfu, source, price))


def _notes(gpu: GPU | None, mfu: float | None, source: str | None, price: float | None) -> list[str]:
    notes = [f"{law.name}: {law.source}" for law in LAWS.values()]
    notes += ["chinchilla-3's printed coefficients are rounded: its optimum has more tokens per parameter than the "
              "paper's Table A3 (e.g. 400M parameters: 14.5B tokens here, 9.2B there; Besiroglu et al. 2024, "
              "arXiv 2404.10102, trace this to the rounding)",
              "kaplan counts non-embedding parameters and fits runs of up to 1.5B parameters; loss is Chinchilla's "
              "approach-3 L(N, D) for every row"]
    if gpu is not None and source != "given":
        notes.append(f"mfu {mfu:.0%} is {source}; runs reach 30–55% by size, sequence length and fabric: give "
                     "`mfu` for your own")
    if gpu is not None and price is None:
        notes.append(f"{gpu.name} has no known price; give `price` USD per GPU-hour for the cost")
    return notes
