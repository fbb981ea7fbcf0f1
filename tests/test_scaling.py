"""`llmcalc scale` against the published projections of Hoffmann et al. 2022 ("Training Compute-Optimal Large
Language Models", arXiv 2203.15556) and the Kaplan et al. 2020 figure the same paper quotes.

Independent sources, each row as printed:
- Table 3 (approach 1) and Table A3 (approach 2): parameters ↔ FLOPs (3 significant digits) ↔ tokens (one
  decimal of a billion or a trillion). The 67B rows are left out: they are the Gopher budget's row, and their
  own figures disagree with C = 6·N·D (6 · 67e9 · 1.5e12 = 6.03e23, printed 5.76e23).
- Appendix D.4: at 10^21 FLOPs approach 1 gives 2.86B parameters and Kaplan et al. 4.68B.
- Table 2: approach 3's exponents a = 0.46, b = 0.54; its optimum checked against a brute-force minimum of the
  published L(N, D) at fixed C.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from llmcalc.costs.scaling import LOSS, scale

ROOT = Path(__file__).resolve().parents[1]
B, T = 1e9, 1e12

TABLE_3 = [(400e6, "1.92e+19", 8.0, B), (1e9, "1.21e+20", 20.2, B), (10e9, "1.23e+22", 205.1, B),
           (175e9, "3.85e+24", 3.7, T), (280e9, "9.90e+24", 5.9, T), (520e9, "3.43e+25", 11.0, T),
           (1e12, "1.27e+26", 21.2, T), (10e12, "1.30e+28", 216.2, T)]
"""Hoffmann et al. 2022, Table 3 (approach 1): parameters, FLOPs, tokens (in billions or trillions)."""
TABLE_A3_APPROACH_2 = [(400e6, "1.84e+19", 7.7, B), (1e9, "1.20e+20", 20.0, B), (10e9, "1.32e+22", 219.5, B),
                       (175e9, "4.54e+24", 4.3, T), (280e9, "1.18e+25", 7.1, T), (520e9, "4.19e+25", 13.4, T),
                       (1e12, "1.59e+26", 26.5, T), (10e12, "1.75e+28", 292.0, T)]
"""Hoffmann et al. 2022, Table A3, the approach-2 columns."""


@pytest.mark.parametrize(("method", "rows"), [("chinchilla-1", TABLE_3), ("chinchilla-2", TABLE_A3_APPROACH_2)])
def test_chinchilla_projection_tables(method, rows):
    # within one unit of the last digit printed, tokens also within the 0.5% their row's FLOPs are printed to
    # (3 digits): the table's own rows are that far from C = 6·N·D (approach 2's 400M row: 6 · 400M · 7.7B =
    # 1.848e19, printed 1.84e+19; approach 1's 10B row: 6 · 10B · 205.1B = 1.2306e22, printed 1.23e+22)
    for params, flops, tokens, unit in rows:
        row, = scale("params", params, method).rows
        last_digit = 10 ** (math.floor(math.log10(float(flops))) - 2)
        assert abs(row.flops - float(flops)) <= last_digit, (method, params, row.flops)
        assert abs(row.tokens / unit - tokens) <= max(0.1, 0.005 * tokens), (method, params, row.tokens)
        # and back: the printed budget gives the model size and the tokens within the budget's 3 digits
        back, = scale("flops", float(flops), method).rows
        assert back.params == pytest.approx(params, rel=0.005 / 1.5)
        assert back.tokens == pytest.approx(tokens * unit, rel=0.01)
        by_tokens, = scale("tokens", tokens * unit, method).rows
        assert by_tokens.params == pytest.approx(params, rel=0.01)


def test_appendix_d4_at_1e21_flops():
    rows = {r.method: r for r in scale("flops", 1e21).rows}
    # "from our approach 1, we estimate a 2.86 billion parameter model" (2.865B here: within the last digit)
    assert abs(rows["chinchilla-1"].params / 1e9 - 2.86) <= 0.01
    # "from Kaplan et al. (2020), we find that the optimal model size should be 4.68 billion parameters"
    assert round(rows["kaplan"].params / 1e9, 2) == 4.68


def test_approach_3_is_the_minimum_of_the_published_loss():
    # Table 2 prints approach 3's a = 0.46, b = 0.54 from the unrounded α, β; the printed α = 0.34, β = 0.28
    # give a = 0.28 / 0.62 = 0.4516: within one unit of the last digit
    row, = scale("flops", 5.76e23, "chinchilla-3").rows
    assert abs(row.exponent - 0.46) <= 0.01 and abs(1 - row.exponent - 0.54) <= 0.01
    for budget in (1e19, 5.76e23, 1e27):
        def published(n: float) -> float:  # §3.3 Eq. 2 as fitted in Appendix D.2, with D = C / (6N)
            return 1.69 + 406.4 / n ** 0.34 + 410.7 / (budget / (6 * n)) ** 0.28
        grid = [10 ** (6 + k / 20000) for k in range(9 * 20000)]  # 1e6 … 1e15 parameters, steps of 0.012%
        best = min(grid, key=published)
        row, = scale("flops", budget, "chinchilla-3").rows
        assert row.params == pytest.approx(best, rel=3e-4)
        assert row.loss == pytest.approx(published(best), abs=1e-9)
    assert LOSS == {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}


def test_compute_is_six_n_d_for_every_law():
    for given, value in (("flops", 3.14e22), ("params", 13e9), ("tokens", 2e12)):
        for row in scale(given, value).rows:
            assert row.flops == pytest.approx(6 * row.params * row.tokens, rel=1e-9)


def test_time_uses_a_published_runs_mfu_and_the_preset_price(cli):
    """The default was once a matmul's 85% (70B on 1,024 H100s in 8.2 days); published runs reach 40–55%."""
    preset = yaml.safe_load((ROOT / "presets/gpus/h100-sxm.yaml").read_text())
    r = cli("scale", "--flops", "5.76e23", "--gpu", "h100-sxm", "--gpus", "1024", "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["mfu"] == 0.40 and "Llama 3 405B" in out["mfu_source"]
    assert out["price_per_hour"] == preset["price_per_hour"]
    peak = preset["peak_tflops"]["bf16"] * 1e12
    for row in out["rows"]:
        hours = 5.76e23 / (peak * 0.40) / 3600
        assert row["gpu_hours"] == pytest.approx(hours) and row["days"] == pytest.approx(hours / 1024 / 24)
        assert row["cost_usd"] == pytest.approx(hours * preset["price_per_hour"])
    given = json.loads(cli("scale", "--params", "70B", "--gpu", "h100-sxm", "--mfu", "0.4", "--price", "2",
                           "--method", "kaplan", "--format", "json").stdout)
    assert given["mfu"] == 0.4 and given["mfu_source"] == "given" and given["price_per_hour"] == 2
    assert [r["method"] for r in given["rows"]] == ["kaplan"] and given["rows"][0]["params"] == 70 * 10**9


def test_a_gpu_of_ones_own_takes_the_same_published_mfu(tmp_path, cli):
    gpu = yaml.safe_load((ROOT / "presets/gpus/h100-sxm.yaml").read_text()) | {"name": "my-gpu"}
    (tmp_path / "my-gpu.yaml").write_text(yaml.safe_dump(gpu))
    out = json.loads(cli("scale", "--tokens", "1.4T", "--gpu", str(tmp_path / "my-gpu.yaml"), "-f", "json").stdout)
    assert out["mfu"] == 0.40 and "published" in out["mfu_source"]


@pytest.mark.parametrize("args", [[], ["--flops", "1e21", "--params", "70B"], ["--tokens", "many"],
                                  ["--params", "0"], ["--flops", "1e21", "--gpus", "8"],
                                  ["--flops", "1e21", "--gpu", "h100-sxm", "--mfu", "1.5"],
                                  ["--flops", "1e21", "--method", "hoffmann"],
                                  ["--flops", "1e21", "--gpu", "h100-sxm", "--price", "-1"]])
def test_bad_input_is_two(args, cli):
    r = cli("scale", *args)
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, (r.returncode, r.stderr)


def test_table_names_every_law(cli):
    r = cli("scale", "--flops", "1e21")
    assert r.returncode == 0, r.stderr
    for name in ("chinchilla-1", "chinchilla-2", "chinchilla-3", "kaplan", "2.87 B", "4.68 B"):
        assert name in r.stdout


@pytest.mark.parametrize("given, value", [("flops", 1), ("flops", 1e6), ("params", 1), ("tokens", 1)])
def test_a_budget_too_small_for_one_parameter_or_token_is_refused(given, value):
    """`scale --flops 1` printed optima of 0 parameters (chinchilla-1, kaplan) and 0 tokens (chinchilla-3): a law's
    optimum below one parameter or one token is refused, naming the law and the input."""
    from llmcalc.costs.scaling import scale
    from llmcalc.errors import UserError

    with pytest.raises(UserError, match=rf"^`{given}`: .* optimum at .* less than one; give a larger `{given}`"):
        scale(given, value)
    assert all(r.params >= 1 and r.tokens >= 1 for r in scale(given, value * 1e12).rows)
