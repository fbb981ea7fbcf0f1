"""Hostile numbers into the numeric options of mfu, scale, latency, kv, memory and plan (a small search): every
run either exits 0 with strict, finite output (JSON that json.loads takes without NaN or Infinity; CSV with no
non-finite cell) or exits 2 with exactly one line on stderr; never a traceback. Each example is a separate
process, as a user runs the command."""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow

TIMEOUT = 300
HOSTILE = ["nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e999", "-1e999", "1e308", "1.7976931348623157e308",
           "5e-324", "-5e-324", "1e-300", "0", "-0", "0.0", "-1", "-0.5", "99999999999999999999999", str(2**64),
           str(2**40 + 1), "1m", "1e3", "0x10", "", " ", "1_000"]
"""Strings a hostile caller passes where a number goes."""

hostile = st.one_of(
    st.sampled_from(HOSTILE),
    st.floats().map(repr),  # every float, NaN and the infinities included
    st.floats(min_value=-1e-300, max_value=1e-300).map(repr),  # subnormals
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
)
"""Any number; plan's searches take only HOSTILE's, so a draw never asks for a search of minutes."""

GPU = ["--gpu", "h100-sxm"]
MODEL = ["-p", "llama3-8b"]
PLAN = ["plan", *MODEL, "--max-gpus", "2", "--top", "1", "--requests", "50", "--rate", "5", "--slo-tpot", "0.05"]
COMMANDS = {
    "mfu": (["mfu", *MODEL, *GPU, "--tokens-per-s", "20000"],
            ["--tokens-per-s", "--step-time", "--batch", "--seq", "--gpus"]),
    "mfu-peak": (["mfu", *MODEL, "--tokens-per-s", "20000"], ["--peak-tflops", "--tokens-per-s"]),
    "scale": (["scale", *GPU], ["--flops", "--params", "--tokens"]),
    "scale-cost": (["scale", *GPU, "--flops", "1e24"], ["--mfu", "--price", "--gpus", "--flops"]),
    "latency": (["latency", *MODEL, *GPU], ["--batch", "--seq", "--gen", "--gpus", "--compute-efficiency",
                                             "--memory-efficiency", "--reserve"]),
    "kv": (["kv", *MODEL], ["--batch", "--seq"]),
    "memory": (["memory", *MODEL], ["--batch", "--seq", "--reserve"]),
}
PLAN_OPTIONS = ["--rate", "--slo-tpot", "--slo-ttft", "--max-gpus", "--top", "--requests", "--price"]


def non_finite(token: str):
    raise AssertionError(f"{token} in JSON output")


def finite(token: str) -> float:
    value = float(token)
    assert math.isfinite(value), f"{token} in JSON output"
    return value


def check(args: list[str], fmt: str) -> None:
    """Exit 0 with strict finite output, or exit 2 with one line on stderr; no traceback either way."""
    r = subprocess.run([sys.executable, "-m", "llmcalc", *args, "-f", fmt], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert "Traceback" not in r.stderr, (args, r.stderr)
    if r.returncode == 0:
        if fmt == "json":
            json.loads(r.stdout, parse_constant=non_finite, parse_float=finite)
        else:
            for row in csv.reader(io.StringIO(r.stdout)):
                for cell in row:
                    try:
                        value = float(cell)
                    except ValueError:
                        continue
                    assert math.isfinite(value), (args, cell)
        return
    assert r.returncode == 2, (args, r.returncode, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == "", (args, r.stderr)


def with_option(base: list[str], option: str, value: str) -> list[str]:
    """`base` with `option` set to `value` (replacing it where base sets it)."""
    if option in base:
        i = base.index(option)
        return [*base[:i], *base[i + 2:], f"{option}={value}"]
    return [*base, f"{option}={value}"]


SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("command", COMMANDS)
@SETTINGS
@given(data=st.data())
def test_hostile_numbers_give_finite_output_or_one_line(command, data):
    base, options = COMMANDS[command]
    option = data.draw(st.sampled_from(options), label="option")
    value = data.draw(hostile, label="value")
    check(with_option(base, option, value), data.draw(st.sampled_from(["json", "csv"]), label="format"))


@SETTINGS
@given(option=st.sampled_from(PLAN_OPTIONS), value=st.sampled_from(HOSTILE), fmt=st.sampled_from(["json", "csv"]))
def test_hostile_numbers_into_a_small_plan(option, value, fmt):
    if option == "--price":
        value = f"h100-sxm={value}"
    check(with_option(PLAN, option, value), fmt)
