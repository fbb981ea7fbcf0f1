"""The busiest expert-parallel rank under skewed routing: how many times the mean rank's routed tokens the most
loaded of ep ranks receives, where each layer waits for it (docs/moe.md, Expert-parallel load).

  popularity  each expert's share of the routed tokens ~ Gamma(shape 1/s², mean 1): s is its coefficient of
              variation across experts, the traffic's skew (s = 0: uniform routing)
  a rank      holds n = E/ep experts, its load ~ Gamma(shape n/s²) (a sum of n independent Gammas)
  busiest     E[max over ep ranks] / mean = ∫₀^∞ (1 − P(n/s², x)^ep) dx / (n/s²),  P the regularized lower
              incomplete gamma function (the Gamma CDF); at most ep · min(n, k) / k, as a token sends at most
              min(n, k) of its k copies to one rank; beyond shape 10⁴ (a rank's spread under 1%) the loads are
              taken as normal: b = 1 + E[max of ep standard normals] / √(n/s²)

The ranks' loads are taken as independent: normalising them by their own total (the Dirichlet they really are)
moves the ratio by well under 1% at the presets' sizes (tests/test_expert_balance.py draws the real thing).
The skew of small batches' sampling (a few tokens per expert) is left out: there the experts are read, not
computed, and their time does not follow their tokens.

Pure: no I/O, no torch.
"""

from __future__ import annotations

import math
from functools import cache

NORMAL_SHAPE = 1e4
"""Rank loads of a larger shape (a rank's coefficient of variation under 1%) are taken as normal: the busiest is
then 1 + E[max of ep standard normals] / √shape, within 1e-4 of the Gamma's (whose skewness 2/√shape is under 2%),
and the Gamma CDF's series would take ever more terms."""
INTERVALS = 4000
"""Simpson intervals of the integral: the integrand is smooth and bounded in [0, 1], so the ratio is exact to
about 1e-6 at every size (tests check it against a closed form)."""


def gamma_cdf(shape: float, x: float) -> float:
    """P(shape, x), the regularized lower incomplete gamma function: the CDF at x of a Gamma(shape, scale 1)
    variable. Its power series below x = shape + 1, the continued fraction of the upper function (Lentz) above,
    where each converges fast."""
    if x <= 0:
        return 0.0
    log_front = shape * math.log(x) - x - math.lgamma(shape)
    if x < shape + 1:
        term = total = 1.0 / shape
        n = 0
        while term > total * 1e-16:
            n += 1
            term *= x / (shape + n)
            total += term
        return min(1.0, total * math.exp(log_front))
    tiny = 1e-300
    b = x + 1 - shape
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - shape)
        b += 2
        d = an * d + b
        d = 1 / (d if abs(d) > tiny else tiny)
        c = b + an / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        if abs(d * c - 1) < 1e-16:
            break
    return max(0.0, 1 - math.exp(log_front) * h)


@cache
def busiest_rank(experts: int, ep: int, top_k: int, skew: float) -> float:
    """The busiest of `ep` expert-parallel ranks' routed tokens over the mean rank's, each rank holding
    experts/ep of `experts` whose popularities have coefficient of variation `skew` (module docstring); at most
    ep · min(experts/ep, top_k) / top_k, a rank taking at most that many of each token's top_k copies. 1 with one
    rank or uniform routing."""
    if ep <= 1 or skew <= 0:
        return 1.0
    cap = ep * min(experts // ep, top_k) / top_k
    if skew * skew == 0:  # a skew of a few 1e-162 and less: no rank differs
        return 1.0
    shape = experts / ep / skew ** 2
    if shape > NORMAL_SHAPE:
        return min(cap, 1 + normal_max(ep) / math.sqrt(shape))
    spread = 40 * math.sqrt(shape)
    low = max(0.0, shape - spread)  # a rank's load falls below it with probability under 1e-12: there 1 − P^ep = 1
    top = shape + spread + 40  # above it the busiest rank's tail is below 1e-12
    h = (top - low) / INTERVALS

    def above(x: float) -> float:
        return 1 - gamma_cdf(shape, x) ** ep

    inner = sum((4 if i % 2 else 2) * above(low + i * h) for i in range(1, INTERVALS))
    return min(cap, (low + (above(low) + inner + above(top)) * h / 3) / shape)


@cache
def normal_max(n: int) -> float:
    """E[max of n independent standard normals] = −12 + ∫₋₁₂^∞ (1 − Φ(x)^n) dx (the max lies above −12 but with
    probability 1e-32), by Simpson's rule on [−12, 12], beyond which 1 − Φ^n is below 1e-26 for n up to 2^20."""
    h = 24 / INTERVALS

    def above(x: float) -> float:
        return 1 - (0.5 * (1 + math.erf(x / math.sqrt(2)))) ** n

    inner = sum((4 if i % 2 else 2) * above(-12 + i * h) for i in range(1, INTERVALS))
    return -12 + (above(-12.0) + inner + above(12.0)) * h / 3
