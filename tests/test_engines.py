"""Serving engines as data (presets/engines/, llmcalc/model/engine.py): every preset sourced; each engine's defaults
for a GPU as its source states them; the scheduler policies, CUDA-graph padding and whole-request admission as
the simulator runs them, against what each rule implies; a bad engine is one line and exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import settings

from llmcalc.costs.engine_step import EngineStep
from llmcalc.costs.latency import latency
from llmcalc.errors import UserError
from llmcalc.inputs.engines import engine_names, load_engine
from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.presets import load_preset
from llmcalc.inputs.requests import parse_lengths
from llmcalc.inputs.time_models import load_time_model
from llmcalc.views.serve import Load, make_requests, serve
from llmcalc.workload import Layout, Workload

ROOT = Path(__file__).parents[1]
H100 = load_gpu("h100-sxm")
TM = load_time_model(None, H100)
SOURCED = ("policy", "chunked_prefill", "tiers", "graph_sizes", "memory_of", "block_size", "kv_log", "fuses",
           "kernels", "overlap_scheduling")


def run(s, n=200, prompt="1024", output="128", load=Load(rate=float("inf")), preset="llama3-8b", w=Workload()):
    rows = make_requests(n, parse_lengths(prompt, "prompt"), parse_lengths(output, "output"), load, 0)
    return serve(load_preset(preset), H100, w, TM, rows, s, load, prompt, output)


def test_the_four_engines_are_bundled_and_each_rule_has_its_source():
    assert {"vllm", "sglang", "trtllm", "reference"} <= set(engine_names())
    for name in ("vllm", "sglang", "trtllm"):
        e = load_engine(name)
        missing = [k for k in SOURCED if k not in e.sources]
        assert missing == [], (name, missing)
        assert e.version and all(len(e.sources[k]) > 20 for k in SOURCED), name


@pytest.mark.parametrize("gpu, seqs, tokens, share, graph", [
    ("h100-sxm", 1024, 8192, 0.92, 512), ("h200", 1024, 8192, 0.92, 512), ("a100-80gb", 256, 2048, 0.92, 512),
    ("l4", 256, 2048, 0.92, 512), ("b200", 1024, 16384, 0.92, 1024), ("mi300x", 1024, 16384, 0.92, 512)])
def test_vllm_defaults_follow_the_gpus_memory_and_kind(gpu, seqs, tokens, share, graph):
    """vLLM's get_batch_defaults: 8,192 tokens and 1,024 sequences from 70 GiB but on an A100, 16,384 tokens from
    160 GiB; its graphs up to 512 (1,024 on the SM100 family)."""
    s = settings("vllm", gpu)
    assert (s.max_seqs, s.max_batched_tokens, s.gpu_memory_utilization, s.graphs[-1]) == (seqs, tokens, share, graph)


def test_sglang_keeps_its_reserve_back_from_the_whole_gpu():
    """SGLang's mem_fraction_static = (memory − reserved) / memory: 13,440 MiB reserved on an H100 and an H200
    (about 0.835 and 0.907 at their 80 and 141 GB), the activations inside the reserve."""
    for gpu in ("h100-sxm", "h200"):
        g = load_gpu(gpu)
        s = settings("sglang", gpu)
        assert s.gpu_memory_utilization == pytest.approx(1 - 13440 * 2**20 / g.memory_bytes, rel=1e-12)
    assert settings("sglang", "h200").gpu_memory_utilization == pytest.approx(0.907, abs=0.002)


@pytest.mark.parametrize(("gpu", "layout", "given", "reserved", "graph_max"), [
    # 512 + 8192 · 1.5 + 512 · 2 + 8 / 8 · 1024 (tp ≥ 4 captures up to 512 on a GPU of 60–160 GiB)
    ("h100-sxm", dict(tp=8), {}, 14848, 512),
    # 14,848 + 512 · 8 · 3 + 512 · 8 · 1.5 under data-parallel attention over 8 replicas (their 8 GPUs the tp_size)
    ("h200", dict(tp=1, dp=8, ep=8), {}, 33280, 512),
    ("h200", dict(tp=2, dp=4, ep=8), {}, 512 + 12288 + 1024 + 1024 + 512 * 4 * 3 + 512 * 4 * 1.5, 512),
    # 512 + 2048 · 1.5 + 32 · 2 + 1024: a 35–60 GiB GPU at tp 1 …
    ("a100-40gb", dict(tp=1), {}, 512 + 4096 * 1.5 + 32 * 2 + 128, 32),
    # … and at tp 4, 160 graphs
    ("a100-40gb", dict(tp=4), {}, 512 + 4096 * 1.5 + 160 * 2 + 512, 160),
    # a step budget of 2,048 tokens: 512 + 3,072 + 512 + 128 = 4,224, at least 10,240 MiB above 60 GiB
    ("h100-sxm", dict(tp=1), dict(max_batched_tokens=2048), 10240, 256),
])
def test_sglang_reserve_follows_its_tensor_parallel_gpus_attention_replicas_and_step_budget(gpu, layout, given,
                                                                                           reserved, graph_max):
    """SGLang's _handle_gpu_memory_settings (server_args.py, 0.5.3 to 0.5.9): the reserve grows with the instance's
    tp_size, its CUDA graphs (up to 512 from tp 4 on an H100 or H200) and, under --enable-dp-attention, with
    cuda_graph_max_bs · dp_size; it is computed from the whole instance's chunk before the division over dp."""
    from llmcalc.workload import Layout

    g = load_gpu(gpu)
    s = load_engine("sglang").settings(g, Layout(**layout), **given)
    assert s.gpu_memory_utilization == pytest.approx(1 - reserved * 2**20 / g.memory_bytes, rel=1e-12)
    assert s.graphs[-1] == min(graph_max, s.max_batched_tokens)
    if "max_batched_tokens" not in given:
        assert s.max_batched_tokens == (4096 if gpu == "a100-40gb" else 8192)  # the whole instance's
    assert load_engine("vllm").settings(g, Layout(**layout)) == load_engine("vllm").settings(g)  # vLLM's: a share


def test_a_decode_batch_is_padded_to_the_next_captured_size_where_the_engine_pads():
    vllm, trt = settings("vllm"), settings("trtllm")
    assert [vllm.graph_batch(b) for b in (1, 3, 9, 250, 257, 512, 513)] == [1, 4, 16, 256, 272, 512, 513]
    assert [trt.graph_batch(b) for b in (3, 33, 128, 129)] == [3, 33, 128, 129]  # no padding: eager off the list
    assert settings("reference").graph_batch(7) == 7


def test_padding_rows_cost_matmul_rows_but_no_attention():
    """A decode step of 33 sequences padded to 40 costs more than 33 and less than 40 real sequences (those
    would also read 7 more contexts)."""
    step = EngineStep(load_preset("llama3-8b"), H100, Workload(), TM)
    contexts = [4096] * 33
    t33, padded, t40 = step.time([], contexts), step.time([], contexts, pad=7), step.time([], [4096] * 40)
    assert t33 < padded < t40


def test_prefill_first_admits_faster_and_decodes_slower_than_decode_first():
    """Same budgets, Poisson arrivals at 8 and 24 requests/s: a prefill-first engine (SGLang) runs each new prompt
    in a step of its own, so its TTFT is lower and its running decodes stall for that step, so its TPOT is higher
    than a decode-first engine's (vLLM), whose prompt chunks share steps with the decodes; the gap grows with the
    load. (Both plan a step after the one before: tests/test_overlap_scheduling.py has the other case.)"""
    given = dict(max_seqs=1024, max_batched_tokens=8192, gpu_memory_utilization=0.9)
    gaps = []
    for rate in (8, 24):
        decode_first = run(settings("reference", **given), n=400, load=Load(rate=rate))
        prefill_first = run(load_engine("sglang").model_copy(update={"graph_sizes": []}).settings(H100, overlap=False,
                                                                                                  **given),
                            n=400, load=Load(rate=rate))
        assert prefill_first.ttft_s.mean < decode_first.ttft_s.mean
        assert prefill_first.tpot_s.mean > decode_first.tpot_s.mean
        gaps.append(prefill_first.tpot_s.mean / decode_first.tpot_s.mean)
    assert gaps[1] > gaps[0]


def test_whole_request_admission_never_preempts():
    """Under a KV pool too small for the load, next-chunk admission (vLLM) preempts; TensorRT-LLM's
    GUARANTEED_NO_EVICT reserves each request's whole length at admission and never does, its pool never over."""
    w = Workload(layout=Workload().layout)
    tight = dict(gpu_memory_utilization=0.25, max_batched_tokens=8192, max_seqs=256)
    vllm = run(settings("reference", **tight), n=300, prompt="2048", output="1024", w=w)
    trt = run(load_engine("trtllm").settings(H100, **tight), n=300, prompt="2048", output="1024", w=w)
    assert vllm.preemptions > 0 and trt.preemptions == 0 and trt.kv_peak_utilization <= 1


def test_sglang_admits_a_prompt_with_room_for_its_output_beside_what_the_running_ones_will_write():
    """SGLang's PrefillAdder (schedule_policy.py add_one_req): a prompt starts while its input + output (at most
    4,096) is below the free tokens less what the step already added (input + output each) and the running
    requests' remaining output × new_token_ratio (0.7, decaying). Every prompt sent at once to an empty pool of F
    tokens: the first step admits k requests of P + O tokens, the most with P + O < F − j · (P + O) for each
    j < k; without the rule, as many prompts as the pool holds now (F // P). Under a tight pool the rule preempts
    less than admission by the pool's present room does."""
    P, O = 1000, 2000
    given = dict(max_seqs=1024, max_batched_tokens=65536, gpu_memory_utilization=0.25)
    sglang = load_engine("sglang").model_copy(update={"graph_sizes": []})
    ruled = run(sglang.settings(H100, **given), n=60, prompt=str(P), output=str(O))
    plain = run(sglang.model_copy(update={"admission": None}).settings(H100, **given), n=60, prompt=str(P),
                output=str(O))
    F = ruled.kv_tokens
    k = 0
    while P + O < F - k * (P + O):
        k += 1
    first = [min(r.ttft_s for r in x.timeline) for x in (ruled, plain)]
    started = [sum(r.ttft_s == t for r in x.timeline) for x, t in zip((ruled, plain), first)]
    assert 3 <= k < F // P < 60 and started == [k, F // P], (F, k, started)
    assert ruled.preemptions < plain.preemptions


def test_an_engine_that_does_not_chunk_refuses_a_prompt_over_its_budget():
    with pytest.raises(UserError, match="max_batched_tokens"):
        run(settings("trtllm"), n=5, prompt="9000")
    assert run(settings("trtllm", max_batched_tokens=9000), n=5, prompt="9000").requests == 5


def test_kv_pool_of_free_memory_is_the_share_of_what_weights_and_activations_leave(cli_json):
    """TensorRT-LLM: 0.9 · (memory − weights − one step's activations), `fit`'s figures at reserve 0; vLLM: 0.92 ·
    memory − the same."""
    base = ("-p", "llama3-8b", "--gpu", "h100-sxm")
    fit = cli_json("fit", *base, "--batch", "1", "--seq", "8192", "--reserve", "0", "--prefill-chunk", "8192")
    held = fit["weights_bytes"] + fit["activation_bytes"]
    block = cli_json("kv", "-p", "llama3-8b", "--batch", "1", "--seq", "32")["total_bytes"]
    trt = cli_json("serve", *base, "--rate", "10", "--requests", "20", "--engine", "trtllm")
    assert trt["kv_blocks"] == int((H100.memory_bytes - held) * 0.9) // block
    assert trt["kv_log"].endswith(f"({trt['kv_tokens']})") and trt["block_size"] == 32


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_fit_with_an_engine_sizes_its_pool_as_serve_does(cli_json, cli, engine):
    """`fit --engine` takes the engine's pool: the tokens and log line `serve` prints, and a KV budget that is
    `fit`'s plain figures at the engine's rule (vLLM: 0.92 of the memory less weights and an 8,192-token chunk's
    activations on an H100; SGLang: its share less the weights alone; TensorRT-LLM: 0.9 of what weights and the
    chunk leave). Without --engine, fit keeps its plain reserve 0.1."""
    base = ("-p", "llama3-8b", "--gpu", "h100-sxm")
    fit = cli_json("fit", *base, "--engine", engine)
    served = cli_json("serve", *base, "--rate", "10", "--requests", "20", "--engine", engine)
    assert (fit["engine"], fit["kv_pool_tokens"], fit["kv_log"]) == (engine, served["kv_tokens"], served["kv_log"])
    assert fit["kv_budget_bytes"] // served["kv_bytes_per_block"] == served["kv_blocks"]
    plain = cli_json("fit", *base, "--reserve", "0", "--prefill-chunk", str(served["max_batched_tokens"]))
    held = plain["weights_bytes"] + plain["activation_bytes"]
    share = served["gpu_memory_utilization"]
    expected = {"vllm": int(H100.memory_bytes * share) - held,
                "sglang": int(H100.memory_bytes * share) - plain["weights_bytes"],
                "trtllm": int((H100.memory_bytes - held) * share)}[engine]
    assert fit["kv_budget_bytes"] == expected
    text = " ".join(cli("fit", *base, "--engine", engine).stdout.split())
    line = f"KV cache: {served['kv_tokens']:,} tokens per engine ({engine}); its log says “{served['kv_log']}”"
    assert line in text
    default = cli_json("fit", *base)
    assert default["engine"] is None and default["reserve"] == 0.1 and default["kv_pool_tokens"] is None


def test_fit_refuses_a_bad_pool_in_its_own_flags(cli):
    base = ("fit", "-p", "llama3-8b", "--gpu", "h100-sxm", "--engine", "sglang")
    for flag, value in (("--prefill-chunk", "0"), ("--reserve", "1"), ("--reserve", "nan")):
        r = cli(*base, flag, value)
        assert r.returncode == 2 and r.stderr.startswith(f"error: {flag}:") and len(r.stderr.splitlines()) == 1, (
            flag, value, r.stderr)


@pytest.mark.parametrize("engine, graphs", [("vllm", "CUDA graphs up to 512"), ("trtllm-triton", "no CUDA graphs"),
                                            ("reference", "no CUDA graphs")])
def test_serve_names_the_engines_cuda_graphs_or_their_absence(cli, engine, graphs):
    """The table's engine line states the largest captured batch, or that the engine captures none (not "up to
    0"): trtllm-triton's TensorRT plan and the reference run without graphs."""
    r = cli("serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "--requests", "5", "--engine", engine)
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert graphs in text and "up to 0" not in text


def test_bad_engines_are_one_line_and_exit_2(cli, tmp_path):
    base = ("serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "--requests", "5")
    r = cli(*base, "--engine", "vlm")
    assert r.returncode == 2 and "did you mean 'vllm'" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    bad = tmp_path / "engine.yaml"
    text = (load_engine("vllm").model_dump_json())
    import json

    import yaml

    data = json.loads(text)
    for field, value, word in (("graph_sizes", [8, 4], "ascending"), ("kv_log", "no count", "{tokens}"),
                               ("tiers", [{"min_gib": 80, "max_num_seqs": 1, "max_num_batched_tokens": 1,
                                           "memory_utilization": 0.9, "graph_max": 0}], "min_gib 0"),
                               ("block_fp8", {"hopper": 1.5}, "block_fp8.hopper"),
                               ("block_fp8", {"hopper": float("nan")}, "finite"),
                               ("block_fp8", {"volta": 0.5}, "'hopper'"),
                               ("fp8", {"hopper": 1.5}, "fp8.hopper"), ("fp8", {"hopper": 1e-320}, "fp8.hopper"),
                               ("dp_attention_budget", "halves", "'divided'"),
                               ("tiers", [{"min_gib": 0, "max_num_seqs": 1, "max_num_batched_tokens": 1,
                                           "graph_max": 0}], "reserve rule"),
                               ("reserve", {"base_mib": -1, "per_step_token_mib": 1, "min_step_tokens": 1,
                                            "per_graph_batch_mib": 1, "per_gpu_mib": 1}, "base_mib"),
                               # a bool or a string among a mapping's numbers was read as 1.0 or 0.3
                               ("block_fp8", {"hopper": True}, "block_fp8.hopper: true is not a number"),
                               ("fp8", {"hopper": "0.3"}, 'fp8.hopper: "0.3" is not a number'),
                               ("fp8", True, "fp8: Input should be a valid dictionary"),
                               ("tiers", [data["tiers"][0] | {"memory_utilization_from_tp": {1: True}}],
                                "tiers.0.memory_utilization_from_tp.1: true is not a number")):
        bad.write_text(yaml.safe_dump(data | {field: value}))
        r = cli(*base, "--engine", str(bad))
        assert r.returncode == 2 and word in r.stderr and len(r.stderr.strip().splitlines()) == 1, (field, r.stderr)
    r = cli(*base, "--engine", "vllm", "--gpu-memory-utilization", "1.5")
    assert r.returncode == 2 and "--gpu-memory-utilization" in r.stderr


# the host's time per request (TimeModel.request_s): beside the GPU, before the scheduler sees the request

HOST = 0.04


def _with_host(tm, seconds=HOST):
    return tm.model_copy(update={"request_s": seconds})


@pytest.mark.parametrize("rate", [2.0, 40.0, float("inf")])
def test_an_open_loop_is_shifted_by_the_host_time_and_nothing_else(rate):
    """Under arrivals that do not wait on the engine (Poisson, all at once) every request reaches the scheduler
    the same request_s later, so the run is the same run shifted in time: each request's TTFT and end-to-end
    time grow by exactly request_s, its TPOT and preemptions are unchanged, at any load."""
    load = Load(rate=rate)
    rows = make_requests(150, parse_lengths("normal:900,300", "prompt"), parse_lengths("normal:150,60", "output"),
                         load, 3)
    spec = load_preset("llama3-8b")
    plain, host = (serve(spec, H100, Workload(), tm, rows, settings("vllm"), load, "900", "150").timeline
                   for tm in (TM, _with_host(TM)))
    for a, b in zip(plain, host):
        assert b.ttft_s - a.ttft_s == pytest.approx(HOST, abs=1e-9)
        assert b.e2e_s - a.e2e_s == pytest.approx(HOST, abs=1e-9)
        assert (a.tpot_s is None and b.tpot_s is None) or b.tpot_s == pytest.approx(a.tpot_s, rel=1e-9)
        assert a.preempted == b.preempted


def test_a_closed_loop_client_waits_the_host_time_for_each_request():
    """One client: each request starts when the last one ends plus request_s on the host, so the run lasts
    n · (e2e + request_s) and the throughput falls in that proportion (the GPU idles meanwhile). Without overlap
    scheduling, whose planned step would run beside the host's time (tests/test_overlap_scheduling.py)."""
    load = Load(concurrency=1)
    rows = make_requests(12, parse_lengths("512", "prompt"), parse_lengths("64", "output"), load, 0)
    spec = load_preset("llama3-8b")
    plain, host = (serve(spec, H100, Workload(), tm, rows, settings("vllm", overlap=False), load, "512", "64")
                   for tm in (TM, _with_host(TM)))
    e2e = plain.e2e_s.mean
    assert host.e2e_s.mean == pytest.approx(e2e + HOST, rel=1e-9)
    assert host.output_tokens_per_s == pytest.approx(plain.output_tokens_per_s * e2e / (e2e + HOST), rel=1e-6)


def test_latency_and_explain_add_the_host_time_to_the_first_token_only():
    from llmcalc.costs.latency import latency
    from llmcalc.views.explain import explain

    spec, w = load_preset("llama3-8b"), Workload(batch=4, seq=1000, gen=100)
    a, b = latency(spec, H100, w, TM), latency(spec, H100, w, _with_host(TM))
    assert b.ttft_s - a.ttft_s == pytest.approx(HOST, abs=1e-12)
    assert b.tpot_s == a.tpot_s and b.total_s - a.total_s == pytest.approx(HOST, abs=1e-12)
    report = explain("latency", spec, w, H100, _with_host(TM))
    assert report.matches and any(s.component == "prefill/request" for s in report.steps)


def test_an_engine_states_its_host_time_per_request():
    """An engine file's request_s replaces the profile's, as its step_s does."""
    e = load_engine("vllm").model_copy(update={"request_s": 0.02})
    assert load_time_model(None, H100, engine=e).request_s == 0.02
    assert load_time_model(None, H100, engine=e.model_copy(update={"request_s": None})).request_s == TM.request_s == 0.0
    assert load_time_model("roofline", H100, engine=e).request_s == 0.0  # the lower bound has no fixed costs


def test_a_calibration_file_keeps_its_own_host_time(tmp_path):
    """A profile file that sets request_s (one's own, fitted to one's runs) keeps it under any engine; one that
    sets none takes the engine's, as the bundled profile does."""
    import yaml

    from llmcalc.inputs.time_models import CALIBRATION_DIR

    vllm = load_engine("vllm")
    assert vllm.request_s is not None and vllm.request_s > 0
    bundled = yaml.safe_load((CALIBRATION_DIR / "h100-sxm.yaml").read_text(encoding="utf-8"))
    plain, own = tmp_path / "plain.yaml", tmp_path / "own.yaml"
    plain.write_text(yaml.safe_dump(bundled), encoding="utf-8")
    own.write_text(yaml.safe_dump(bundled | {"request_s": 0.0123}), encoding="utf-8")
    assert load_time_model(None, H100, plain, engine=vllm).request_s == vllm.request_s
    assert load_time_model(None, H100, own, engine=vllm).request_s == 0.0123
    assert load_time_model(None, H100, engine=vllm).request_s == vllm.request_s


# block-scaled fp8 (Engine.block_fp8, TimeModel.block_fp8_efficiency): the engine's kernels for fp8 weights that carry
# a scale per 128 × 128 block

def _fp8(fmt: str, **kw) -> Workload:
    from llmcalc.model.formats import WeightFormats

    return Workload(weights_format=WeightFormats.parse(fmt), batch=8, seq=2048, gen=64, **kw)


def test_engines_state_their_block_scaled_fp8_kernels_share_on_hopper_only():
    """vLLM's figure is the CUTLASS SM90 blockwise kernel's 489.7 TFLOP/s, SGLang's its Triton kernel's 406.5 (both
    from vLLM's own benchmark on an H100), over the fp8 dense peak; a figure reaches every Hopper GPU's profile
    under its engine, and no other architecture, engine or the roofline."""
    vllm, sglang = load_engine("vllm"), load_engine("sglang")
    assert vllm.block_fp8["hopper"] == pytest.approx(489.7e12 / H100.peak("fp8"), abs=5e-4)
    assert sglang.block_fp8["hopper"] == pytest.approx(406.5e12 / H100.peak("fp8"), abs=5e-4)
    assert "23280" in vllm.sources["block_fp8"] and "2575" in sglang.sources["block_fp8"]
    for gpu in ("h100-sxm", "h200"):
        assert load_time_model(None, load_gpu(gpu), engine=vllm).block_fp8_efficiency == vllm.block_fp8["hopper"]
    assert load_time_model(None, load_gpu("b200"), engine=vllm).block_fp8_efficiency is None
    assert load_time_model(None, H100, engine=load_engine("trtllm")).block_fp8_efficiency is None
    assert load_time_model(None, H100).block_fp8_efficiency is None
    assert load_time_model("roofline", H100, engine=vllm).block_fp8_efficiency is None


def test_trtllm_states_one_fp8_share_for_the_hopper_die_in_place_of_the_gpus_two(tmp_path):
    """The h100-sxm and h200 profiles read 0.403 and 0.802 of the fp8 peak (TensorRT-LLM 0.9's tables and a
    torch._scaled_mm microbenchmark): one die, two figures. Under TensorRT-LLM both take the engine's share on
    Hopper, fitted to its table-subset fp8 runs (benchmarks/serving/fit_fp8.py); no other architecture, no other
    engine, the profile without an engine, and a calibration file of one's own keep theirs."""
    trtllm = load_engine("trtllm")
    share = trtllm.fp8["hopper"]
    assert 0.4 < share < 0.8 and "fit_fp8.py" in trtllm.sources["fp8"]
    for gpu in ("h100-sxm", "h200"):
        assert load_time_model(None, load_gpu(gpu), engine=trtllm).fp8_efficiency == share
    profile = (ROOT / "presets/calibration/h100-sxm.yaml").read_text()
    bundled = yaml.safe_load(profile)["fp8_efficiency"]  # the file's own figure, read as plain YAML
    assert bundled != share and load_time_model(None, H100).fp8_efficiency == bundled
    assert load_time_model(None, H100, engine=load_engine("vllm")).fp8_efficiency == bundled
    assert load_time_model(None, load_gpu("l40s"), engine=trtllm).fp8_efficiency == \
        load_time_model(None, load_gpu("l40s")).fp8_efficiency
    own = tmp_path / "mine.yaml"
    own.write_text(profile.replace(f"fp8_efficiency: {bundled}", "fp8_efficiency: 0.5"))
    assert load_time_model(None, H100, own, engine=trtllm).fp8_efficiency == 0.5
    w = Workload(weights_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8", batch=64, seq=2048, gen=64)
    slow = latency(load_preset("llama3-8b"), H100, w, load_time_model(None, H100))
    fast = latency(load_preset("llama3-8b"), H100, w, load_time_model(None, H100, engine=trtllm))
    assert fast.ttft_s < slow.ttft_s  # a compute-bound prefill at the higher share


def test_block_scaled_fp8_runs_at_the_engines_share_and_other_fp8_formats_do_not():
    """Under vLLM on an H100 a compute-bound prefill of DeepSeek-V2-Lite's fp8-block weights takes more time than
    the same weights with one scale per tensor (the same bytes, within the scales' few KB), by no more than the
    ratio of the two shares; the per-tensor run, and the block run under TensorRT-LLM (no figure stated), are
    timed at the profile's fp8 efficiency alike."""
    from llmcalc.costs.latency import latency

    spec, vllm = load_preset("deepseek-v2-lite"), load_engine("vllm")
    tm = load_time_model(None, H100, engine=vllm)
    block, tensor = (latency(spec, H100, _fp8(f), tm) for f in ("fp8-block", "fp8-tensor"))
    ratio = tm.fp8_efficiency / tm.block_fp8_efficiency
    assert 1.2 < block.ttft_s / tensor.ttft_s < ratio
    assert any("block_fp8_efficiency" in n for n in block.notes)
    assert not any("block_fp8_efficiency" in n for n in tensor.notes)
    trt = load_time_model(None, H100, engine=load_engine("trtllm"))
    plain = latency(spec, H100, _fp8("fp8-tensor"), trt)
    assert latency(spec, H100, _fp8("fp8-block"), trt).ttft_s == pytest.approx(plain.ttft_s, rel=1e-3)


def test_explain_times_a_block_scaled_op_at_its_own_share():
    from llmcalc.views.explain import explain

    spec, tm = load_preset("deepseek-v2-lite"), load_time_model(None, H100, engine=load_engine("vllm"))
    report = explain("latency", spec, _fp8("fp8-block"), H100, tm)
    assert report.matches
    experts = next(s for s in report.steps if s.component == "prefill/ffn/experts")
    assert experts.symbols["e_c"] == tm.block_fp8_efficiency and experts.symbols["P"] == H100.peak("fp8")


def test_a_calibration_file_keeps_its_own_block_scaled_share(tmp_path):
    import yaml

    from llmcalc.inputs.time_models import CALIBRATION_DIR

    bundled = yaml.safe_load((CALIBRATION_DIR / "h100-sxm.yaml").read_text(encoding="utf-8"))
    own = tmp_path / "own.yaml"
    own.write_text(yaml.safe_dump(bundled | {"block_fp8_efficiency": 0.5}), encoding="utf-8")
    assert load_time_model(None, H100, own, engine=load_engine("vllm")).block_fp8_efficiency == 0.5
    own.write_text(yaml.safe_dump(bundled | {"block_fp8_efficiency": 1.5}), encoding="utf-8")
    with pytest.raises(UserError, match="block_fp8_efficiency"):
        load_time_model(None, H100, own)


def test_sglang_divides_its_step_budget_over_data_parallel_attention_replicas():
    """Under data-parallel attention (dp 2 replicas whose experts span them: ep 2, tp 1) SGLang's
    chunked_prefill_size is the deployment's, each replica's scheduler taking budget // dp (its server_args.py):
    one 16,384-token prompt runs in 16,384 / (8,192 / 2) = 4 chunks there and in 2 under vLLM, whose replicas each
    take the whole budget; then one decode step. Neither divides without shared experts (ep 1)."""
    spec, rows = load_preset("qwen3-30b-a3b"), [(0.0, 16384, 2)]
    got = {}
    for name in ("sglang", "vllm"):
        for ep in (1, 2):
            s = settings(name, max_batched_tokens=8192)
            w = Workload(layout=Layout(dp=2, ep=ep), weights_dtype="bf16")
            got[name, ep] = serve(spec, H100, w, TM, rows, s, Load(rate=float("inf")), "16384", "2")
    assert got["sglang", 2].steps == 4 + 1 and got["vllm", 2].steps == 2 + 1
    assert got["sglang", 2].max_batched_tokens == 4096 and got["vllm", 2].max_batched_tokens == 8192
    assert any("divides its 8,192 tokens per step over the 2" in n for n in got["sglang", 2].notes)
    assert got["sglang", 1].steps == got["vllm", 1].steps == 2 + 1
    assert not any("divides" in n for r in (got["sglang", 1], got["vllm", 2]) for n in r.notes)


def test_the_divided_budget_is_the_flag_the_user_gives(cli_json):
    """SGLang divides --chunked-prefill-size as given, so serve divides --max-batched-tokens too."""
    r = cli_json("serve", "-p", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--dp", "2", "--ep", "2", "--tp", "1",
                 "--engine", "sglang", "--max-batched-tokens", "2048", "-n", "8", "--prompt", "512", "--output", "8")
    assert r["max_batched_tokens"] == 1024


@pytest.mark.parametrize(("gpu", "layout", "share", "tokens", "graph_max"), [
    ("h200", dict(tp=8), 0.81, 8192, 160),  # mem_fraction_static 0.81 from tp 8; 8,192 from 25,000 MiB
    ("h100-sxm", dict(tp=1), 0.88, 8192, 160),
    ("h100-sxm", dict(tp=4), 0.85, 8192, 160),
    ("h200", dict(tp=1, dp=8, ep=8), 0.81, 4096, 160),  # attention DP: tp_size 8, each replica half the budget
    ("l4", dict(tp=1), 0.88, 2048, 8),  # under 25,000 MiB: 2,048 tokens, graphs up to 8 (80 from tp 4)
    ("l4", dict(tp=4), 0.85, 2048, 80),
    ("mi300x", dict(tp=16), 0.79, 8192, 160),
])
def test_sglang_0_4_shares_its_memory_by_tensor_parallel_size_and_halves_its_budget_under_attention_dp(
        gpu, layout, share, tokens, graph_max):
    """SGLang 0.4.1–0.4.3 (server_args.py __post_init__): mem_fraction_static by tp_size (0.88, 0.87 from 2, 0.85
    from 4, 0.81 from 8, 0.79 from 16), chunked_prefill_size 8,192 (2,048 under 25,000 MiB), cuda_graph_max_bs 160
    (8, or 80 from tp 4, under 25,000 MiB), and under --enable-dp-attention chunked_prefill_size // 2 for each
    replica's scheduler, where 0.5 divides it over the replicas."""
    L = Layout(**layout)
    s = load_engine("sglang-0.4").settings(load_gpu(gpu), L)
    assert s.gpu_memory_utilization == share and s.graphs[-1] == graph_max
    assert s.per_replica(L).max_batched_tokens == tokens
    if L.attention_dp:  # 0.5 divides its 8,192 over the 8 replicas
        assert load_engine("sglang").settings(load_gpu(gpu), L).per_replica(L).max_batched_tokens == 1024


def test_an_engine_file_with_a_share_by_tp_and_no_share_is_refused(tmp_path, cli):
    """A tier's memory_utilization_from_tp needs the tier's own share, the one below every degree it names."""
    engines = Path(__file__).parents[1] / "presets" / "engines"
    data = yaml.safe_load((engines / "sglang-0.4.yaml").read_text())
    data["tiers"] = [{k: v for k, v in t.items() if k != "memory_utilization"} for t in data["tiers"]]
    data["reserve"] = yaml.safe_load((engines / "sglang.yaml").read_text())["reserve"]
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(data))
    r = cli("serve", "-p", "llama3-8b", "--gpu", "h100-sxm", "--engine", str(path), "-n", "4")
    assert r.returncode == 2 and "memory_utilization_from_tp" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_sglang_0_4_gives_each_attention_replica_half_its_budget_in_serve(cli_json):
    """One 16,384-token prompt under data-parallel attention (dp 2, ep 2): SGLang 0.4's replica schedules 8,192 // 2
    = 4,096 tokens a step, as its own log's chunked_prefill_size says, and the note says it halves the budget."""
    r = cli_json("serve", "-p", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--dp", "2", "--ep", "2", "--tp", "1",
                 "--engine", "sglang-0.4", "-n", "1", "--prompt", "16384", "--output", "2")
    assert r["max_batched_tokens"] == 4096 and r["steps"] == 16384 // 4096 + 1
    assert any("halves its 8,192 tokens per step" in n for n in r["notes"])


@pytest.mark.parametrize("reserve, serve_says, fit_says, plan_says", [
    ({"base_mib": 2**30}, "error: --engine: SGLang's reserve rule keeps back 1,073,745,536 MiB of each GPU even for a "
     "one-token step", "give --reserve in its place", "give a smaller reserve in the engine file"),
    ({"per_step_token_mib": 100, "min_step_tokens": 1}, "error: --max-batched-tokens: SGLang keeps back 820,352 MiB "
     "of each GPU for a step of 8,192 tokens", "error: --prefill-chunk: SGLang keeps back",
     "error: --engine: SGLang keeps back 820,480 MiB")])
def test_a_reserve_rule_that_leaves_nothing_names_what_can_change(cli, tmp_path, reserve, serve_says, fit_says,
                                                                  plan_says):
    """An engine file whose reserve rule keeps back more than the GPU: serve blamed its step budget even where no
    budget could help (a reserve of 2^30 MiB); fit named max_batched_tokens, which it has no option for; plan said
    "no deployment met the targets" (exit 0). Each now names the option that can change it, or the engine file."""
    data = yaml.safe_load((ROOT / "presets/engines/sglang.yaml").read_text())
    data["reserve"] |= reserve
    (tmp_path / "engine.yaml").write_text(yaml.safe_dump(data))
    base = ("-p", "llama3-8b", "--gpu", "h100-sxm", "--engine", str(tmp_path / "engine.yaml"))
    for args, says in ((("serve", *base, "-n", "5"), serve_says), (("fit", *base), fit_says),
                       (("plan", *base, "--max-gpus", "2", "--rate", "5", "--slo-ttft", "2", "-n", "5"), plan_says)):
        r = cli(*args)
        assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
