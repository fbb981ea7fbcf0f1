"""docs/serving.md's comparison with published serving benchmarks is current for the points under a request rate
or a fixed number of clients (benchmarks/serving/evaluate.py reruns them: a few seconds; the offline max-load points
take minutes and are left to the script), and `serve` stays close to the rate-driven measurements."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from conftest import benchmark_script

ROOT = Path(__file__).parents[1]


@functools.cache
def evaluation():
    return benchmark_script("benchmarks/serving/evaluate.py", "serving_evaluate")


@functools.cache
def rows():
    module = evaluation()
    return module, module.evaluate(("rate", "concurrency"))[0]


def test_page_rows_are_current():
    module, got = rows()
    page = (ROOT / "docs" / "serving.md").read_text(encoding="utf-8")
    assert len(got) >= 20
    stale = [module.row_line(r) for r in got if module.row_line(r) not in page]
    assert stale == [], "run python benchmarks/serving/evaluate.py --write docs/serving.md"


def test_rate_driven_throughput_and_latency_hold():
    """Under a request rate on the engine whose own table gives the runs (TensorRT-LLM 0.14 behind Triton, dense
    Llama models), the engine keeps up, so output tokens/s is within 10% of the measured; the mean TPOT and the
    mean TTFT (Triton's host time per request in it) within 25%."""
    _, got = rows()
    bounds = {"output_tps": 0.10, "tpot": 0.25, "ttft": 0.25}
    rate = [r for r in got if r["kind"] == "rate" and r["id"].startswith("trt014")]
    assert len(rate) >= 20 and {r["quantity"] for r in rate} == set(bounds)
    for r in rate:
        assert abs(r["ratio"] - 1) <= bounds[r["quantity"]], r


def test_the_split_is_written_once_and_both_subsets_hold_each_engine():
    """Every evaluated point has its subset in benchmarks/serving/split.yaml (never re-drawn), and each engine
    (the split's groups are by engine name, a release's preset aside) has points in both subsets."""
    import yaml

    module, got = rows()
    split = yaml.safe_load(module.SPLIT.read_text())["points"]
    assert {r["id"] for r in got} <= set(split)
    name = {p["id"]: p["engine_name"] for p in module.points()}
    for engine in {name[r["id"]] for r in got}:
        assert {split[r["id"]] for r in got if name[r["id"]] == engine} == {"table", "heldout"}, engine


def test_length_distributions_agree_with_the_published_totals():
    """A point's length_distribution parses as a `serve` length whose mean is the published totals' mean per
    request within three standard errors of the mean of that many draws, plus a token (SGLang's
    random_range_ratio 0: uniform 1 … max, the totals a sample of it; ShareGPT: uniform 1 … 2·mean − 1, the mean
    by construction)."""
    module = evaluation()
    points = [p for p in module.points() if "length_distribution" in p]
    assert len(points) >= 10
    for p in points:
        prompt, output = module.lengths(p)
        m, n = p["measured"], p["measured"]["completed"]
        for side, total in ((prompt, m["total_input_tokens"]), (output, m["total_output_tokens"])):
            sd = ((side.hi - side.lo + 1) ** 2 - 1) ** 0.5 / 12**0.5  # a discrete uniform's
            assert abs(side.mean - total / n) <= 3 * sd / n**0.5 + 1, (p["id"], str(side), total / n)


def test_attention_dp_points_run_as_one_replica_per_gpu():
    """SGLang's --enable-dp-attention points run as tp 1, dp = their GPUs, the experts over ep of them."""
    module = evaluation()
    points = [p for p in module.points() if p.get("attention_dp")]
    assert points
    for p in points:
        spec, gpu, w, load, settings, n = module.setup(p)
        assert (w.layout.tp, w.layout.dp, w.layout.ep) == (1, p["gpus"], p["ep"]), p["id"]


def test_every_single_node_sglang_point_with_dp_attention_runs_it_as_its_release_did():
    """A launch command with --enable-dp-attention on one node runs data-parallel attention in SGLang 0.4.x, which
    sets dp_size = tp_size; from 0.5 only with --dp-size above 1: at dp_size 1 server_args.py
    _handle_data_parallelism turns it off (sgl-project/sglang pull 4390), so such a point is tensor parallel."""
    import re

    module = evaluation()
    flagged = [p for p in module.points() if p["engine_name"] == "sglang" and "--enable-dp-attention" in
               str(p.get("engine", "")) and "--nnodes" not in str(p.get("engine", ""))]
    assert len(flagged) >= 20

    def ran_it(p: dict) -> bool:
        command, version = str(p["engine"]), str(p.get("engine_version", ""))
        if re.search(r"(?:^|\D)0\.4\.", version) or not re.match(r"v?0\.5", version.strip()):
            return True
        size = re.search(r"--dp(?:-size)?[ =](\d+)", command)
        return size is not None and int(size.group(1)) > 1

    assert [p["id"] for p in flagged if bool(p.get("attention_dp")) != ran_it(p)] == []
    assert sum(not ran_it(p) for p in flagged) == 4  # gpustack's DeepSeek-R1 runs on SGLang 0.5.3, --tp 8 alone


def test_launch_flags_set_the_engines_limits():
    """A scheduler or pool limit the launch command states replaces the engine's default: dstack's TensorRT-LLM
    runs (--max_batch_size 512 --max_num_tokens 16384), the vLLM recipe on MI300X (--max-num-seqs 1024
    --max-num-batched-tokens 32768 --block-size 1), DataCrunch's SGLang runs without CUDA graphs."""
    module = evaluation()
    by_id = {p["id"]: p for p in module.points()}
    trt = module.setup(by_id["dstack-dsr1-h200-trtllm-tp8-3200-800-c4"])[4]
    assert (trt.max_seqs, trt.max_batched_tokens) == (512, 16384)
    vllm = module.setup(by_id["vllm-recipe-dsr1-mi300x-tp8-3200-800-c256"])[4]
    assert (vllm.max_seqs, vllm.max_batched_tokens, vllm.block_size) == (1024, 32768, 1)
    eager = [p for p in by_id.values() if "--disable-cuda-graph" in str(p.get("engine", ""))]
    assert eager and all(module.setup(p)[4].graphs == () for p in eager if not isinstance(module.setup(p), str))
    plain = module.setup(by_id["gpustack-qwen3-8b-h100-vllm-sharegpt-c1"])[4]
    assert plain.graphs and plain.max_batched_tokens == 8192


@pytest.mark.parametrize("engine,ids", [
    ("vllm", ("gpustack-qwen3-8b-h100-vllm-sharegpt-c4", "gpustack-qwen3-8b-h100-vllm-sharegpt-c8")),
    ("sglang-0.4", ("datacrunch-sglang-h200-llama3.3-70b-tp4-rand1024-1024-rps1",
                    "datacrunch-sglang-h200-llama3.3-70b-tp4-rand1024-1024-rps2")),
    ("trtllm-triton", ("trt014-serve-h200-llama3-8b-tp1-467-256-qps2",
                       "trt014-serve-h100-llama3.1-70b-tp4-467-256-qps2"))])
def test_host_time_per_request_is_what_the_engines_table_runs_leave_beside_the_gpu(engine, ids):
    """presets/engines/<engine>.yaml's request_s is read off two table-subset runs of that engine's server at a
    low load (vLLM 0.11 on Qwen3-8B at 4 and 8 clients; SGLang of December 2024 on Llama-3.3-70B at 1 and 2
    requests/s; TensorRT-LLM 0.14 behind Triton on Llama-3.1-8B and -70B at 2 requests/s): each one's measured TTFT
    (its p50, or its mean where that is what the run gives) less `serve`'s with no host time, their mean, to the
    millisecond; and both runs are in the table subset, which calibration may use."""
    from llmcalc.inputs.time_models import load_time_model
    from llmcalc.views.serve import make_requests, serve

    module = evaluation()
    split = module.splits(module.points())
    gaps = []
    for p in (p for p in module.points() if p["id"] in ids):
        assert split[p["id"]] == "table" and module.engine_preset(p) == engine
        spec, gpu, w, load, settings, n = module.setup(p)
        tm = load_time_model(None, gpu, engine=settings.engine).model_copy(update={"request_s": 0.0})
        reqs = make_requests(n, *module.lengths(p), load, 0)
        spread = serve(spec, gpu, w, tm, reqs, settings, load, "", "").ttft_s
        value, stat = module.measured(p)["ttft"]
        gaps.append(value - (spread.p50 if stat == "p50" else spread.mean))
    assert len(gaps) == 2
    assert settings.engine.request_s == pytest.approx(sum(gaps) / 2, abs=1e-3)


def test_deepseek_fp8_points_serve_the_checkpoints_block_scaled_format():
    """A DeepSeek run in fp8 serves deepseek-ai's checkpoint: fp8 codes with a scale per 128 × 128 block, its
    matmuls in fp8 (the weights' own type); other fp8 points keep plain fp8 weights."""
    module = evaluation()
    seen = set()
    for p in module.points():
        got = module.setup(p)
        if isinstance(got, str) or module.dtype(p["weights_dtype"]) != "fp8":
            continue
        spec, gpu, w, *_ = got
        blockwise = w.formats(spec).of("ffn/experts" if spec.ffn.routed_experts else "ffn/up").blockwise
        assert blockwise == (p["model"] in module.BLOCK_FP8), p["id"]
        seen.add(blockwise)
    assert seen == {True, False}


def test_vllm_before_0_8_runs_its_v0_engine_with_whole_prompts():
    """dstack's vLLM 0.7 runs of DeepSeek-R1 run on presets/engines/vllm-v0.yaml (V0, no chunked prefill for MLA):
    the step budget is max_model_len, the model's 163,840 tokens on the H200 and the launch's --max-model-len 32768
    on the MI300X; a later vLLM's runs stay on the V1 engine."""
    module = evaluation()
    by_id = {p["id"]: p for p in module.points()}
    h200 = module.setup(by_id["dstack-dsr1-h200-vllm-tp8-3200-800-c4"])[4]
    mi300x = module.setup(by_id["dstack-dsr1-mi300x-vllm-tp8-3200-800-c4"])[4]
    assert (h200.engine.name, h200.max_batched_tokens, h200.max_seqs) == ("vllm-v0", 163840, 256)
    assert (mi300x.engine.name, mi300x.max_batched_tokens) == ("vllm-v0", 32768)
    assert module.setup(by_id["gpustack-qwen3-8b-h100-vllm-sharegpt-c1"])[4].engine.name == "vllm"


def test_vllm_v0_rounds_of_clients_are_prefilled_together_as_published():
    """Under V0's scheduler identical clients stay in step: a round's prompts run in one step, so TTFT grows with
    the clients. On dstack's held-out vLLM 0.7 runs on 8 × H200 (never fitted), the TTFT p50 is within ×2.5 of the
    published (on the V1 engine's rules it was 3.6–112× optimistic), and at 32 clients and more, where the
    requests stay under V0's CUDA-graph context limit of 8,192 tokens, the TPOT p50 within 15%."""
    _, got = rows()
    held = [r for r in got if r["engine"] == "vllm-v0" and r["gpu"] == "h200" and r["subset"] == "heldout"]
    assert len({r["id"] for r in held}) >= 4
    for r in held:
        if r["quantity"] == "ttft":
            assert max(r["ratio"], 1 / r["ratio"]) <= 2.5, r
    steady = [r for r in held if r["quantity"] == "tpot" and int(r["id"].rsplit("-c", 1)[1]) >= 32
              and sum(map(int, r["lengths"].split("/"))) <= 8192]
    assert len(steady) >= 2
    for r in steady:
        assert abs(r["ratio"] - 1) <= 0.15, r


@pytest.mark.parametrize(("engine", "runs", "steady"), [("vllm-v0", 8, 32), ("sglang-0.4", 6, 16)])
def test_early_2025_engines_on_mi300x_run_at_their_own_fitted_block_scaled_share(engine, runs, steady):
    """The MI300X's own profile is by analogy with the H200's; under vLLM V0 and SGLang 0.4 its block-scaled fp8
    share is fitted to that engine's table-subset points of dstack's MI300X runs (one of vLLM's, three of SGLang's:
    presets/calibration/engines/<engine>/mi300x.yaml). On their held-out runs (never fitted; 4.0–7.1× and 5.8–8.2×
    optimistic on TTFT at the GPU's own profile) the TTFT p50 is within ×2, and the TPOT p50 within 25% from 32 and
    16 clients, where the prompts' steps that stall the decodes make most of it; below, a small decode step's floor
    on ROCm's kernels of the time is not fitted (its TPOT stays optimistic)."""
    _, got = rows()
    held = [r for r in got if r["engine"] == engine and r["gpu"] == "mi300x" and r["subset"] == "heldout"]
    assert len({r["id"] for r in held}) >= runs
    for r in held:
        if r["quantity"] == "ttft":
            assert max(r["ratio"], 1 / r["ratio"]) <= 2, r
        if r["quantity"] == "tpot" and int(r["id"].rsplit("-c", 1)[1]) >= steady:
            assert abs(r["ratio"] - 1) <= 0.25, r


def test_sglang_before_0_5_runs_its_0_4_defaults():
    """SGLang 0.4.1–0.4.3 runs (and DataCrunch's of December 2024) run on presets/engines/sglang-0.4.yaml: 8,192
    tokens a step, halved for each attention replica under --enable-dp-attention, and 0.81 of the memory at tp 8;
    0.5's runs stay on presets/engines/sglang.yaml."""
    module = evaluation()
    by_id = {p["id"]: p for p in module.points()}
    dp = module.setup(by_id["dstack-dsr1-h200-sglang-tp8-3200-800-c4"])
    mi = module.setup(by_id["dstack-dsr1-mi300x-sglang-tp8-3200-800-c4"])[4]
    assert (dp[4].engine.name, dp[4].per_replica(dp[2].layout).max_batched_tokens) == ("sglang-0.4", 4096)
    assert (mi.engine.name, mi.max_batched_tokens, mi.gpu_memory_utilization) == ("sglang-0.4", 8192, 0.81)
    for old in ("sglang041-dsv3-h200-tp8-fp8-1024-1024-rps1",
                "datacrunch-sglang-h200-llama3.3-70b-tp4-rand1024-1024-rps1"):
        assert module.engine_preset(by_id[old]) == "sglang-0.4"
    assert module.engine_preset(by_id["gpustack-dsr1-h200-sglang-rand128-4"]) == "sglang"


def test_tensorrt_llm_tables_of_online_serving_run_behind_triton():
    """TensorRT-LLM 0.14's online-serving table ran its C++ executor behind Triton's tensorrtllm_backend: those
    points run on presets/engines/trtllm-triton.yaml (no overlap scheduler, no CUDA graphs, 64-token blocks, no
    chunked context); runs of trtllm-serve (dstack's) and of trtllm-bench (the throughput tables) stay on
    presets/engines/trtllm.yaml."""
    module = evaluation()
    by_id = {p["id"]: p for p in module.points()}
    triton = [p for p in module.points() if p["id"].startswith("trt014")]
    assert len(triton) >= 10 and {module.engine_preset(p) for p in triton} == {"trtllm-triton"}
    settings = module.setup(by_id["trt014-serve-h100-llama3-8b-tp1-467-256-qps2"])[4]
    assert (settings.graphs, settings.overlap, settings.block_size, settings.engine.chunked_prefill) == \
        ((), False, 64, False)
    for other in ("dstack-dsr1-h200-trtllm-tp8-3200-800-c4", "trt017-h200-llama3-8b-tp1-128-128-maxthpt"):
        assert module.engine_preset(by_id[other]) == "trtllm"
