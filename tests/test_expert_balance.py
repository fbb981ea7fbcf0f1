"""The busiest expert-parallel rank under skewed routing (llmcalc/costs/expert_balance.py): the Gamma CDF against
closed forms, the busiest rank against closed forms and against a seeded draw of the real thing (popularities
split over ranks that share one total), the default skew against the figure it stands for, and the times that
use it (latency, serve, explain, the roofline, training)."""

import math
import random

import pytest

from llmcalc.costs.expert_balance import NORMAL_SHAPE, busiest_rank, gamma_cdf, normal_max
from llmcalc.costs.latency import latency
from llmcalc.inputs.gpus import load_gpu
from llmcalc.inputs.presets import load_preset
from llmcalc.inputs.time_models import load_time_model
from llmcalc.model.time_model import ROOFLINE, TimeModel
from llmcalc.workload import EXPERT_SKEW, Layout, Workload

H200 = load_gpu("h200")


@pytest.mark.parametrize("x", [0.01, 0.3, 1.0, 2.5, 7.0, 30.0])
def test_gamma_cdf_against_closed_forms(x):
    """Shape 1 is the exponential, 1/2 a squared normal (erf), an integer shape the Erlang sum."""
    assert gamma_cdf(1.0, x) == pytest.approx(1 - math.exp(-x), rel=1e-12, abs=1e-15)
    assert gamma_cdf(0.5, x) == pytest.approx(math.erf(math.sqrt(x)), rel=1e-12, abs=1e-15)
    erlang = 1 - math.exp(-x) * sum(x ** j / math.factorial(j) for j in range(4))
    assert gamma_cdf(4.0, x) == pytest.approx(erlang, rel=1e-10, abs=1e-15)


@pytest.mark.parametrize("ep", [2, 3, 4, 8, 16])
def test_busiest_of_exponential_ranks_is_the_harmonic_number(ep):
    """n/s² = 1: each rank's load is exponential, and the mean of the largest of ep is H_ep."""
    experts = 2 * ep
    harmonic = sum(1 / i for i in range(1, ep + 1))
    assert busiest_rank(experts, ep, 2, math.sqrt(2)) == pytest.approx(harmonic, rel=1e-6)


@pytest.mark.parametrize("shape", [0.5, 2.0, 16.0, 64.0])
def test_busiest_of_two_ranks_in_closed_form(shape):
    """The larger of two Gamma(a) draws has mean a + Γ(a + ½) / (√π · Γ(a))."""
    skew = math.sqrt(8 / shape)  # 16 experts over 2 ranks: n = 8
    exact = (shape + math.exp(math.lgamma(shape + 0.5) - math.lgamma(shape)) / math.sqrt(math.pi)) / shape
    assert busiest_rank(16, 2, 8, skew) == pytest.approx(exact, rel=1e-6)


def _drawn(experts: int, ep: int, skew: float, trials: int, seed: int) -> float:
    """Mean over draws of the busiest rank's share × ep: popularities drawn per expert, split over ranks of
    experts/ep consecutive experts, each rank's load its share of the draw's total (no independence assumed)."""
    rng, per, shape, total = random.Random(seed), experts // ep, 1 / skew ** 2, 0.0
    for _ in range(trials):
        p = [rng.gammavariate(shape, 1.0) for _ in range(experts)]
        ranks = [sum(p[r * per:(r + 1) * per]) for r in range(ep)]
        total += max(ranks) * ep / sum(ranks)
    return total / trials


@pytest.mark.parametrize("experts, ep", [(256, 8), (256, 32), (128, 8), (128, 4), (64, 16)])
def test_busiest_rank_against_a_seeded_draw(experts, ep):
    """Within 0.5% (a few standard errors of 3,000 draws) of the shares of one total the ranks really take."""
    assert busiest_rank(experts, ep, 8, EXPERT_SKEW) == pytest.approx(_drawn(experts, ep, EXPERT_SKEW, 3000, ep),
                                                                       rel=5e-3)


def test_default_skew_gives_the_published_busiest_rank():
    """TensorRT-LLM's DeepSeek-R1 statistics at ep 32 (256 experts, 8 a rank): (max − mean) / mean 1.564."""
    assert busiest_rank(256, 32, 8, EXPERT_SKEW) == pytest.approx(2.564, abs=0.01)


def test_normal_max_in_closed_form():
    """The larger of two standard normals has mean 1/√π, the largest of three 3/(2√π); of one, 0."""
    assert normal_max(1) == pytest.approx(0.0, abs=1e-9)
    assert normal_max(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-9)
    assert normal_max(3) == pytest.approx(1.5 / math.sqrt(math.pi), rel=1e-9)


@pytest.mark.parametrize("ep", [2, 8, 64])
def test_nearly_even_ranks_switch_to_the_normal_smoothly(ep):
    """Either side of NORMAL_SHAPE the excess b − 1 scales as 1/√shape: the Gamma integral and the normal agree."""
    n = 256 // ep
    below, above = (busiest_rank(256, ep, 8, math.sqrt(n / shape)) - 1 for shape in (0.99 * NORMAL_SHAPE,
                                                                                      1.01 * NORMAL_SHAPE))
    assert above == pytest.approx(below * math.sqrt(0.99 / 1.01), rel=2e-2)


def test_busiest_rank_edges():
    assert busiest_rank(256, 1, 8, EXPERT_SKEW) == 1.0
    assert busiest_rank(256, 8, 8, 0.0) == 1.0
    by_ep = [busiest_rank(256, ep, 8, EXPERT_SKEW) for ep in (2, 4, 8, 16, 32, 64)]
    assert by_ep == sorted(by_ep) and by_ep[0] > 1
    # one expert a rank, top-2: a rank takes at most one of each token's two copies, so at most ep / 2
    assert busiest_rank(8, 8, 2, 9.0) == 4.0
    # the least skews a user can give end at once, at 1 and not below
    assert [busiest_rank(256, 8, 8, s) for s in (1e-300, 5e-324)] == [1.0, 1.0]
    assert 1.0 < busiest_rank(256, 8, 8, 1e-3) < 1.001


def _latency(skew, tm=None, ep=8, train=False):
    spec = load_preset("deepseek-v3")
    w = Workload(batch=8, seq=2048, gen=4, weights_dtype="fp8", layout=Layout(tp=8, ep=ep), expert_skew=skew)
    return latency(spec, H200, w, tm or load_time_model(None, H200))


def test_latency_times_the_busiest_rank():
    """The skew slows the routed experts' compute and the all-to-all and nothing else; the report says by how
    much, and the roofline keeps the ranks balanced."""
    skewed, uniform = _latency(None), _latency(0.0)
    b = busiest_rank(256, 8, 8, EXPERT_SKEW)
    assert skewed.busiest_rank == pytest.approx(b) and skewed.expert_skew == EXPERT_SKEW
    assert uniform.busiest_rank == 1.0 and uniform.expert_skew == 0.0
    ops = {(o.phase, o.op): o for o in uniform.ops}
    for o in skewed.ops:
        u = ops[(o.phase, o.op)]
        assert (o.flops, o.bytes) == (u.flops, u.bytes)  # the counts are the mean rank's
        if o.op == "comm/ep_all_to_all":
            assert o.comm_s == pytest.approx(b * u.comm_s)
        elif o.op == "ffn/experts":
            assert o.compute_s > u.compute_s and o.memory_s == u.memory_s
        else:
            assert (o.compute_s, o.memory_s, o.comm_s) == (u.compute_s, u.memory_s, u.comm_s)
    assert skewed.ttft_s > uniform.ttft_s
    assert any("busiest rank" in n and "×1.45" in n for n in skewed.notes)
    roof, roof_uniform = _latency(None, ROOFLINE), _latency(0.0, ROOFLINE)
    assert roof.ttft_s == roof_uniform.ttft_s and roof.busiest_rank == 1.0
    assert any("the roofline balances the ranks" in n for n in roof.notes)


def test_without_expert_parallelism_nothing_changes():
    """Under tensor parallelism every rank holds a slice of every expert: the skew moves no time."""
    skewed, uniform = _latency(None, ep=1), _latency(0.0, ep=1)
    assert skewed.ttft_s == uniform.ttft_s and skewed.tpot_s == uniform.tpot_s and skewed.busiest_rank is None


def test_training_keeps_uniform_routing():
    """A training workload's skew defaults to 0; a time model that would skew serving leaves it alone."""
    assert Workload(train=True).routing_skew == 0.0 and Workload().routing_skew == EXPERT_SKEW
    assert TimeModel().balanced_experts is False and ROOFLINE.balanced_experts is True


def test_cli_expert_skew_and_its_bad_values(cli, cli_json):
    args = ("latency", "-p", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--ep", "8", "--weights-dtype", "fp8",
            "--batch", "8", "--seq", "2048", "--gen", "4")
    base = cli_json(*args)
    assert base["busiest_rank"] == pytest.approx(1.448, abs=1e-3) and base["expert_skew"] == EXPERT_SKEW
    assert cli_json(*args, "--expert-skew", "0")["busiest_rank"] == 1.0
    assert cli_json(*args, "--expert-skew", "0")["ttft_s"] < base["ttft_s"]
    for bad in ("nan", "-1", "inf", "11"):
        r = cli(*args, "--expert-skew", bad)
        assert r.returncode == 2 and "--expert-skew" in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


def test_serve_and_explain_time_the_busiest_rank(cli_json):
    """serve's engine steps use it (its note says so); explain's worked sum still equals latency's."""
    args = ("-p", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--ep", "8", "--weights-dtype", "fp8")
    served = cli_json("serve", *args, "-n", "64", "--concurrency", "16", "--prompt", "1000", "--output", "50")
    uniform = cli_json("serve", *args, "-n", "64", "--concurrency", "16", "--prompt", "1000", "--output", "50",
                       "--expert-skew", "0")
    assert served["ttft_s"]["mean"] > uniform["ttft_s"]["mean"]
    assert served["busiest_rank"] == pytest.approx(busiest_rank(256, 8, 8, EXPERT_SKEW)) and uniform["busiest_rank"] == 1
    tensor_parallel = cli_json("serve", *args[:6], "--weights-dtype", "fp8", "-n", "16")
    assert tensor_parallel["busiest_rank"] is None and tensor_parallel["expert_skew"] is None
    assert any("busiest rank" in n for n in served["notes"])
    explained = cli_json("explain", "latency", *args, "--batch", "8", "--seq", "2048")
    assert all(t["matches"] for t in explained["totals"])
    assert any(s["symbols"].get("b") for s in explained["steps"])


def test_moe_lists_the_busiest_rank_per_expert_parallel_degree(cli_json):
    """`llmcalc moe`: each power-of-two ep that divides the experts, at the skew given (0: every rank even)."""
    out = cli_json("moe", "-p", "mixtral-8x7b")
    assert out["expert_skew"] == EXPERT_SKEW
    assert [(r["ep"], r["experts_per_rank"]) for r in out["expert_parallel"]] == [(2, 4), (4, 2), (8, 1)]
    assert [r["busiest_rank"] for r in out["expert_parallel"]] == pytest.approx(
        [busiest_rank(8, ep, 2, EXPERT_SKEW) for ep in (2, 4, 8)])
    even = cli_json("moe", "-p", "deepseek-v3", "--expert-skew", "0")
    assert [r["ep"] for r in even["expert_parallel"]] == [2, 4, 8, 16, 32, 64, 128, 256]
    assert {r["busiest_rank"] for r in even["expert_parallel"]} == {1.0}
