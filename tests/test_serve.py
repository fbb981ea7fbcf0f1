"""`llmcalc serve` (llmcalc/views/serve.py) and its step (llmcalc/costs/engine_step.py): the engine step against
`llmcalc latency`, Little's law, the low-load and saturation limits, memory monotonicity, determinism,
speculative decoding against its closed-form expectation, traces, and the command's exit codes."""

from __future__ import annotations

import csv
import io
import json

import pytest
from conftest import settings, strict_json

from llmcalc.costs.engine_step import EngineStep
from llmcalc.costs.latency import latency
from llmcalc.errors import UserError
from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.presets import load_preset
from llmcalc.inputs.requests import load_trace, parse_lengths
from llmcalc.inputs.time_models import load_time_model
from llmcalc.views.serve import Load, make_requests, serve, speculative
from llmcalc.workload import Layout, Workload

H100 = load_gpu("h100-sxm")
TM = load_time_model(None, H100)


def run(preset="llama3-8b", n=300, prompt="1024", output="128", load=Load(rate=float("inf")), engine=settings(),
        w=Workload(), seed=0, gpu=H100, **kw):
    rows = make_requests(n, parse_lengths(prompt, "prompt"), parse_lengths(output, "output"), load, seed)
    return serve(load_preset(preset), gpu, w, load_time_model(None, gpu), rows, engine, load, prompt, output,
                 seed=seed, **kw)


@pytest.mark.parametrize("preset, layout", [
    ("llama2-7b", Layout()), ("mixtral-8x7b", Layout(tp=2)), ("deepseek-v2-lite", Layout()),
    ("gemma2-9b", Layout()), ("qwen3-30b-a3b", Layout(tp=2, ep=2)), ("longformer-decoder-example", Layout()),
    ("linformer-decoder-example", Layout()), ("deepseek-v3.2-exp", Layout(tp=8))])
def test_engine_step_alone_is_latency(preset, layout):
    """A step of decode tokens alone is latency's decode step at that context; a step of whole prompts is its
    prefill (both time models), and a prompt chunk after cached tokens costs more than none."""
    spec, gpu = load_preset(preset), load_gpu("h200")
    w = Workload(batch=4, seq=3000, gen=2, layout=layout, weights_dtype="fp8" if "v3" in preset else "bf16")
    for tm in (load_time_model("roofline", gpu), load_time_model(None, gpu)):
        r, step = latency(spec, gpu, w, tm), EngineStep(spec, gpu, w, tm)
        assert step.time([], [3000] * 4) == pytest.approx(r.tpot_s, rel=1e-12)
        assert step.time([(3000, 0)] * 4, []) == pytest.approx(r.ttft_s, rel=1e-12)
        assert step.time([(500, 2500)], []) > step.time([(500, 0)], [])


def test_mixed_step_reads_the_weights_once():
    """Decode tokens riding along a prompt chunk cost far less than a decode step of their own: the weights are
    read once per step."""
    spec = load_preset("llama3-8b")
    step = EngineStep(spec, H100, Workload(), TM)
    alone = step.time([], [2000] * 32)
    extra = step.time([(1024, 0)], [2000] * 32) - step.time([(1024, 0)], [])
    assert 0 < extra < alone / 2


@pytest.mark.parametrize("load", [Load(rate=4.0), Load(rate=25.0), Load(rate=float("inf")), Load(concurrency=48),
                                  Load(rate=8.0, constant=True)])
def test_littles_law(load):
    """The time-average of the requests in the system, integrated step by step, equals throughput × mean
    latency (Little's law)."""
    r = run(load=load)
    assert r.requests == 300 and all(x.e2e_s >= x.ttft_s > x.queue_s >= 0 for x in r.timeline)
    assert r.mean_concurrency == pytest.approx(r.little_concurrency, rel=1e-6)
    if load.concurrency:
        assert r.mean_concurrency <= load.concurrency + 1e-9


@pytest.mark.parametrize("load", [Load(rate=25.0), Load(concurrency=48)])
def test_littles_law_counts_the_hosts_time_per_request(load):
    """With a host time per request (request_s), a request is in the system from its arrival: on the host, then
    waiting and running; the time-average still equals throughput × mean latency."""
    spec, rows = load_preset("llama3-8b"), make_requests(300, parse_lengths("1024", "p"), parse_lengths("128", "o"),
                                                         load, 0)
    tm = TM.model_copy(update={"request_s": 0.05})
    r = serve(spec, H100, Workload(), tm, rows, settings(), load, "1024", "128")
    assert r.mean_concurrency == pytest.approx(r.little_concurrency, rel=1e-6)
    assert min(x.ttft_s for x in r.timeline) > 0.05


def test_lockstep_ends_every_step_with_the_slowest_engines():
    """drive: loops on their own clocks each move at their own pace; in lock-step every clock moves to the
    latest step end of the engines that step, an idle one waiting it out, and with none stepping to the
    earliest ready time."""
    from llmcalc.views.serve import drive

    def loop(steps, log):
        """A step of dt (True, dt), or idle until a request is ready at t (False, t), as _Sim.run proposes."""
        now = 0.0
        for runs, x in steps:
            if runs:
                now = yield (True, now + x)
                log.append(now)
            while not runs and now < x:
                now = yield (False, x)
                log.append(now)

    a, b, c = [], [], []
    drive([loop([(True, 1.0)] * 3, a), loop([(True, 3.0)], b), loop([(False, 10.0), (True, 1.0)], c)], lockstep=False)
    assert (a, b, c) == ([1.0, 2.0, 3.0], [3.0], [10.0, 11.0])
    a, b, c = [], [], []
    drive([loop([(True, 1.0)] * 3, a), loop([(True, 3.0)], b), loop([(False, 10.0), (True, 1.0)], c)], lockstep=True)
    assert (a, b, c) == ([3.0, 4.0, 5.0], [3.0], [3.0, 4.0, 5.0, 10.0, 11.0])


def test_replicas_whose_experts_span_them_step_together():
    """Attention data-parallel replicas with the experts over all of them (dp 2, ep 2, tp 1) step together: a
    replica's steps last as long as the slowest one's, so with 4,096-token prompts on one replica and 64-token
    ones on the other, the short requests' decodes wait out the long prompts' steps (more than a half-size expert
    shard saves them); the report says so. Replicas that each hold all experts (ep 1) do not."""
    spec = load_preset("qwen3-30b-a3b")
    rows = [(0.0, 4096 if k % 2 == 0 else 64, 64) for k in range(16)]

    def tpots(ep):
        w = Workload(layout=Layout(dp=2, ep=ep), weights_dtype="bf16")
        r = serve(spec, H100, w, TM, rows, settings(), Load(rate=float("inf")), "mixed", "64")
        short = [x.tpot_s for x in r.timeline if x.prompt == 64]
        return sum(short) / len(short), r

    alone, r1 = tpots(1)
    together, r2 = tpots(2)
    assert together > 1.5 * alone
    assert any("step together" in n for n in r2.notes) and not any("step together" in n for n in r1.notes)


def test_low_rate_is_latency_at_batch_1():
    """Requests far apart meet an idle engine: TTFT is latency's prefill at batch 1, TPOT its mean decode step."""
    r = run(n=20, prompt="2048", output="64", load=Load(rate=0.05, constant=True))
    lat = latency(load_preset("llama3-8b"), H100, Workload(batch=1, seq=2048, gen=64), TM)
    assert r.ttft_s.p50 == pytest.approx(lat.ttft_s, rel=1e-9)
    assert r.tpot_s.p99 == pytest.approx((lat.total_s - lat.ttft_s) / 63, rel=1e-9)
    assert r.queue_s.p99 == 0 and r.preemptions == 0


@pytest.mark.parametrize("batch", [16, 128])
def test_saturation_approaches_static_throughput(batch):
    """All at once, with max_seqs B: output tokens/s within 2% of latency's static throughput at batch B."""
    r = run(n=batch * 6, prompt="512", output="256", engine=settings(max_seqs=batch))
    static = latency(load_preset("llama3-8b"), H100, Workload(batch=batch, seq=512, gen=256), TM).tokens_per_s
    assert r.output_tokens_per_s == pytest.approx(static, rel=0.02)


def test_more_kv_memory_never_lowers_throughput():
    """Under memory pressure (long prompts, all at once), more KV memory never lowers throughput; the tightest
    budget preempts."""
    got = [run(n=300, prompt="4096", output="1024", engine=settings(max_seqs=512, gpu_memory_utilization=u))
           for u in (0.4, 0.55, 0.7, 0.9)]
    rates = [r.output_tokens_per_s for r in got]
    assert rates == sorted(rates) and rates[0] < rates[-1]
    assert got[0].preemptions > 0 and got[0].kv_peak_utilization > 0.95
    assert [r.kv_blocks for r in got] == sorted(r.kv_blocks for r in got)


@pytest.mark.parametrize("preset, kw", [
    ("llama3-8b", dict(load=Load(rate=4.0), prompt="1024", output="256", engine=settings("vllm"))),
    ("llama3-8b", dict(load=Load(rate=10.0), prompt="uniform:100,3000", output="uniform:10,700",
                       engine=settings("sglang-0.4"))),  # prefill-first, overlap, 1-token blocks, admission
    ("llama3-8b", dict(load=Load(concurrency=32), prompt="1500", output="uniform:10,900",
                       engine=settings("trtllm"))),  # the whole request reserved at admission
    ("llama3-8b", dict(n=200, load=Load(concurrency=64), prompt="2048", output="700", gpu=load_gpu("a100-40gb"),
                       engine=settings("vllm", "a100-40gb", gpu_memory_utilization=0.4))),  # preempts
    ("gemma2-9b", dict(n=150, load=Load(rate=3.0), prompt="5000", output="200", prefix_hit=0.5)),
    ("deepseek-v2-lite", dict(n=150, load=Load(rate=5.0), prompt="2000", output="400",
                              engine=settings("vllm-v0", block_size=32))),
])
def test_decode_stretches_are_the_step_loop(preset, kw, monkeypatch):
    """A stretch of plain decode steps run in one pass (decode_stretch) gives the report the step-by-step loop
    gives, to the last bit: every request's times, the steps, preemptions and the KV figures."""
    import llmcalc.views.serve as sim

    ran, real = [], sim._Sim.decode_stretch
    monkeypatch.setattr(sim._Sim, "decode_stretch", lambda self, *a: ran.append(real(self, *a)) or ran[-1])
    fast = run(preset, **kw)
    monkeypatch.setattr(sim._Sim, "decode_stretch", lambda self, steps, ready_at, seen, *a: (0, seen))
    slow = run(preset, **kw)
    assert sum(steps for steps, _ in ran) > 100  # stretches were taken (a preempting run has few)
    assert fast == slow


def test_same_seed_same_result():
    a, b = run(load=Load(rate=10.0), prompt="normal:800,200", seed=3), run(load=Load(rate=10.0),
                                                                           prompt="normal:800,200", seed=3)
    c = run(load=Load(rate=10.0), prompt="normal:800,200", seed=4)
    assert a == b and a != c


def test_slo_goodput():
    """Goodput counts the requests within both targets: none under impossible ones, all under loose ones."""
    tight, loose = (run(load=Load(rate=20.0), slo=s) for s in (_slo(1e-6, None), _slo(100.0, 10.0)))
    assert tight.goodput_requests_per_s == 0
    assert loose.goodput_requests_per_s == pytest.approx(loose.requests_per_s)
    assert run(load=Load(rate=20.0)).goodput_requests_per_s is None


def _slo(ttft, tpot):
    from llmcalc.views.serve import SLO

    return SLO(ttft_s=ttft, tpot_s=tpot)


def test_prefix_hits_cut_ttft():
    low = run(n=50, load=Load(rate=0.1, constant=True), prompt="4096")
    hit = run(n=50, load=Load(rate=0.1, constant=True), prompt="4096", prefix_hit=0.75)
    assert hit.ttft_s.p50 < low.ttft_s.p50 / 2


def test_speculative_tokens_per_step_and_speed():
    """k draft tokens accepted with chance a: a verify step yields (1 − a^(k+1)) / (1 − a) tokens on average (the
    truncated geometric), and a good draft lowers the 70B model's TPOT at low load."""
    target, draft = load_preset("llama3.1-70b"), load_preset("llama3-8b")
    w = Workload(layout=Layout(tp=4))
    base = run("llama3.1-70b", n=30, prompt="512", output="200", load=Load(rate=0.05, constant=True), w=w)
    for a in (0.6, 0.9):
        sd = speculative(target, H100, w, TM, 4, a, draft, 8192)
        r = run("llama3.1-70b", n=30, prompt="512", output="200", load=Load(rate=0.05, constant=True), w=w,
                spec_dec=sd)
        assert r.tokens_per_step == pytest.approx((1 - a ** 5) / (1 - a), rel=0.05)  # k = 4
        assert r.tpot_s.mean < base.tpot_s.mean
    with pytest.raises(UserError, match="mtp"):
        speculative(target, H100, w, TM, 2, 0.8, None, 8192)
    with pytest.raises(UserError, match="vocabulary"):
        speculative(target, H100, w, TM, 2, 0.8, load_preset("llama2-7b"), 8192)


def test_mtp_is_cheaper_than_the_model():
    """An MTP module's step is one layer and the head: far below the whole model's step."""
    spec, gpu = load_preset("deepseek-v3"), load_gpu("h200")
    w = Workload(layout=Layout(tp=8), weights_dtype="fp8", compute_dtype="fp8")
    tm = load_time_model(None, gpu)
    whole, module = EngineStep(spec, gpu, w, tm), EngineStep(spec, gpu, w, tm, mtp=True)
    assert module.time([], [1000] * 32) < whole.time([], [1000] * 32) / 20


def test_lengths_and_trace(tmp_path):
    assert parse_lengths("512", "prompt").mean == 512
    assert parse_lengths("uniform:100,300", "prompt").mean == 200
    for bad in ("0", "uniform:5,1", "normal:0,1", "gauss:1,2", "x"):
        with pytest.raises(UserError, match="`prompt`"):
            parse_lengths(bad, "prompt")
    csv = tmp_path / "t.csv"
    csv.write_text("arrival,prompt,output\n0.5,100,20\n0.1,200,10\n")
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text('{"arrival": 0.1, "prompt": 200, "output": 10}\n{"arrival": 0.5, "prompt": 100, "output": 20}\n')
    assert load_trace(csv) == load_trace(jsonl) == [(0.1, 200, 10), (0.5, 100, 20)]
    (tmp_path / "bad.csv").write_text("arrival,prompt\n0,1\n")
    with pytest.raises(UserError, match=r"header \(line 1\) lacks output"):
        load_trace(tmp_path / "bad.csv")


def test_a_trace_error_names_the_lines_of_its_row(tmp_path):
    """A CSV row whose quoted field spans lines is named by its first and last line (it was named by its last
    alone); blank lines between rows are skipped, and rows after them keep their own line numbers."""
    (tmp_path / "t.csv").write_text('arrival,prompt,output\n0,10,10\n\n\n"1\n",x,5\n2,3,4\n')
    with pytest.raises(UserError, match=r"t\.csv lines 5-6: arrival must be"):
        load_trace(tmp_path / "t.csv")
    (tmp_path / "u.csv").write_text("arrival,prompt,output\n0,10,10\n\n1,5\n")
    with pytest.raises(UserError, match=r"u\.csv line 4 lacks output"):
        load_trace(tmp_path / "u.csv")
    (tmp_path / "v.csv").write_text('arrival,prompt,output,note\n0,10,10,"a\nb"\n\n1,5,5,ok\n')
    assert load_trace(tmp_path / "v.csv") == [(0.0, 10, 10), (1.0, 5, 5)]


def test_cli_json_and_trace(cli, tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival,prompt,output\n" + "".join(f"{i * 0.2},{300 + i},{20 + i}\n" for i in range(40)))
    r = cli("serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "--trace", str(trace), "--slo-ttft", "1",
            "--format", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    for field in ("requests_per_s", "output_tokens_per_s", "goodput_requests_per_s", "mean_concurrency",
                  "kv_utilization", "preemptions"):
        assert field in data
    for field in ("ttft_s", "tpot_s", "e2e_s", "queue_s"):
        assert set(data[field]) == {"mean", "p50", "p90", "p99"}
    assert data["requests"] == 40 and data["load"] == "trace trace.csv"


@pytest.mark.parametrize("args, word", [
    (("--rate", "0"), "--rate"), (("--rate", "2", "--concurrency", "4"), "--concurrency"),
    (("--prompt", "uniform:9,1"), "--prompt"), (("--gpu-memory-utilization", "1.5"), "--gpu-memory-utilization"),
    (("--trace", "/nonexistent.csv"), "--trace"), (("--mtp",), "--mtp"), (("--prefix-hit", "1"), "--prefix-hit"),
    (("--prompt", "200000", "--gpu-memory-utilization", "0.3"), "--prompt")])
def test_cli_bad_input_exits_2(cli, args, word):
    r = cli("serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "-n", "10", *args)
    assert r.returncode == 2, r.stderr
    assert word in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("vs", ["time", "load"])
def test_plot(cli, tmp_path, vs):
    pytest.importorskip("matplotlib")
    out = tmp_path / f"serve-{vs}.png"
    r = cli("serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "--rate", "5", "-n", "40", "--slo-tpot", "0.03",
            "--plot", str(out), "--plot-vs", vs, "--format", "json")
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


HANG = 300
"""Seconds before a run counts as hung (a NaN arrival once spun forever); far above any run's time."""
SERVE = ("serve", "-p", "llama3-8b", "--gpu", "h100-sxm")


def refused(r, word: str) -> None:
    """Exit 2 with one line on stderr naming `word`, no traceback."""
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert word in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


BAD_TRACES = [
    ("nan.csv", "arrival,prompt,output\nnan,100,10\n"),
    ("nan.jsonl", '{"arrival": NaN, "prompt": 100, "output": 10}\n'),
    ("inf.csv", "arrival,prompt,output\ninf,100,10\n"), ("big.csv", "arrival,prompt,output\n1e999,100,10\n"),
    ("big.jsonl", '{"arrival": 1e400, "prompt": 100, "output": 10}\n'),
    ("ninf.csv", "arrival,prompt,output\n-inf,100,10\n"),
    ("frac.jsonl", '{"arrival": 0, "prompt": 1.9, "output": 10}\n'),
    ("bool.jsonl", '{"arrival": 0, "prompt": 100, "output": true}\n'),
    ("frac.csv", "arrival,prompt,output\n0,100,1.9\n"),
    ("deep.jsonl", "[" * 100_000 + "]" * 100_000 + "\n")]


@pytest.mark.parametrize("name, text", BAD_TRACES, ids=[name for name, _ in BAD_TRACES])
def test_trace_values_are_checked_where_read(cli, tmp_path, name, text):
    """A trace's non-finite arrival, fraction or bool for a count is refused in one line (a NaN arrival hung
    serve; JSONL 1.9 and true were truncated to 1; 1e400 overflowed)."""
    (tmp_path / name).write_text(text)
    refused(cli(*SERVE, "--trace", str(tmp_path / name), "-f", "json", timeout=HANG), "--trace")


@pytest.mark.parametrize("content", [
    "arrival,prompt,output\n0,100,10\n".encode("latin-1") + "0.5,100,10,caf\xe9\n".encode("latin-1"),
    bytes(range(256)) * 8, b"arrival,prompt,output\n0,1\x00,2\n"], ids=["latin-1", "binary", "nul"])
def test_trace_bytes_that_are_not_text(cli, tmp_path, content):
    (tmp_path / "t.csv").write_bytes(content)
    refused(cli(*SERVE, "--trace", str(tmp_path / "t.csv"), timeout=HANG), "--trace")


def test_trace_paths_that_cannot_be_read(cli, tmp_path):
    refused(cli(*SERVE, "--trace", str(tmp_path / ("x" * 5000)), timeout=HANG), "--trace")
    refused(cli(*SERVE, "--trace", str(tmp_path), timeout=HANG), "--trace")
    refused(cli(*SERVE, "--trace", "/dev/zero", timeout=HANG), "--trace")


def test_trace_everyday_files_are_read(cli, tmp_path):
    """Excel's "CSV UTF-8" (a byte-order mark) and a field over csv's 128 KB default are read."""
    (tmp_path / "bom.csv").write_bytes("arrival,prompt,output\n0.5,100,10\n0,50,5\n".encode("utf-8-sig"))
    r = cli(*SERVE, "--trace", str(tmp_path / "bom.csv"), "-f", "json", timeout=HANG)
    assert r.returncode == 0, r.stderr
    assert [(x["arrival_s"], x["prompt"]) for x in strict_json(r.stdout)["timeline"]] == [(0, 50), (0.5, 100)]
    (tmp_path / "long.csv").write_text(f"arrival,prompt,output,text\n0,100,10,\"{'x' * 200_000}\"\n")
    r = cli(*SERVE, "--trace", str(tmp_path / "long.csv"), "-f", "json", timeout=HANG)
    assert r.returncode == 0 and strict_json(r.stdout)["requests"] == 1, r.stderr


def test_trace_is_read_no_further_than_n_rows(cli, tmp_path):
    """-n N reads N rows: a bad row past them is never reached (the whole file was read, then cut)."""
    (tmp_path / "t.csv").write_text("arrival,prompt,output\n0,100,10\n0.5,100,10\n0.7,100,10\nbad,row,here\n")
    r = cli(*SERVE, "--trace", str(tmp_path / "t.csv"), "-n", "3", "-f", "json", timeout=HANG)
    assert r.returncode == 0 and strict_json(r.stdout)["requests"] == 3, r.stderr
    refused(cli(*SERVE, "--trace", str(tmp_path / "t.csv"), "-n", "4", timeout=HANG), "--trace")


def test_trace_file_size_is_capped(cli, tmp_path):
    from llmcalc.inputs.requests import MAX_TRACE_BYTES

    big = tmp_path / "big.csv"
    with big.open("wb") as f:  # sparse: no disk used
        f.write(b"arrival,prompt,output\n")
        f.truncate(MAX_TRACE_BYTES + 1)
    refused(cli(*SERVE, "--trace", str(big), timeout=HANG), "--trace")


def test_all_at_once_is_null_and_json_strict(cli):
    r = cli(*SERVE, "-n", "5", "-f", "json", timeout=HANG)
    assert r.returncode == 0, r.stderr
    data = strict_json(r.stdout)
    assert data["rate"] is None and data["load"] == "all at once"
    assert strict_json(cli(*SERVE, "-n", "5", "--rate", "3", "-f", "json", timeout=HANG).stdout)["rate"] == 3


def test_serve_report_refuses_non_finite_figures():
    from pydantic import ValidationError

    from llmcalc.reports.serve import Spread

    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValidationError):
            Spread(mean=bad, p50=0.0, p90=0.0, p99=0.0)


@pytest.mark.parametrize("args, word", [
    (("--rate", "1e-308"), "--rate"), (("--rate", "nan"), "--rate"), (("--rate", "-inf"), "--rate"),
    (("--slo-tpot", "nan"), "--slo-tpot"), (("--slo-ttft", "-1"), "--slo-ttft"), (("--slo-ttft", "0"), "--slo-ttft"),
    (("--slo-tpot", "0"), "--slo-tpot"), (("--slo-ttft", "inf"), "--slo-ttft"), (("-n", "0"), "--requests"),
    (("-n", "1000000000"), "--requests"), (("--prompt", "normal:inf,0"), "--prompt"),
    (("--prompt", "normal:1e308,1e308"), "--prompt"), (("--output", "normal:nan,1"), "--output"),
    (("--prompt", "uniform:1,1e300"), "--prompt"), (("--prompt", "9" * 30), "--prompt")])
def test_serve_hostile_numbers_exit_2(cli, args, word):
    refused(cli(*SERVE, "-n", "5", *args, timeout=HANG) if args[0] != "-n" else cli(*SERVE, *args, timeout=HANG),
            word)


@pytest.mark.parametrize("args, word", [
    (("--slo-ttft", "-1"), "--slo-ttft"), (("--slo-ttft", "0"), "--slo-ttft"), (("--slo-tpot", "nan"), "--slo-tpot"),
    (("--slo-ttft", "1", "-n", "0"), "--requests"), (("--slo-ttft", "1", "-n", "1000000000"), "--requests"),
    (("--slo-ttft", "1", "--prompt", "normal:inf,0"), "--prompt")])
def test_plan_hostile_numbers_exit_2(cli, args, word):
    refused(cli("plan", "-p", "llama3-8b", "--rate", "2", *args, timeout=HANG), word)


def test_a_nan_arrival_cannot_spin_the_loop(tmp_path):
    """Past the readers' checks, the engine's loop itself refuses to spin: each pass admits, runs a step or
    moves the clock on."""
    import subprocess
    import sys

    code = ("from llmcalc.inputs.gpus import load_gpu; from llmcalc.inputs.presets import load_preset\n"
            "from llmcalc.inputs.time_models import load_time_model; from llmcalc.views.serve import Load, "
            "serve; from llmcalc.workload import Workload; from llmcalc.inputs.engines import load_engine\n"
            "g = load_gpu('h100-sxm')\n"
            "try:\n"
            "    serve(load_preset('llama3-8b'), g, Workload(), load_time_model(None, g), [(0.0, 100, 5), "
            "(float('nan'), 100, 5)], load_engine('reference').settings(g), Load(rate=None), '100', '5')\n"
            "except RuntimeError as e:\n"
            "    print('refused:', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG)
    assert r.returncode == 0 and r.stdout.startswith("refused:"), r.stderr


def test_progress_only_on_a_terminal(cli, tmp_path):
    """A transient bar on stderr from the start when it is a terminal (any number of requests, any format);
    nothing when stderr is a pipe."""
    import os
    import pty
    import subprocess
    import sys

    r = cli(*SERVE, "-n", "2500", "--prompt", "64", "--output", "4", timeout=HANG)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    leader, follower = pty.openpty()
    p = subprocess.run([sys.executable, "-m", "llmcalc", *SERVE, "-n", "20", "-f", "json"], stdout=subprocess.PIPE,
                       stderr=follower, timeout=HANG)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert p.returncode == 0 and b"simulating" in seen, seen[-500:]
    strict_json(p.stdout)


def test_request_cap_is_stated_in_help(cli):
    from llmcalc.inputs.requests import MAX_REQUESTS

    for command in ("serve", "plan"):
        assert f"{MAX_REQUESTS:,}" in cli(command, "--help").stdout


def test_csv_ends_with_the_percentiles_and_throughput(cli):
    """-f csv: one `item` row per request, then a `summary` row with the JSON's percentiles and throughput."""
    args = ("serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "--rate", "10", "--requests", "30")
    out = strict_json(cli(*args, "-f", "json").stdout)
    *rows, summary = csv.DictReader(io.StringIO(cli(*args, "-f", "csv").stdout))
    assert [x["row"] for x in rows] == ["item"] * 30 and summary["row"] == "summary"
    for spread in ("ttft_s", "tpot_s", "e2e_s", "queue_s"):
        for stat in ("mean", "p50", "p90", "p99"):
            assert float(summary[f"{spread}.{stat}"]) == out[spread][stat]
    assert float(summary["output_tokens_per_s"]) == out["output_tokens_per_s"] > 0
    assert float(summary["requests_per_s"]) == out["requests_per_s"] and int(summary["requests"]) == 30


def test_kv_cache_size_in_tokens_is_what_fit_leaves_in_whole_blocks(cli_json, cli):
    """serve prints the KV capacity in tokens as the engine logs it at start-up (vLLM: "GPU KV cache size: N
    tokens"): `fit`'s KV budget at vLLM's memory utilisation (0.92 of the GPU) and step budget (8,192 tokens on an
    H100), in whole blocks of `kv`'s 16-token bytes; SGLang's pool (its share of the GPU holds the activations) is
    larger by exactly the activation workspace `fit` keeps."""
    base = ("-p", "llama3-8b", "--gpu", "h100-sxm")
    fit = cli_json("fit", *base, "--batch", "1", "--seq", "8192", "--reserve", "0.08", "--prefill-chunk", "8192")
    block = cli_json("kv", "-p", "llama3-8b", "--batch", "1", "--seq", "16")["total_bytes"]
    r = cli_json("serve", *base, "--rate", "10", "--requests", "20")
    assert r["engine"] == "vllm" and r["gpu_memory_utilization"] == 0.92 and r["max_batched_tokens"] == 8192
    assert r["kv_tokens"] == fit["kv_budget_bytes"] // block * 16 == r["kv_blocks"] * 16
    assert r["kv_log"] == f"GPU KV cache size: {r['kv_tokens']:,} tokens"
    assert f"its log says “GPU KV cache size: {r['kv_tokens']:,} tokens”" in " ".join(
        cli("serve", *base, "--rate", "10", "--requests", "20").stdout.split())
    sg = cli_json("serve", *base, "--rate", "10", "--requests", "20", "--engine", "sglang",
                  "--gpu-memory-utilization", "0.92", "--max-batched-tokens", "8192")
    kv = cli_json("kv", "-p", "llama3-8b", "--batch", "1", "--seq", "1")["total_bytes"]
    assert sg["block_size"] == 1 and sg["kv_log"] == f"KV Cache is allocated. #tokens: {sg['kv_tokens']}"
    assert sg["kv_tokens"] == (fit["kv_budget_bytes"] + fit["activation_bytes"]) // kv


@pytest.mark.parametrize("layout", [Layout(), Layout(tp=2, dp=2)])
def test_requests_too_far_apart_to_share_steps_are_refused_past_the_step_bound(monkeypatch, layout):
    """check_work counts the fewest steps a run could take (every output token batched); requests that arrive too
    far apart to share steps take one step per token each, so the loop itself refuses a run past MAX_STEPS in all
    (here lowered to 1,000: 50 requests of 64 tokens alone take 3,200), naming what to change; the same requests
    all at once take about 70 steps and run."""
    import llmcalc.views.serve as serving

    monkeypatch.setattr(serving, "MAX_STEPS", 1000)
    assert run("llama2-7b", n=50, prompt="128", output="64", w=Workload(layout=layout)).steps < 1000
    with pytest.raises(UserError, match=r"`requests`: the run passed 1,000 engine steps.*closer together"):
        run("llama2-7b", n=50, prompt="128", output="64", load=Load(rate=1e-4), w=Workload(layout=layout))


def test_replicas_stepping_together_count_each_pass_against_the_step_bound(monkeypatch):
    """In lock-step every live replica takes each round's pass, stepping or waiting out its idle forward, so a
    round counts one step per live replica: 8 data-parallel attention replicas (ep 8) of one request each, far
    apart, take about 8 × 65 rounds but about 2,300 passes, and are refused past a bound of 1,000 (counted by
    rounds they ran, 128 replicas for 125 s). An output whose rounds times the replicas is past the bound is
    refused before the run starts, naming `dp`."""
    import llmcalc.views.serve as serving

    monkeypatch.setattr(serving, "MAX_STEPS", 1000)
    w = Workload(layout=Layout(dp=8, ep=8), weights_dtype="bf16")
    assert run("qwen3-30b-a3b", n=8, prompt="16", output="64", load=Load(rate=float("inf")), w=w).steps < 1000
    with pytest.raises(UserError, match=r"`requests`: the run passed 1,000 engine steps.*replicas stepping together"):
        run("qwen3-30b-a3b", n=8, prompt="16", output="64", load=Load(rate=1e-4), w=w)
    with pytest.raises(UserError, match=r"`output`: an output of 200 tokens takes 200 steps on each of 8 replicas "
                                        r"stepping together.*fewer replicas \(`dp`\)"):
        run("qwen3-30b-a3b", n=8, prompt="16", output="200", load=Load(rate=float("inf")), w=w)


def test_runs_under_one_command_share_the_step_bound(monkeypatch):
    """measured's runs, plan's finalists and a load curve each simulated up to MAX_STEPS on its own: 4 runs of 8,000
    requests at concurrency 1 took about 4 × 70 s. Under shared_steps they draw on one budget (here 1,000 steps:
    each run below takes about 700), and outside it each run still has its own."""
    import llmcalc.views.serve as serving

    monkeypatch.setattr(serving, "MAX_STEPS", 1000)
    one = run("llama2-7b", n=10, prompt="128", output="64", load=Load(concurrency=1))
    assert 500 < one.steps < 1000
    run("llama2-7b", n=10, prompt="128", output="64", load=Load(concurrency=1))
    with serving.shared_steps():
        run("llama2-7b", n=10, prompt="128", output="64", load=Load(concurrency=1))
        with pytest.raises(UserError, match=r"`requests`: these runs passed 1,000 engine steps in all"):
            run("llama2-7b", n=10, prompt="128", output="64", load=Load(concurrency=1))


@pytest.mark.parametrize("preset, kw", [
    ("llama3-8b", dict(gpu=load_gpu("l4"), prompt="uniform:1000,12000", output="uniform:1,3000", n=12)),
    ("gemma2-9b", dict(gpu=load_gpu("l4"), prompt="6000", output="2000", n=6)),  # sliding-window layers
    ("deepseek-v2-lite", dict(prompt="uniform:1,60000", output="uniform:1,900", n=40, load=Load(concurrency=7))),
    ("nemotron-h-8b", dict(gpu=load_gpu("l4"), prompt="20000", output="300", n=8)),  # a state beside the KV
    ("qwen3-30b-a3b", dict(prompt="30000", output="400", n=16, w=Workload(layout=Layout(dp=2, ep=2)))),
    ("llama3-8b", dict(gpu=load_gpu("l4"), prompt="20000", output="700", n=6, w=Workload(layout=Layout(pp=2)))),
    ("llama3-8b", dict(gpu=load_gpu("l4"), prompt="9000", output="1500", n=6, draft="llama3-8b")),
])
def test_the_kv_bound_on_steps_is_below_the_steps_the_loop_takes(monkeypatch, preset, kw):
    """least_kv_steps is a lower bound on the engine steps of a run whose KV cache holds few requests: against the
    step loop itself, on requests long enough to fill the cache, for full attention, sliding windows, MLA, a
    hybrid's state, replicas, stages and speculative decoding."""
    import llmcalc.views.serve as serving

    seen = []
    monkeypatch.setattr(serving, "check_kv_work", lambda *args: seen.append(args))
    if "draft" in kw:
        gpu, draft = kw["gpu"], load_preset(kw.pop("draft"))
        kw["spec_dec"] = speculative(load_preset(preset), gpu, Workload(), load_time_model(None, gpu), 3, 0.8, draft,
                                     2048)
    report = run(preset, **kw)
    bound = serving.least_kv_steps(*seen[0])
    assert 0 < bound <= report.steps, (bound, report.steps)
    assert report.steps < 12 * bound  # and not vacuous: within an order of magnitude where the cache is full


def test_a_run_whose_kv_cache_holds_few_requests_is_refused_before_it_starts(monkeypatch):
    """Requests too long for the KV cache to hold more than a few at once were refused only when the loop passed
    MAX_STEPS, after about two minutes (llama3-8b on one L4, 1,000 requests of 32,000 output tokens); their KV
    bound refuses them at once. Here the bound is lowered to 1,000: 10 requests of 20,000 + 700 tokens, about
    one at a time, take some 7,000 steps; the loop is never entered."""
    import llmcalc.views.serve as serving

    monkeypatch.setattr(serving, "MAX_STEPS", 1000)
    monkeypatch.setattr(serving, "drive", lambda *a: pytest.fail("the run started"))
    with pytest.raises(UserError, match=r"`requests`: the KV cache \(\d\.\d\d GB per GPU\) holds so few of these 10 "
                                        r"requests at once that their decodes need at least [\d,]+ engine steps, more "
                                        r"than the 1,000 a run may take"):
        run("llama3-8b", n=10, prompt="20000", output="700", gpu=load_gpu("l4"))


def test_a_run_is_bounded_by_the_requests_its_scheduler_passes_over(monkeypatch):
    """SGLang's prefill-first loop at a step budget of one token runs a step per prompt token, each passing over
    every running request: 2,000 requests ran for minutes within the step bound. The requests the schedulers pass
    over are bounded too (here lowered to 400,000): 200 such requests pass over about 26 M and are refused naming
    the step budget; a run of 1,000 requests at the engine's own budget passes over about one per output token (its
prompt steps pass over the decoding ones: 1.12 per output token)."""
    import llmcalc.views.serve as serving

    seen = []
    drive = serving.drive
    monkeypatch.setattr(serving, "drive", lambda loops, lockstep, sims: seen.append(sims) or drive(loops, lockstep,
                                                                                                 sims))
    r = run("llama3-8b", n=1000, prompt="1024", output="256", engine=settings("sglang"))
    assert r.requests == 1000 and 256_000 <= sum(s.visits for s in seen[-1]) < 1.25 * 256_000  # 286,453
    monkeypatch.setattr(serving, "MAX_VISITS", 400_000)
    with pytest.raises(UserError, match=r"^`max_batched_tokens`: the run's scheduler passed over 400,000 running "
                                        r"requests, step by step, the most a run may take"):
        run("llama3-8b", n=200, prompt="1024", output="128", engine=settings("sglang", max_batched_tokens=1))
