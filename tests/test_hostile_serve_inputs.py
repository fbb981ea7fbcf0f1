"""Hostile input to `llmcalc serve` and `llmcalc plan`: request traces (CSV and JSONL cells, raw bytes),
rates, latency targets, request counts and length distributions drawn by hypothesis, each run as a user would
(a process of its own). The contract: exit 0 with strict, finite JSON, or exit 2 with one line on stderr; never a
traceback, never a hang (a run past HANG seconds fails)."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli, strict_json
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow

HANG = 300
"""Seconds before a run counts as hung; far above any run's time on a busy machine."""
SERVE = ("serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "-f", "json")
PLAN = ("plan", "-p", "llama3-8b", "--max-gpus", "1", "--top", "1", "-f", "json")
FEW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

NUMBER_TEXTS = st.one_of(
    st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "1e999", "-1e999", "1e-308", "5e-324", "1e308", "0",
                     "-0", "-1", "1.9", "0.5", "true", "", " ", "1_000", "0x10", "\u0663", "1e400", "9" * 400]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-2**70, 2**70).map(str),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12))
"""A number as a user might type it, or not a number at all."""
COUNTS = st.one_of(st.integers(-3, 48), st.sampled_from([2**40, 2**40 + 1, 2**63, 10**30, -2**63]))
"""Token counts: small ones a run finishes at once, and absurd ones (a run of 10^5 output tokens would take minutes
to simulate, not a defect)."""
JSON_VALUES = st.one_of(COUNTS, st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(),
                        st.text(max_size=8), st.lists(st.integers(0, 3), max_size=2),
                        st.sampled_from([1.9, 1e400, 2.0, -0.0, 1e-320]))


def holds(r) -> None:
    """Exit 0 with strict finite JSON, or exit 2 with exactly one line on stderr; no traceback either way."""
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    if r.returncode == 0:
        strict_json(r.stdout)
    else:
        assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def serve_trace(path, *extra: str):
    return run_cli(*SERVE, "--trace", str(path), "-n", "3", *extra, timeout=HANG)


@FEW
@given(cells=st.lists(st.tuples(NUMBER_TEXTS | st.floats(0, 100).map(repr), COUNTS.map(str) | NUMBER_TEXTS,
                                COUNTS.map(str) | NUMBER_TEXTS), min_size=1, max_size=3),
       bom=st.booleans())
@example(cells=[("nan", "100", "10")], bom=False)  # spun forever
@example(cells=[("1e999", "100", "10")], bom=False)
@example(cells=[("0", "100", "10")], bom=True)  # Excel's CSV UTF-8
def test_trace_csv_cells(tmp_path_factory, cells, bom):
    path = tmp_path_factory.mktemp("csv") / "trace.csv"
    text = "arrival,prompt,output\n" + "".join(",".join(json.dumps(c) for c in row) + "\n" for row in cells)
    path.write_bytes(text.encode("utf-8-sig" if bom else "utf-8", errors="surrogatepass"))
    holds(serve_trace(path))


@FEW
@given(rows=st.lists(st.fixed_dictionaries({"arrival": st.floats(0, 100) | JSON_VALUES, "prompt": COUNTS | JSON_VALUES,
                                            "output": COUNTS | JSON_VALUES}), min_size=1, max_size=3))
@example(rows=[{"arrival": float("nan"), "prompt": 100, "output": 10}])  # spun forever
@example(rows=[{"arrival": 0.0, "prompt": 1.9, "output": 10}])  # read as 1
@example(rows=[{"arrival": 0.0, "prompt": 100, "output": True}])  # read as 1
@example(rows=[{"arrival": 1e400, "prompt": 100, "output": 10}])
def test_trace_jsonl_values(tmp_path_factory, rows):
    """Besides the contract: a trace that runs is read as written, no count truncated or coerced."""
    path = tmp_path_factory.mktemp("jsonl") / "trace.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))  # NaN and Infinity written as JSON5 has them
    r = serve_trace(path)
    holds(r)
    if r.returncode == 0:
        served = sorted((x["arrival_s"], x["prompt"], x["output"]) for x in strict_json(r.stdout)["timeline"])
        assert served == sorted((row["arrival"], row["prompt"], row["output"]) for row in rows)
        assert all(type(row[k]) is int for row in rows for k in ("prompt", "output")), rows


@FEW
@given(data=st.binary(max_size=3000), header=st.booleans(), suffix=st.sampled_from([".csv", ".jsonl"]),
       long_field=st.sampled_from([0, 200_000, 1 << 21]))
def test_trace_bytes(tmp_path_factory, data, header, suffix, long_field):
    """Any bytes (Latin-1, binary, NUL), after a header or not, and fields past csv's 128 KB default or the
    reader's own bound."""
    path = tmp_path_factory.mktemp("bytes") / f"trace{suffix}"
    head = b"arrival,prompt,output\n" if header else b""
    path.write_bytes(head + (b'0,16,4,"' + b"x" * long_field + b'"\n' if long_field else b"") + data)
    holds(serve_trace(path))


@pytest.mark.parametrize("where", ["header", "row"])
def test_a_trace_line_of_many_empty_fields_is_refused_naming_it(tmp_path, where):
    """A CSV line of commas, each an empty field, was held as a list of them: 256 MiB of commas took 4.1 GB. A
    line (CSV or JSON) past 2^20 characters is refused now, naming it."""
    from llmcalc.inputs.requests import MAX_FIELD_CHARS

    commas = "," * (MAX_FIELD_CHARS + 1)
    path = tmp_path / "trace.csv"
    path.write_text(f"arrival,prompt,output{commas}\n0,1,1\n" if where == "header" else
                    f"arrival,prompt,output\n0,1,1\n0,1,1{commas}\n")
    r = serve_trace(path)
    holds(r)
    line = 1 if where == "header" else 3
    assert r.returncode == 2 and f"line {line} is longer than {MAX_FIELD_CHARS:,} characters" in r.stderr


@FEW
@given(rate=st.none() | NUMBER_TEXTS, ttft=st.none() | NUMBER_TEXTS, tpot=st.none() | NUMBER_TEXTS,
       n=st.sampled_from(["0", "-1", "1", "3", "100001", "1000000000", "1k", "nan", "1.5", "9" * 40]),
       arrivals=st.sampled_from(["poisson", "constant"]))
def test_serve_rates_targets_and_counts(rate, ttft, tpot, n, arrivals):
    args = ["-n", n, "--prompt", "32", "--output", "4", "--arrivals", arrivals]
    for flag, value in (("--rate", rate), ("--slo-ttft", ttft), ("--slo-tpot", tpot)):
        if value is not None:
            args += [f"{flag}={value}"]
    holds(run_cli(*SERVE, *args, timeout=HANG))


DISTRIBUTIONS = st.one_of(
    st.builds(lambda k, a, b: f"{k}:{a},{b}", st.sampled_from(["normal", "uniform", "gauss"]), NUMBER_TEXTS,
              NUMBER_TEXTS),
    NUMBER_TEXTS, st.sampled_from(["normal:1e308,1e308", "normal:inf,0", "uniform:1,1e300", "normal:8,1,2"]))


@FEW
@given(prompt=DISTRIBUTIONS, output=DISTRIBUTIONS | st.sampled_from(["4", "uniform:1,8"]))
@example(prompt="normal:inf,0", output="4")
@example(prompt="normal:1e308,1e308", output="4")
def test_serve_lengths(prompt, output):
    holds(run_cli(*SERVE, "-n", "3", f"--prompt={prompt}", f"--output={output}", timeout=HANG))


@FEW
@given(ttft=NUMBER_TEXTS, tpot=st.none() | NUMBER_TEXTS, n=st.sampled_from(["0", "5", "1000000000"]),
       prompt=DISTRIBUTIONS | st.just("64"))
def test_plan_targets_counts_and_lengths(ttft, tpot, n, prompt):
    args = ["--rate", "1", f"--slo-ttft={ttft}", "-n", n, f"--prompt={prompt}", "--output", "8"]
    holds(run_cli(*PLAN, *args, *([f"--slo-tpot={tpot}"] if tpot is not None else []), timeout=HANG))


def test_an_output_too_long_for_replicas_stepping_together_is_refused_before_the_run():
    """100 data-parallel attention replicas (ep 128) that step together, each output 100,000 tokens: 10^7 passes,
    past the 2^23-step bound; refused at once with exit 2, one line naming --output and --dp (the same run took
    minutes when the rounds counted only the replicas that ran)."""
    r = run_cli("serve", "-p", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--dp", "128", "--ep", "128", "--tp", "1",
                "-n", "100", "--output", "100000", "--prompt", "16", "--rate", "0.01")
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--output" in r.stderr and "on each of 100 replicas stepping together" in r.stderr and "(--dp)" in r.stderr
