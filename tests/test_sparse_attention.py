"""Sparse attention variants (llmcalc/model/sparse_attention.py) against hand counts from the papers'
definitions, their degenerate cases, the reference model (exact params, KV bytes and FLOPs), and the CLI.

Hand counts here are written from the definitions, not from the code: a Longformer query sees the union
of its window and the global positions (Beltagy et al. 2020, arXiv:2004.05150, causal decoder form); a
DSA query is scored against every earlier key by the lightning indexer and attends to the top-k
(DeepSeek-V3.2-Exp: index_n_heads 64, index_head_dim 128, index_topk 2048).
"""

from __future__ import annotations

import pytest

from llmcalc.costs.flops import flops
from llmcalc.costs.kv import kv_cache
from llmcalc.costs.params import params
from llmcalc.inputs.presets import load_preset, spec_from_data
from llmcalc.workload import Workload

B = 2

# ---- hand counts from the definitions ------------------------------------------------------------


def longformer_keys(i: int, w: int, g: int) -> set[int]:
    """Positions (1-based) query i sees: its window i − w + 1 … i and the global 1 … g, never the future."""
    return {p for p in range(max(1, i - w + 1), i + 1)} | {p for p in range(1, min(g, i) + 1)}


def longformer_spec(w: int = 8, g: int = 3, **extra):
    return spec_from_data(dict(
        name="lf", vocab_size=97, d_model=32, n_layers=2, max_seq_len=64, tie_embeddings=False,
        norm=dict(kind="rmsnorm"), positions=dict(kind="rope"),
        attention=dict(kind="longformer", heads=4, kv_heads=2, head_dim=8, window=w, global_tokens=g),
        ffn=dict(kind="gated", d_ff=48)) | extra, "test")


def linformer_spec(k: int = 6, n: int = 64, sharing: str = "headwise", layers: int = 2):
    return spec_from_data(dict(
        name="lin", vocab_size=97, d_model=32, n_layers=layers, max_seq_len=n, tie_embeddings=False,
        norm=dict(kind="rmsnorm"), positions=dict(kind="rope"),
        attention=dict(kind="linformer", heads=4, kv_heads=2, head_dim=8, proj_len=k, max_len=n, sharing=sharing),
        ffn=dict(kind="gated", d_ff=48)), "test")


def reformer_spec(n_hashes: int = 2, n_buckets: int = 4, chunk: int = 3, **attn):
    return spec_from_data(dict(
        name="ref", vocab_size=97, d_model=32, n_layers=2, max_seq_len=64, tie_embeddings=False,
        norm=dict(kind="rmsnorm"), positions=dict(kind="rope"),
        attention=dict(kind="reformer", heads=4, kv_heads=4, head_dim=8, n_hashes=n_hashes, n_buckets=n_buckets,
                       chunk_len=chunk) | attn,
        ffn=dict(kind="gated", d_ff=48)), "test")


def dsa_spec(topk: int = 5, **attn):
    return spec_from_data(dict(
        name="dsa", vocab_size=97, d_model=32, n_layers=2, max_seq_len=64, tie_embeddings=False,
        norm=dict(kind="rmsnorm"), positions=dict(kind="rope"),
        attention=dict(kind="dsa", heads=4, q_lora_rank=16, kv_lora_rank=12, qk_nope_head_dim=8,
                       qk_rope_head_dim=4, v_head_dim=6, index_heads=3, index_head_dim=8, index_topk=topk) | attn,
        ffn=dict(kind="gated", d_ff=48)), "test")


@pytest.mark.parametrize("seq", [1, 5, 11, 12, 40])
def test_longformer_pairs_kv_and_flops_by_hand(seq):
    spec, w, g = longformer_spec(), 8, 3
    H, H_kv, h, L, d = 4, 2, 8, 2, 32
    pairs = sum(len(longformer_keys(i, w, g)) for i in range(1, seq + 1))
    work = Workload(batch=B, seq=seq, gen=1, kv_dtype="bf16")
    f = flops(spec, work)
    core = {r.component: r for r in f.breakdown}
    assert core["attention/core_scores"].prefill == L * B * pairs * 2 * H * h
    assert core["attention/core_values"].prefill == L * B * pairs * 2 * H * h
    assert core["attention/core_scores"].decode == L * B * len(longformer_keys(seq + 1, w, g)) * 2 * H * h
    # the cache keeps the g globals and the last w − 1: what the next query needs besides itself
    kept = len(longformer_keys(seq + 1, w, g)) - 1
    assert kv_cache(spec, work).total_bytes == L * B * kept * 2 * H_kv * h * 2
    # projections are GQA's: Longformer adds no parameters
    assert params(spec).total == params(spec.model_copy(update={"attention": spec.attention.model_copy(
        update={"global_tokens": 0})})).total
    assert core["attention/q"].prefill == 2 * L * B * seq * d * H * h


def test_longformer_without_globals_is_a_sliding_window():
    lf = longformer_spec(w=6, g=0)
    swa = spec_from_data(lf.model_dump() | dict(
        attention=dict(kind="gqa", heads=4, kv_heads=2, head_dim=8), sliding_window=6,
        layer_pattern=["sliding"]), "test")
    for seq in (3, 6, 7, 30):
        work = Workload(batch=B, seq=seq, gen=5)
        a, b = flops(lf, work), flops(swa, work)
        assert (a.prefill_flops, a.decode_flops, a.generate_flops, a.train_flops) == \
               (b.prefill_flops, b.decode_flops, b.generate_flops, b.train_flops)
        assert kv_cache(lf, work).total_bytes == kv_cache(swa, work).total_bytes


def test_longformer_with_a_window_past_the_sequence_is_full_attention():
    lf, full = longformer_spec(w=100, g=4), spec_from_data(longformer_spec().model_dump() | dict(
        attention=dict(kind="gqa", heads=4, kv_heads=2, head_dim=8)), "test")
    work = Workload(batch=B, seq=50, gen=3)
    assert flops(lf, work).model_dump(exclude={"model", "notes"}) == \
        flops(full, work).model_dump(exclude={"model", "notes"})


def test_longformer_dense_counts_the_band_slots():
    spec = longformer_spec(w=8, g=3)
    core = {r.component: r.prefill for r in flops(spec, Workload(batch=B, seq=40, gen=1, attention_core="dense")).breakdown}
    assert core["attention/core_scores"] == 2 * B * 40 * (8 + 3) * 2 * 4 * 8  # every query: w + g slots


def test_longformer_rejects_sliding_layers():
    with pytest.raises(Exception, match="layer_pattern"):
        longformer_spec(sliding_window=4, layer_pattern=["sliding"])


def test_dsa_preset_params_kv_and_flops_by_hand():
    spec = load_preset("deepseek-v3.2-exp")
    L, d, r_q, H_I, d_I = 61, 7168, 1536, 64, 128
    indexer = r_q * H_I * d_I + d * d_I + 2 * d_I + d * H_I  # wq_b, wk, k_norm (LayerNorm: weight + bias), weights_proj
    assert indexer == 13_959_424
    assert params(spec).total == 671_026_404_352 + L * indexer  # DeepSeek-V3's main model plus 61 indexers
    kv = kv_cache(spec, Workload(batch=1, seq=1000, kv_dtype="bf16"))
    assert kv.bytes_per_token == L * (512 + 64 + 128) * 2
    fp8 = spec.model_copy(update={"attention": spec.attention.model_copy(update={"index_cache_dtype": "fp8"})})
    assert kv_cache(fp8, Workload(batch=3, seq=1000, kv_dtype="bf16")).total_bytes == \
        3 * 1000 * L * ((512 + 64) * 2 + 128)
    S = 5000
    core = {r.component: r for r in flops(spec, Workload(batch=1, seq=S, gen=1)).breakdown}
    selected = sum(min(i, 2048) for i in range(1, S + 1))
    assert core["attention/core_scores"].prefill == L * selected * 2 * 128 * (128 + 64)
    assert core["attention/index_scores"].prefill == L * (S * (S + 1) // 2) * 2 * H_I * d_I
    assert core["attention/index_weights"].prefill == L * (S * (S + 1) // 2) * 2 * H_I
    # decode at context S: absorbed MLA over 2048 latents, the indexer over all S + 1 keys
    assert core["attention/core_scores"].decode == L * 2048 * 2 * 128 * (512 + 64)
    assert core["attention/core_values"].decode == L * 2048 * 2 * 128 * 512
    assert core["attention/index_scores"].decode == L * (S + 1) * 2 * H_I * d_I
    assert core["attention/index_q"].decode == L * 2 * r_q * H_I * d_I


def test_dsa_with_topk_past_the_sequence_is_mla_plus_the_indexer():
    dsa = dsa_spec(topk=1000)
    mla = spec_from_data(dsa.model_dump() | dict(attention=dsa.attention.model_dump(
        exclude={"kind", "index_heads", "index_head_dim", "index_topk", "index_cache_dtype"}) | {"kind": "mla"}),
        "test")
    d, r_q, H_I, d_I, L = 32, 16, 3, 8, 2
    for seq, conv in ((40, {}), (40, dict(attention_core="dense", mla_decode="decompress"))):
        work = Workload(batch=B, seq=seq, gen=1, **conv)
        a, b = flops(dsa, work), flops(mla, work)
        every = seq * seq if work.attention_core == "dense" else seq * (seq + 1) // 2
        per_token = 2 * (r_q * H_I * d_I + d * d_I + d * H_I)
        assert a.prefill_flops - b.prefill_flops == L * B * (seq * per_token + every * 2 * H_I * (d_I + 1))
        assert a.decode_flops - b.decode_flops == L * B * (per_token + (seq + 1) * 2 * H_I * (d_I + 1))
        assert kv_cache(dsa, work).total_bytes - kv_cache(mla, work).total_bytes == L * B * seq * d_I * 2
    assert params(dsa).total - params(mla).total == L * (r_q * H_I * d_I + d * d_I + 2 * d_I + d * H_I)


def test_dsa_training_trains_the_indexer_on_its_own_loss():
    """Projections: forward + weight gradients (their input is detached); scoring: 3 × forward."""
    rows = {r.component: r for r in flops(dsa_spec(), Workload(batch=B, seq=30, gen=1, logits="all")).breakdown}
    assert rows["attention/index_q"].train == 2 * rows["attention/index_q"].prefill
    assert rows["attention/index_scores"].train == 3 * rows["attention/index_scores"].prefill
    assert rows["attention/q_up"].train == 3 * rows["attention/q_up"].prefill


@pytest.mark.parametrize(("field", "value", "fix"), [("q_lora_rank", None, "q_lora_rank"),
                                                      ("index_head_dim", 2, "index_head_dim")])
def test_dsa_bad_fields_name_the_fix(field, value, fix):
    with pytest.raises(Exception, match=fix):
        dsa_spec(**{field: value})


@pytest.mark.parametrize("seq", [3, 40])
def test_linformer_params_flops_and_kv_by_hand(seq):
    """E and F are k × n per layer; K' = E·K costs 2·k·S·(H_kv·h); attention S × k; the cache is k rows."""
    spec, k, n, H, H_kv, h, L, d = linformer_spec(), 6, 64, 4, 2, 8, 2, 32
    gqa = L * (d * H * h + 2 * d * H_kv * h + H * h * d)
    assert sum(r.params for r in params(spec).breakdown if r.component.startswith("attention/")) == gqa + L * 2 * k * n
    shared = linformer_spec(sharing="key_value")
    assert params(spec).total - params(shared).total == L * k * n
    work = Workload(batch=B, seq=seq, gen=1)
    rows = {r.component: r for r in flops(spec, work).breakdown}
    assert rows["attention/seq_proj_k"].prefill == L * B * 2 * k * seq * H_kv * h
    assert rows["attention/core_scores"].prefill == L * B * seq * k * 2 * H * h
    assert rows["attention/core_values"].decode == L * B * k * 2 * H * h  # any context: k rows
    assert rows["attention/seq_proj_v"].decode == L * B * 2 * k * H_kv * h  # the rank-1 update
    assert kv_cache(spec, work).total_bytes == L * B * k * 2 * H_kv * h * 2
    dense = flops(spec, Workload(batch=B, seq=seq, gen=1, attention_core="dense"))
    assert dense.prefill_flops == flops(spec, work).prefill_flops  # nothing masked: one count


def test_linformer_max_len_must_be_max_seq_len():
    with pytest.raises(Exception, match="max_len"):
        spec_from_data(linformer_spec().model_dump() | {"max_seq_len": 128}, "test")


@pytest.mark.parametrize("seq", [4, 40])
def test_reformer_params_flops_and_kv_by_hand(seq):
    """Shared QK (no k matrix); per round each query computes its chunk and the previous one, 2c keys;
    hashing h × n_b/2 rotations per token, head and round; the cache keeps K, V and a byte per bucket id."""
    spec, n, b, c, H, h, L, d = reformer_spec(), 2, 4, 3, 4, 8, 2, 32
    attn = {r.component: r.params for r in params(spec).breakdown if r.component.startswith("attention/")}
    assert attn == {"attention/q": L * d * H * h, "attention/v": L * d * H * h, "attention/o": L * H * h * d}
    work = Workload(batch=B, seq=seq, gen=1)
    rows = {r.component: r for r in flops(spec, work).breakdown}
    assert rows["attention/core_scores"].prefill == L * B * n * seq * min(seq, 2 * c) * 2 * H * h
    assert rows["attention/core_values"].decode == L * B * n * min(seq + 1, 2 * c) * 2 * H * h
    assert rows["attention/lsh_hash"].prefill == L * B * seq * n * H * 2 * h * (b // 2)
    assert rows["attention/lsh_hash"].train == rows["attention/lsh_hash"].prefill  # argmax: no gradient
    assert "attention/k" not in rows
    assert kv_cache(spec, work).total_bytes == L * B * seq * (2 * H * h * 2 + H * n)


def test_reformer_with_one_round_covering_the_sequence_is_dense_mha_with_shared_qk():
    """One round, 2c ≥ S: every query computes every key — dense MHA's core — plus hashing, minus the k matrix."""
    ref = reformer_spec(n_hashes=1, n_buckets=2, chunk=32)
    mha = spec_from_data(ref.model_dump() | dict(attention=dict(kind="gqa", heads=4, kv_heads=4, head_dim=8)), "test")
    L, H, h, d, S = 2, 4, 8, 32, 40
    a = {r.component: r for r in flops(ref, Workload(batch=B, seq=S, gen=1)).breakdown}
    b = {r.component: r for r in flops(mha, Workload(batch=B, seq=S, gen=1, attention_core="dense")).breakdown}
    for name in ("core_scores", "core_values", "q", "v", "o"):
        assert a[f"attention/{name}"].prefill == b[f"attention/{name}"].prefill
    assert a["attention/lsh_hash"].prefill == L * B * S * H * h * 2
    assert params(mha).total - params(ref).total == L * d * H * h


@pytest.mark.parametrize(("attn", "fix"), [(dict(kv_heads=2), "kv_heads"), (dict(n_buckets=5), "n_buckets"),
                                           (dict(n_buckets=512), "n_buckets")])
def test_reformer_bad_fields_name_the_fix(attn, fix):
    with pytest.raises(Exception, match=fix):
        reformer_spec(**attn)


# ---- the reference model ---------------------------------------------------------------------------

torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch")

from test_reference import assert_cache_consistent  # noqa: E402

from llmcalc.reference.measure import measure  # noqa: E402
from llmcalc.reference.model import Decoder  # noqa: E402


def expected(spec, seq, mla_decode="absorbed"):
    work = Workload(batch=B, seq=seq, gen=1, attention_core="dense", logits="last", mla_decode=mla_decode, kv_dtype="bf16")
    f = flops(spec, work)
    return dict(params_total=params(spec).total, prefill_flops=f.prefill_flops, decode_flops=f.decode_flops,
                train_flops=f.train_flops, kv_bytes=kv_cache(spec, work).total_bytes)


SPECS = {"longformer": longformer_spec, "longformer-no-globals": lambda: longformer_spec(g=0),
         "linformer": linformer_spec, "linformer-kv-shared": lambda: linformer_spec(sharing="key_value"),
         "reformer": reformer_spec, "reformer-one-round": lambda: reformer_spec(n_hashes=1, n_buckets=2, chunk=5),
         "dsa": dsa_spec, "dsa-fp8-index-cache": lambda: dsa_spec(index_cache_dtype="fp8")}


@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize("seq", [4, 30])  # inside the window / top-k, and past it (gathered keys)
def test_reference_matches_exactly(name, seq):
    spec = SPECS[name]()
    for mla_decode in (["absorbed", "decompress"] if spec.attention.kind == "dsa" else ["absorbed"]):
        m = measure(spec, B, seq, "cpu", mla_decode)
        want = expected(spec, seq, mla_decode)
        assert {k: getattr(m, k) for k in want} == want


@pytest.mark.parametrize("name", ["longformer-decoder-example", "deepseek-v3.2-exp"])
def test_preset_reference_past_the_pattern(name):
    """Full width, fake tensors, a sequence past the window + globals / the top-k: the gathered path."""
    spec = load_preset(name)
    spec = spec.model_copy(update={"n_layers": 1 if name.startswith("longformer") else 4})
    if name.startswith("deepseek"):  # top-k 64 so that 100 tokens select
        spec = spec.model_copy(update={"attention": spec.attention.model_copy(update={"index_topk": 64})})
    seq = 700 if name.startswith("longformer") else 100
    m = measure(spec, 1, seq, "fake", train=False)
    work = Workload(batch=1, seq=seq, gen=1, attention_core="dense")
    f = flops(spec, work)
    assert (m.prefill_flops, m.decode_flops, m.kv_bytes, m.params_total) == \
           (f.prefill_flops, f.decode_flops, kv_cache(spec, work).total_bytes, params(spec).total)


@pytest.mark.parametrize("chunks", [(20, 1, 1, 1), (4, 3, 10, 1, 1)], ids=["prefill+decode", "chunked"])
def test_longformer_cache_gives_the_full_forward(chunks):
    """Globals kept and the window rolling: cached steps equal one forward over all tokens."""
    assert assert_cache_consistent(longformer_spec(w=5, g=3), chunks, ["absorbed"]).std() > 0.1


def test_longformer_cache_holds_window_plus_globals():
    spec = longformer_spec(w=5, g=3)
    cache = Decoder(spec).new_cache(B, 40)
    assert cache[0][0].shape == (B, 2, 5 + 3 - 1, 8)


def test_linformer_decode_equals_a_prefill_over_all_tokens():
    """One layer: a decode step's rank-1 update of the k rows gives what projecting every token gives."""
    spec = linformer_spec(layers=1)
    torch.manual_seed(0)
    model = Decoder(spec)
    model.reset_parameters(std=0.2)
    tokens = torch.randint(0, spec.vocab_size, (B, 13))
    with torch.no_grad():
        cache = model.new_cache(B, 13)
        model(tokens[:, :10], cache, 0)
        for t in range(10, 13):
            step = model(tokens[:, t:t + 1], cache, t)
            torch.testing.assert_close(step, model(tokens[:, :t + 1]), rtol=1e-4, atol=1e-5)
    assert cache[0][0].shape == (B, 2, 6, 8)


def test_reformer_decode_attends_to_its_round_neighbours():
    """Cached decode steps run (uint8 buckets in the cache), give finite logits, and a cache of one
    chunk pair or less is plain causal attention: the same logits as a full forward."""
    spec = reformer_spec(chunk=8)  # 2c = 16 ≥ every length below: all held keys
    assert assert_cache_consistent(spec, (10, 1, 1, 1), ["absorbed"]).std() > 0.1
    spec = reformer_spec()
    model = Decoder(spec)
    cache = model.new_cache(B, 30)
    assert cache[0][2].dtype == torch.uint8 and cache[0][2].shape == (B, 4, 30, 2)
    with torch.no_grad():
        model(torch.zeros(B, 20, dtype=torch.long), cache, 0)
        assert model(torch.zeros(B, 1, dtype=torch.long), cache, 20).isfinite().all()


@pytest.mark.parametrize("chunks", [(20, 1, 1, 1), (4, 3, 10, 1, 1)], ids=["prefill+decode", "chunked"])
def test_dsa_cache_gives_the_full_forward(chunks):
    """The indexer's cached keys select the same top-k as one forward (both MLA decode paths)."""
    spec = dsa_spec(topk=6, index_heads=8)
    assert assert_cache_consistent(spec, chunks, ["absorbed", "decompress"]).std() > 0.1


# ---- the CLI -----------------------------------------------------------------------------------------

PRESETS = ["longformer-decoder-example", "linformer-decoder-example", "reformer-decoder-example", "deepseek-v3.2-exp"]


@pytest.mark.parametrize("preset", PRESETS)
def test_explain_matches_the_plain_commands(cli_json, preset):
    for topic in ("params", "kv", "flops", "memory"):
        out = cli_json("explain", topic, "--preset", preset, "--batch", "2", "--seq", "9000")
        assert out["matches"], topic
    flops_ = cli_json("flops", "--preset", preset, "--batch", "2", "--seq", "9000")
    assert cli_json("explain", "flops", "--preset", preset, "--batch", "2", "--seq", "9000")["total"] == \
        flops_["prefill_flops"]


def test_compare_longformer_linformer_reformer_and_dsa(cli_json):
    out = cli_json("compare", "longformer", "linformer", "reformer", "dsa", "--preset", "llama2-7b", "--batch", "1",
                   "--seq", "4096", "--window", "1024", "--global-tokens", "16", "--topk", "512", "--proj-len", "128")
    rows = {r["name"]: r for r in out["rows"]}
    L, H, dh, n = 32, 32, 128, 4096
    assert rows["linformer"]["attention_params"] == rows["mha"]["attention_params"] + L * 2 * 128 * n
    assert rows["linformer"]["kv_cache_bytes"] == L * 128 * 2 * H * dh * 2
    # Reformer: no k matrix; 4 rounds of 2·64 keys; the cache adds a byte per head and round
    assert rows["reformer"]["attention_params"] == rows["mha"]["attention_params"] * 3 // 4
    assert rows["reformer"]["kv_cache_bytes"] == 4096 * L * (2 * H * dh * 2 + H * 4)
    assert rows["longformer"]["attention_params"] == rows["mha"]["attention_params"]
    assert rows["longformer"]["kv_cache_bytes"] == L * (1024 + 16 - 1) * 2 * H * dh * 2
    # DSA: MLA by the rule (d_c 4·d_h, d_r d_h/2), r_q 12·d_h, an indexer of H/2 heads of d_h
    assert rows["dsa"]["kv_elements_per_token"] == L * (4 * dh + dh // 2 + dh)
    assert rows["dsa"]["kv_cache_bytes"] == 4096 * L * (4 * dh + dh // 2 + dh) * 2
    assert rows["dsa"]["decode_flops"] < rows["mha"]["decode_flops"]
    for name in ("longformer", "linformer", "reformer", "dsa"):
        assert rows[name]["prefill_flops"] < rows["mha"]["prefill_flops"]


@pytest.mark.parametrize("preset", PRESETS)
def test_compare_and_sweep_json(cli_json, preset):
    kv = cli_json("kv", "--preset", preset, "--batch", "1", "--seq", "8192")["total_bytes"]
    out = cli_json("compare", "--preset", preset, "--preset", "llama2-7b", "--seq", "8192")
    assert out["rows"][0]["kv_cache_bytes"] == kv
    sweep = cli_json("sweep", "--preset", preset, "--seq", "256,8k", "--batch", "1,4", "--gpus", "4", "--tp", "4")
    row = next(r for r in sweep["rows"] if r["batch"] == 1 and r["seq"] == 8192)
    assert row["kv_bytes"] == kv


@pytest.mark.parametrize("preset", PRESETS)
def test_sweep_equals_the_estimators(preset):
    """Each sparse variant's counts (windowed, projected, hashed, selected) go through the same cost form."""
    from test_sweep import estimators

    from llmcalc.inputs.gpus import load_gpu
    from llmcalc.views.sweep import Sweeper
    from llmcalc.workload import Layout

    w = Workload(layout=Layout(tp=8) if preset.startswith("deepseek") else Layout())
    sweeper = Sweeper(load_preset(preset), load_gpu("h200"), w)
    for b, s in [(1, 1), (3, 100), (2, 600), (8, 4096), (1, 70_000)]:
        got = sweeper.point(b, s)._asdict()
        for field, want in estimators(sweeper.spec, w, b, s, load_gpu("h200")).items():
            assert got[field] == (pytest.approx(want, rel=1e-9) if isinstance(want, float) else want), field


def test_dsa_against_transformers_masked_decode(hf_fixture):
    """transformers' deepseek_v32 (like DeepSeek's inference demo) simulates the top-k with a mask: its
    decode re-projects and scores all S + 1 keys. FlopCounterMode on it counts exactly llmcalc's decode
    (dense, decompress: k selected keys) plus the S + 1 − k masked keys' kv_up and attention pairs."""
    pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[test]'")
    from hf_flops import build_meta_model, decode_flops

    spec, S = load_preset("deepseek-v3.2-exp"), 4096
    ours = flops(spec, Workload(batch=1, seq=S, attention_core="dense", mla_decode="decompress")).decode_flops
    measured = decode_flops(build_meta_model(hf_fixture("deepseek-v3.2-exp")), 1, S)["total"]
    H, r, dn, dr, dv, k = 128, 512, 128, 64, 128, 2048
    masked = S + 1 - k
    assert measured - ours == 61 * masked * (2 * r * H * (dn + dv) + 2 * H * (dn + dr) + 2 * H * dv)


def test_compare_dsa_on_deepseek_v3_is_deepseek_v3_2(cli_json):
    """The swap rule's indexer (H/2 heads of d_h, top 2048) on DeepSeek-V3 is DeepSeek-V3.2-Exp's."""
    rows = {r["name"]: r for r in cli_json("compare", "dsa", "--preset", "deepseek-v3", "--seq", "8192")["rows"]}
    assert rows["dsa"]["total_params"] == params(load_preset("deepseek-v3.2-exp")).total
    kv = kv_cache(load_preset("deepseek-v3.2-exp"), Workload(batch=1, seq=8192))
    assert rows["dsa"]["kv_cache_bytes"] == kv.total_bytes
