"""`llmcalc plan` (llmcalc/views/plan.py): the closed-form pass against the simulator, the ranking, the
disaggregated pools, the price override, and the command's exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from llmcalc.errors import UserError
from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.presets import load_preset
from llmcalc.inputs.requests import parse_lengths
from llmcalc.inputs.time_models import load_time_model
from llmcalc.views.plan import layouts, plan, steady
from llmcalc.inputs.engines import load_engine
from llmcalc.views.serve import SLO, Load, make_requests, serve
from llmcalc.workload import Layout, Workload

GPUS = [load_gpu("h100-sxm"), load_gpu("a100-80gb")]
TMS = {g.name: load_time_model(None, g) for g in GPUS}
LENGTHS = parse_lengths("1024", "prompt"), parse_lengths("256", "output")
VLLM = load_engine("vllm")
REFERENCE = load_engine("reference").settings(GPUS[0])
"""The simulator's plain loop (no CUDA-graph padding), which the closed form models."""


def run(spec="llama3-8b", rate=10.0, slo=SLO(2.0, 0.05), prices=None, **kw):
    return plan(load_preset(spec), GPUS, TMS, kw.pop("max_gpus", 8), rate, *LENGTHS, "1024", "256", slo,
                prices if prices is not None else {"h100-sxm": 3.0, "a100-80gb": 1.8}, kw.pop("engine", VLLM), **kw)


def test_finalists_meet_the_targets_in_simulation_and_rank_by_cost():
    r = run(rate=20.0)
    assert r.candidates and all(c.simulated and c.meets_slo for c in r.candidates)
    assert all(c.ttft_p99_s <= 2.0 and c.tpot_p99_s <= 0.05 for c in r.candidates)
    costs = [c.usd_per_million_tokens for c in r.candidates]
    assert costs == sorted(costs)
    assert all(not c.shipped and c.kv_dtype == c.weights_dtype in ("bf16", "fp8") for c in r.candidates)
    best = r.candidates[0]  # its cost is GPUs · price / tokens per hour
    price = {"h100-sxm": 3.0, "a100-80gb": 1.8}[best.gpu]
    assert best.usd_per_million_tokens == pytest.approx(best.gpus * price / (20.0 * 256 * 3600) * 1e6)
    assert best.output_tokens_per_s_per_gpu == pytest.approx(20.0 * 256 / best.gpus)
    assert len({(c.gpu, c.tp, c.pp, c.ep, c.dp, c.weights_dtype) for c in r.candidates}) == len(r.candidates)


def test_a_finalist_serves_the_load_as_serve_says():
    """The best deployment, run again through `llmcalc serve`'s simulator, gives the p99s listed and keeps up:
    the run ends within one request's latency of the last arrival, no request queues for long."""
    r = run(rate=20.0)
    c = r.candidates[0]
    gpu = {g.name: g for g in GPUS}[c.gpu]
    w = Workload(weights_dtype=c.weights_dtype, kv_dtype=c.weights_dtype, compute_dtype=c.weights_dtype,
                 layout=Layout(tp=c.tp, pp=c.pp, dp=c.dp, ep=c.ep))
    load = Load(rate=20.0)
    got = serve(load_preset("llama3-8b"), gpu, w, TMS[c.gpu], make_requests(400, *LENGTHS, load, 0),
                VLLM.settings(gpu, max_seqs=c.max_seqs), load, "1024", "256")
    assert got.ttft_s.p99 == pytest.approx(c.ttft_p99_s) and got.tpot_s.p99 == pytest.approx(c.tpot_p99_s)
    last = max(x.arrival_s for x in got.timeline)
    assert got.duration_s <= last + max(x.e2e_s for x in got.timeline) and got.queue_s.p99 < 0.5


def test_closed_form_tracks_the_simulator_below_saturation():
    """Below saturation the closed-form TPOT is within 5% of the simulated mean over 1,500 requests and its
    concurrency (Little) within 10%; past saturation (30 requests/s on one H100) it finds no steady state."""
    spec, gpu = load_preset("llama3-8b"), GPUS[0]
    from llmcalc.costs.engine_step import EngineStep

    step = EngineStep(spec, gpu, Workload(), TMS[gpu.name])
    for rate in (2.0, 10.0, 20.0):
        est = steady(step, 1024, 256, rate)
        load = Load(rate=rate)
        sim = serve(spec, gpu, Workload(), TMS[gpu.name], make_requests(1500, *LENGTHS, load, 0), REFERENCE, load,
                    "", "")
        assert est.tpot == pytest.approx(sim.tpot_s.mean, rel=0.05)
        assert est.b == pytest.approx(sim.mean_concurrency, rel=0.1)
    assert steady(step, 1024, 256, 30.0) is None


def test_overload_has_no_steady_state():
    step_spec = load_preset("llama3-8b")
    from llmcalc.costs.engine_step import EngineStep

    step = EngineStep(step_spec, GPUS[0], Workload(), TMS["h100-sxm"])
    assert steady(step, 1024, 256, 1000.0) is None


def test_layouts_divide_the_model():
    spec = load_preset("mixtral-8x7b")
    found = list(layouts(spec, GPUS[0], 8))
    assert all(L.gpus <= 8 for L in found) and any(L.ep > 1 for L in found)
    for L in found:
        L.check(spec, L.dp)


def test_more_gpus_or_looser_targets_never_shrink_the_feasible_set():
    tight, loose = run(slo=SLO(0.5, 0.02), max_gpus=4), run(slo=SLO(2.0, 0.05), max_gpus=4)
    assert tight.feasible <= loose.feasible
    assert run(max_gpus=2).searched < run(max_gpus=8).searched


def test_disaggregated_pools():
    r = run("llama3-8b", rate=20.0, disaggregated=True, max_gpus=6)
    split = [c for c in r.candidates if c.disaggregated]
    assert r.searched > run("llama3-8b", rate=20.0, max_gpus=6).searched
    for c in split:
        assert c.gpus == c.prefill.gpus + c.tp * c.pp * c.dp and c.prefill.kv_transfer_s > 0


def test_without_prices_ranks_by_throughput_per_gpu():
    r = run(prices={})
    assert all(c.usd_per_million_tokens is None for c in r.candidates)
    per_gpu = [c.output_tokens_per_s_per_gpu for c in r.candidates]
    assert per_gpu == sorted(per_gpu, reverse=True)
    with pytest.raises(UserError, match="rate"):
        run(rate=float("inf"))


def test_cli_json(cli):
    r = cli("plan", "-p", "llama3-8b", "--gpu", "h100-sxm", "--gpu", "a100-80gb", "--max-gpus", "4", "--rate", "10",
            "--slo-ttft", "2", "--slo-tpot", "0.05", "--price", "a100-80gb=1.5", "--top", "3", "--format", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert 1 <= len(data["candidates"]) <= 3
    for c in data["candidates"]:
        assert set(c) >= {"gpu", "gpus", "tp", "pp", "ep", "dp", "weights_dtype", "max_seqs", "meets_slo",
                          "output_tokens_per_s_per_gpu", "usd_per_million_tokens", "ttft_p99_s", "tpot_p99_s"}
    a100 = [c for c in data["candidates"] if c["gpu"] == "a100-80gb"]
    for c in a100:
        assert c["usd_per_million_tokens"] == pytest.approx(c["gpus"] * 1.5 / (10 * 256 * 3600) * 1e6)


@pytest.mark.parametrize("args, word", [
    (("--slo-ttft", "2"), "--rate"), (("--rate", "5"), "--slo-ttft"),
    (("--rate", "5", "--slo-tpot", "0.05", "--price", "h100-sxm=abc"), "--price"),
    (("--rate", "5", "--slo-tpot", "0.05", "--price", "b200=2"), "--price"),
    (("--rate", "5", "--slo-tpot", "0.05", "--gpu", "nope"), "--gpu")])
def test_cli_bad_input_exits_2(cli, args, word):
    r = cli("plan", "-p", "llama3-8b", *args)
    assert r.returncode == 2, r.stderr
    assert word in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


# ---- bounds: a stated cap on the search, refused in one line before any work ----

PLAN = ["plan", "-p", "llama3-8b", "--rate", "10", "--slo-tpot", "0.05"]


def one_line_error(r, *needles):
    assert r.returncode == 2 and "Traceback" not in r.stderr, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and all(n in lines[0] for n in needles), r.stderr
    return lines[0]


def test_bounds_are_stated_in_help(cli):
    from llmcalc.views.plan import MAX_CANDIDATES, MAX_GPUS, MAX_SIMULATED

    text = " ".join(cli("plan", "--help").stdout.replace("│", " ").split())
    for figure in (f"at most {MAX_GPUS}", f"{MAX_CANDIDATES:,}", f"{MAX_SIMULATED:,}", "--timings"):
        assert figure in text, figure


@pytest.mark.parametrize("args, needles", [
    (["--max-gpus", "1m"], ["--max-gpus", "1,048,576", "1,024 or fewer"]),
    (["--max-gpus", "1025"], ["--max-gpus", "1,024 or fewer"]),
    (["--max-gpus", "128", "--disaggregated"], ["--max-gpus", "candidates", "--disaggregated"]),
    (["--max-gpus", "1024", "--gpu", "h100-sxm", "--gpu", "h200", "--gpu", "b200", "--gpu", "mi300x", "--gpu",
      "a100-80gb", "--gpu", "l40s", "--gpu", "h20"], ["--max-gpus", "candidates", "fewer --gpu"]),
    (["--requests", "1m"], ["--requests", "100,000"]),
    (["--requests", "50000", "--top", "5"], ["--requests", "100,000", "--top"]),
    (["--top", "1k"], ["--requests", "--top"]),
])
def test_a_search_past_the_bounds_is_refused(cli, args, needles):
    one_line_error(cli(*PLAN, *args), *needles)


def test_the_largest_search_allowed_runs_in_bounded_memory(tmp_path):
    """--max-gpus at its cap (1024) is searched, the closed-form pass as counted beforehand, in well under a
    gigabyte (the peak resident memory of the command's own process)."""
    import subprocess
    import sys

    from llmcalc.views.plan import MAX_GPUS

    code = ("import json, resource, subprocess, sys\n"
            f"r = subprocess.run([sys.executable, '-m', 'llmcalc', *{PLAN!r}, '--max-gpus', '{MAX_GPUS}', '--top', '1',"
            " '--requests', '50', '-f', 'json'], capture_output=True, text=True)\n"
            "assert r.returncode == 0, r.stderr\n"
            "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
            "print(json.dumps([json.loads(r.stdout)['searched'], peak]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    searched, peak_kib = json.loads(out.stdout)
    assert searched > 10_000 and peak_kib < 512 * 1024, (searched, peak_kib)


@pytest.mark.parametrize("disaggregated", [False, True])
def test_the_count_before_the_search_bounds_what_it_evaluates(disaggregated):
    from llmcalc.views.plan import search_size

    spec = load_preset("llama3-8b")
    grids = {g.name: list(layouts(spec, g, 12)) for g in GPUS}
    r = run(max_gpus=12, disaggregated=disaggregated, top=1, requests=50)
    size = search_size(grids, GPUS, 12, disaggregated, spec, load_engine(None))
    assert r.searched == size if not disaggregated else 0 < r.searched <= size


def test_progress_is_told_of_every_step():
    seen = []
    r = run(max_gpus=4, top=1, requests=50, progress=lambda what, done, total: seen.append((what, done, total)))
    closed = [(d, t) for w, d, t in seen if w == "closed form"]
    assert closed[-1] == (r.searched, r.searched) and [d for d, _ in closed] == sorted(d for d, _ in closed)
    assert sum(w == "simulating finalists" for w, _, _ in seen) == r.simulated


def test_progress_shows_on_a_terminal_only(tmp_path):
    """A transient bar on stderr when it is a terminal (a pseudo-terminal here); nothing on stderr in a pipe."""
    import os
    import pty
    import subprocess
    import sys

    args = [sys.executable, "-m", "llmcalc", *PLAN, "--max-gpus", "4", "--top", "1", "--requests", "50", "-f", "json"]
    piped = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert piped.returncode == 0 and piped.stderr == ""
    main, side = pty.openpty()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=side, env=os.environ | {"COLUMNS": "100"})
    os.close(side)
    shown = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        shown += chunk
    out, _ = p.communicate(timeout=300)
    os.close(main)
    assert p.returncode == 0 and json.loads(out)["candidates"] is not None
    assert b"searching" in shown or b"closed form" in shown, shown[:200]


# ---- the same bytes on every run; wall-clock timings only when asked for ----

def test_json_is_byte_reproducible_and_timings_are_opt_in(cli):
    args = [*PLAN, "--max-gpus", "4", "--top", "2", "--requests", "100", "-f", "json"]
    first, second = cli(*args), cli(*args)
    assert first.returncode == 0 and first.stdout == second.stdout
    assert "search_s" not in json.loads(first.stdout)
    timed = cli(*args, "--timings")
    assert timed.returncode == 0
    data = json.loads(timed.stdout)
    assert data.pop("search_s") >= 0 and data == json.loads(first.stdout)


@pytest.mark.parametrize("option, value", [("--slo-tpot", "nan"), ("--slo-ttft", "inf"), ("--slo-tpot", "0"),
                                           ("--slo-ttft", "-1")])
def test_a_target_that_is_not_a_finite_positive_time_is_refused(cli, option, value):
    one_line_error(cli("plan", "-p", "llama3-8b", "--rate", "5", "--max-gpus", "2", f"{option}={value}", "-f", "json"),
                   option, "finite")


def test_saturation_covers_the_load_and_grows_with_the_gpus():
    """Each deployment's saturation throughput (every engine full) is at least the offered output tokens/s, its
    headroom the ratio; for one layout kind it doubles with the replicas and rises with tp."""
    r = run(rate=5.0, slo=SLO(None, 0.05), max_gpus=4, top=30, requests=60, disaggregated=True)
    offered = 5.0 * 256
    assert len(r.candidates) >= 10 and any(c.disaggregated for c in r.candidates)
    for c in r.candidates:
        assert c.saturation_tokens_per_s >= offered and c.headroom == pytest.approx(c.saturation_tokens_per_s / offered)
        assert 1 <= c.full_batch <= c.max_seqs
    colocated = [c for c in r.candidates if not c.disaggregated]
    kind = lambda c: (c.gpu, c.weights_dtype, c.max_seqs, c.full_batch, c.pp, c.ep)  # noqa: E731
    replicas = [(a, b) for a in colocated for b in colocated if kind(a) == kind(b) and a.tp == b.tp and a.dp < b.dp]
    wider = [(a, b) for a in colocated for b in colocated if kind(a) == kind(b) and a.dp == b.dp and a.tp < b.tp]
    assert replicas and wider
    for a, b in replicas:
        assert b.saturation_tokens_per_s == pytest.approx(b.dp / a.dp * a.saturation_tokens_per_s)
    for a, b in wider:
        assert b.saturation_tokens_per_s > a.saturation_tokens_per_s


def test_saturation_is_latencys_decode_throughput_at_the_full_batch(cli_json):
    """Through the commands: a deployment's saturation_tokens_per_s equals `llmcalc latency`'s decode_tokens_per_s
    (batch / the decode step) at its full batch per replica and context prompt + output/2, in its layout and
    dtype; the table shows the headroom at 80 columns."""
    args = ("-p", "llama3-8b", "--gpu", "h100-sxm", "--rate", "5", "--slo-tpot", "0.05", "--max-gpus", "2",
            "--top", "6", "--requests", "100")
    out = cli_json("plan", *args)
    checked = 0
    for c in out["candidates"]:
        if c["pp"] > 1 or c["disaggregated"]:
            continue
        d = c["weights_dtype"]
        lat = cli_json("latency", "-p", "llama3-8b", "--gpu", "h100-sxm", "--batch", str(c["dp"] * c["full_batch"]),
                       "--seq", str(1024 + 256 // 2), "--tp", str(c["tp"]), "--dp", str(c["dp"]), "--ep", str(c["ep"]),
                       "--weights-dtype", d, "--kv-dtype", d, "--compute-dtype", d)
        assert c["saturation_tokens_per_s"] == pytest.approx(lat["decode_tokens_per_s"], rel=1e-9)
        checked += 1
    assert checked >= 3
    r = subprocess.run([sys.executable, "-m", "llmcalc", "plan", *args], capture_output=True, text=True,
                       env=dict(os.environ, COLUMNS="80", TERM="dumb"), timeout=900)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "head-" in r.stdout and "tokens" in r.stdout and max(map(len, lines)) <= 80
    assert f"×{out['candidates'][0]['headroom']:,.1f}" in next(x for x in lines if x.startswith("1 "))
