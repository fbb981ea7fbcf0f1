"""`llmcalc explain` formulas of the sparse attention variants (llmcalc/model/sparse_attention.py).

Each function returns None (or nothing extra) for GQA / MLA, so explain.py and formula.py keep their own
formulas for those and call here only for what a variant changes: its symbols, its extra projections,
its (query, key) pairs, its cache and its extra core components.
"""

from __future__ import annotations

from llmcalc.model.sparse_attention import _BITS, DSA, Linformer, Longformer, Reformer

LEGEND = {
    "W_l": "Longformer sliding window (tokens)", "N_g": "Longformer global tokens (the first positions)",
    "H_I": "DSA indexer heads", "d_I": "DSA indexer head dim (its cached key)", "k_I": "DSA top-k keys per query",
    "bits_I": "bits per element of the DSA indexer key cache",
    "k_L": "Linformer projected length (rows of K' and V')", "n_L": "Linformer max length (columns of E and F)",
    "n_h": "Reformer hash rounds", "n_b": "Reformer buckets per round", "c_R": "Reformer chunk length",
}


def env(a, kv_bits: int | None = None) -> dict[str, int]:
    """The variant's own symbols."""
    if isinstance(a, Longformer):
        return {"W_l": a.window, "N_g": a.global_tokens}
    if isinstance(a, Linformer):
        return {"k_L": a.proj_len, "n_L": a.max_len}
    if isinstance(a, Reformer):
        return {"n_h": a.n_hashes, "n_b": a.n_buckets, "c_R": a.chunk_len}
    if isinstance(a, DSA):
        out = {"H_I": a.index_heads, "d_I": a.index_head_dim, "k_I": a.index_topk}
        if kv_bits is not None:
            out["bits_I"] = _BITS[a.index_cache_dtype] if a.index_cache_dtype else kv_bits
        return out
    return {}


def parts(a) -> dict[str, tuple[str, str | None]]:
    """Extra projections per layer: (parameters, weights one token is multiplied by, or None)."""
    if isinstance(a, Linformer):
        return {"seq_proj_e": ("k_L · n_L", None)} | ({"seq_proj_f": ("k_L · n_L", None)}
                                                     if a.sharing == "headwise" else {})
    if not isinstance(a, DSA):
        return {}
    return {"index_q": ("r_q · H_I · d_I", "r_q · H_I · d_I"), "index_k": ("d · d_I", "d · d_I"),
            "index_k_norm": ("2 · d_I", None), "index_w": ("d · H_I", "d · H_I")}


def dropped(a) -> set[str]:
    """Projections of GQA the variant does not have (Reformer's shared QK: no k)."""
    return {"k"} if isinstance(a, Reformer) else set()


def capped_pairs(cap: str, phase: str, attention: str) -> str:
    """Pairs of one sequence when a query sees at most `cap` keys (a symbol or a sum of them)."""
    x = f"({cap})" if " " in cap else cap
    if phase == "decode":
        return f"min(S + 1, {cap})"
    if attention == "dense":
        return f"S · min(S, {cap})"
    return f"min(S, {x}) · (min(S, {x}) + 1) // 2 + (S − min(S, {x})) · {x}"


def pairs(a, phase: str, attention: str) -> str | None:
    """The variant's (query, key) pairs of one sequence, or None for the default rule."""
    if isinstance(a, Longformer):
        return capped_pairs("W_l + N_g", phase, attention)
    if isinstance(a, Linformer):
        return "k_L" if phase == "decode" else "S · k_L"
    if isinstance(a, Reformer):
        return "n_h · min(S + 1, 2 · c_R)" if phase == "decode" else "n_h · S · min(S, 2 · c_R)"
    if isinstance(a, DSA):
        return capped_pairs("k_I", phase, attention)
    return None


def extra_core(a, phase: str, attention: str) -> dict[str, str]:
    """Core components beyond the scores and values: per layer and sequence, pairs × per-pair cost."""
    if isinstance(a, Linformer):
        rows = "2 · k_L · H_kv · h" if phase == "decode" else "2 · k_L · S · H_kv · h"
        return {"seq_proj_k": rows, "seq_proj_v": rows}
    if isinstance(a, Reformer):  # hashing: h × n_b/2 rotations, 2 FLOPs each, per head and round
        return {"lsh_hash": ("" if phase == "decode" else "S · ") + "n_h · H · h · n_b"}
    if not isinstance(a, DSA):
        return {}
    every = "S + 1" if phase == "decode" else "S · S" if attention == "dense" else "S · (S + 1) // 2"
    return {"index_scores": f"({every}) · 2 · H_I · d_I", "index_weights": f"({every}) · 2 · H_I"}


def train_lead(a, name: str) -> str:
    """Forward + backward passes of a component in a training step."""
    return str(a.train_passes(name))


def kv(a, layers: str, bits: int) -> str | None:
    """Bytes of a layer kind's cache, or None for the default formula."""
    if isinstance(a, Longformer):
        kept = "min(S, W_l + N_g − 1)"
        if bits % 8 == 0:
            return f"2 · {layers} · H_kv · h · B · {kept} · bytes"
        return f"{layers} · ((2 · H_kv · h · B · {kept} · bits + 7) // 8)"
    if isinstance(a, Linformer):
        if bits % 8 == 0:
            return f"2 · {layers} · H_kv · h · B · k_L · bytes"
        return f"{layers} · ((2 · H_kv · h · B · k_L · bits + 7) // 8)"
    if isinstance(a, Reformer):
        return f"{layers} · ((2 · H_kv · h · B · S · bits + 7) // 8 + B · S · H · n_h)"
    if isinstance(a, DSA):
        return f"{layers} · (((r_kv + d_r) · B · S · bits + 7) // 8 + (d_I · B · S · bits_I + 7) // 8)"
    return None


def rotated(a) -> str | None:
    """Elements RoPE rotates per token and layer, or None for the default."""
    if isinstance(a, Reformer):
        return "H · 2 · (h // 2)"
    return "(H + 1 + H_I + 1) · d_r" if isinstance(a, DSA) else None


def saved(a) -> str:
    """Extra elements per token a training layer keeps ('' for none)."""
    return " + H_I · d_I + d_I + H_I" if isinstance(a, DSA) else ""
