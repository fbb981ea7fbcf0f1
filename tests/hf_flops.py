"""Reference FLOPs and KV-cache sizes from Hugging Face transformers (meta device).

Builds the real ``transformers`` causal LM for a ``config.json`` on the meta
device (no weights allocated, nothing downloaded), runs forwards on meta
tensors under ``torch.utils.flop_counter.FlopCounterMode`` and reads the
shapes/dtypes of the returned KV cache.  Ground truth for llmcalc's analytical
FLOPs and KV-cache formulas.

    python tests/hf_flops.py                 # table for a handful of fixtures
    python tests/hf_flops.py llama2-7b gpt2  # only those fixtures (tests/fixtures/hf_architectures.yaml)

API::

    model = build_meta_model(fixture_config("llama2-7b"))  # or a config.json's path
    prefill_flops(model, batch, seq, logits="all" | "last")  # {"total", "by_op", ...}
    decode_flops(model, batch, context)                      # {"total", "by_op", ...}
    kv_cache_bytes(model, batch, seq)                        # int

What FlopCounterMode counts here (torch 2.13 CPU build, transformers 5.x):

* Only matmul-like aten ops: ``mm``/``addmm`` (every ``nn.Linear``, 2*M*N*K;
  a bias add is not counted), ``bmm``/``baddbmm`` and the fused SDPA kernels.
  Element-wise work (norms, activations, softmax, RoPE, residual adds,
  routing top-k, gating multiplies) is *not* counted.
* On the meta device ``F.scaled_dot_product_attention`` takes the math path,
  i.e. it decomposes into two ``aten.bmm`` (QK^T and PV) over the *full*
  Sq x Sk score matrix: causal masking does not halve the count.  GQA keys
  are expanded to all query heads first (``enable_gqa``/``repeat_kv``), so
  attention FLOPs are ``4 * B * n_heads * Sq * Sk * head_dim`` (with separate
  qk / v head dims for MLA: ``2*B*H*Sq*Sk*(d_qk + d_v)``).
* Models whose class does not support SDPA (gemma2: logit softcapping,
  gpt-oss: attention sinks) fall back to ``eager`` attention, whose
  ``torch.matmul`` also lowers to ``aten.bmm`` with the same full-matrix count.
* Routed experts run with ``experts_implementation="batched_mm"``: every
  (token, expert) pair of the top-k routing gathers that expert's weights and
  runs one ``bmm``, so exactly ``tokens * top_k`` expert MLPs are counted (not
  all E experts).  The router/gate linear is an ordinary ``mm``.
  (``grouped_mm``, the default, is counted as zero; ``eager`` needs a
  data-dependent ``nonzero`` and cannot run on meta.)
* MLA (deepseek_v2/v3): the cache holds the compressed latent (keys: the
  ``kv_lora_rank`` latent, values: the shared rope key), and every decode step
  re-applies ``kv_b_proj`` to all ``context + 1`` cached latents (no weight
  absorption), so decode FLOPs grow by ``2 * (context+1) * kv_lora_rank *
  n_heads * (qk_nope + v_head_dim)`` per layer.
* Sliding-window cache layers keep ``window - 1`` positions; in decode those
  layers attend over ``window`` keys (cached + new).

``by_op`` keys are aten op names (``"aten.mm"``, ``"aten.bmm"``, ...).  The
result also carries ``"attention"``: the ``bmm`` FLOPs issued *inside* the
attention modules (i.e. the score/value products, excluding projections), and
``"experts"``: FLOPs issued inside routed-expert modules, both taken from
FlopCounterMode's module hierarchy.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hf_counts import build_config, fixture_config, load_config_dict  # noqa: E402

META = torch.device("meta")


def _make_config(config_path_or_dict):
    if isinstance(config_path_or_dict, dict):
        raw = dict(config_path_or_dict)
    else:
        raw = load_config_dict(config_path_or_dict)
    cfg = build_config(raw)
    if "vision_config" in raw:  # a vision-language model: the language model's FLOPs (its tower: test_vision.py)
        cfg = cfg.text_config
        if cfg.model_type == "qwen2_5_vl_text":  # Qwen2's decoder (M-RoPE is element-wise), with no causal-LM class
            from transformers import Qwen2Config

            skip = ("model_type", "rope_scaling", "rope_parameters", "architectures")
            cfg = Qwen2Config(**{k: v for k, v in cfg.to_dict().items() if k not in skip})
    # Special-token ids are irrelevant for counting and some fixture values
    # trip config validation (e.g. ids >= vocab_size); drop them.
    for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if hasattr(cfg, name):
            setattr(cfg, name, None)
    return cfg


def build_meta_model(config_path_or_dict, dtype: torch.dtype = torch.bfloat16):
    """The ``AutoModelForCausalLM`` for a config, on the meta device, in eval mode.

    Attention is ``sdpa`` where the model class supports it, else ``eager``.
    Routed experts use ``batched_mm`` so FlopCounterMode sees their matmuls.
    ``model.hf_flops_attn`` records the attention implementation used.
    """
    from transformers import AutoModelForCausalLM

    cfg = _make_config(config_path_or_dict)
    model_cls = AutoModelForCausalLM._model_mapping[type(cfg)]
    attn = "sdpa" if getattr(model_cls, "_supports_sdpa", False) else "eager"
    kwargs: dict[str, Any] = {"attn_implementation": attn, "dtype": dtype}
    if model_cls._can_set_experts_implementation():
        kwargs["experts_implementation"] = "batched_mm"
    with META:
        model = AutoModelForCausalLM.from_config(cfg, **kwargs)
    model.eval()
    model.hf_flops_attn = attn
    return model


@contextlib.contextmanager
def _meta_safe():
    """Bypass transformers' data-dependent checks that cannot run on meta.

    ``masking_utils.find_packed_sequence_indices`` inspects position-id values
    (``.all()`` -> ``.item()``) to detect packed sequences; our inputs are a
    single sequence per row, so "not packed" (``None``) is the right answer.
    """
    from transformers import masking_utils

    orig = masking_utils.find_packed_sequence_indices
    masking_utils.find_packed_sequence_indices = lambda position_ids: None
    try:
        yield
    finally:
        masking_utils.find_packed_sequence_indices = orig


def _input_ids(model, batch: int, seq: int) -> torch.Tensor:
    return torch.zeros(batch, seq, dtype=torch.long, device=META)


def _attention_modules(model) -> list[str]:
    """Qualified names of the outermost modules whose class name ends in "Attention"."""
    names: list[str] = []
    for name, module in model.named_modules():
        if type(module).__name__.endswith("Attention") and not any(name.startswith(n + ".") for n in names):
            names.append(name)
    return names


def _expert_modules(model) -> list[str]:
    return [n for n, _m in model.named_modules() if n.rsplit(".", 1)[-1] == "experts"]


def _summarise(counter: FlopCounterMode, model) -> dict[str, Any]:
    counts = counter.get_flop_counts()
    glob = counts.get("Global", {})
    by_op = {str(op).removesuffix(".default"): int(v) for op, v in glob.items()}
    # FlopCounterMode's module keys are "<ClassName>.<qualified name>"; map ours.
    prefix = type(model).__name__
    attention = 0
    for name in _attention_modules(model):
        ops = counts.get(f"{prefix}.{name}", {})
        attention += sum(int(v) for op, v in ops.items() if "bmm" in str(op) or "attention" in str(op))
    experts = 0
    for name in _expert_modules(model):
        experts += sum(int(v) for v in counts.get(f"{prefix}.{name}", {}).values())
    return {"total": int(counter.get_total_flops()), "by_op": by_op, "attention": attention, "experts": experts}


@torch.no_grad()
def prefill_flops(model, batch: int, seq: int, logits: str = "all") -> dict[str, Any]:
    """FLOPs of one forward over ``batch x seq`` fresh tokens (no cache).

    ``logits="all"`` computes the LM head for every position, ``"last"`` only
    for the final one (``logits_to_keep=1``).
    """
    if logits not in ("all", "last"):
        raise ValueError(f"logits must be 'all' or 'last', not {logits!r}")
    kwargs: dict[str, Any] = {"use_cache": False}
    if logits == "last":
        kwargs["logits_to_keep"] = 1
    ids = _input_ids(model, batch, seq)
    counter = FlopCounterMode(display=False)
    with _meta_safe(), counter:
        model(input_ids=ids, **kwargs)
    return _summarise(counter, model)


def _prefill_cache(model, batch: int, seq: int):
    ids = _input_ids(model, batch, seq)
    with _meta_safe():
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
    return out.past_key_values


@torch.no_grad()
def decode_flops(model, batch: int, context: int, check: bool = True) -> dict[str, Any]:
    """FLOPs of one decode step: 1 new token per sequence after ``context`` cached tokens.

    The prefill that fills the cache runs outside the counter.  The new
    token's position is ``context`` (``cache_position=[context]``), so every
    full-attention layer attends over ``context + 1`` keys (sliding-window
    layers over their window).  Logits are computed for that one position.
    With ``check`` the key lengths reaching SDPA / eager attention are
    recorded (``result["key_lengths"]``) and each is asserted to be
    ``context + 1`` or ``min(context + 1, sliding_window)``.
    """
    cache = _prefill_cache(model, batch, context)
    ids = _input_ids(model, batch, 1)
    cache_position = torch.tensor([context], dtype=torch.long, device=META)
    position_ids = cache_position.unsqueeze(0).expand(batch, 1)
    seen: list[tuple[int, int]] = []
    restore = _patch_attention_probe(seen) if check else None
    try:
        counter = FlopCounterMode(display=False)
        with _meta_safe(), counter:
            model(
                input_ids=ids,
                past_key_values=cache,
                use_cache=True,
                cache_position=cache_position,
                position_ids=position_ids,
            )
    finally:
        if restore is not None:
            restore()
    result = _summarise(counter, model)
    if check:
        if not seen:
            raise AssertionError("attention probe saw no attention call")
        full = context + 1
        allowed = {full}
        window = getattr(model.config, "sliding_window", None)
        if isinstance(window, int) and window > 0:
            allowed.add(min(full, window))
        key_lengths = sorted({k for _q, k in seen})
        if not set(key_lengths) <= allowed:
            raise AssertionError(f"decode attention key lengths {key_lengths}, expected within {sorted(allowed)}")
        result["key_lengths"] = key_lengths
        result["query_lengths"] = sorted({q for q, _k in seen})
    return result


def _patch_attention_probe(seen: list):
    """Wrap F.scaled_dot_product_attention and the eager-attention matmul path.

    Records (query_len, key_len) of each attention call; returns an undo fn.
    """
    import torch.nn.functional as F

    orig_sdpa = F.scaled_dot_product_attention

    def sdpa(query, key, value, *args, **kwargs):
        seen.append((int(query.shape[-2]), int(key.shape[-2])))
        return orig_sdpa(query, key, value, *args, **kwargs)

    F.scaled_dot_product_attention = sdpa

    # Eager attention: modeling code looks ``eager_attention_forward`` up as a
    # module global at call time, so wrap it in every loaded modeling module.
    patched = []
    for mod_name, mod in list(sys.modules.items()):
        if not mod_name.startswith("transformers.models.") or mod is None:
            continue
        fn = getattr(mod, "eager_attention_forward", None)
        if fn is None:
            continue

        def make(orig):
            def eager(module, query, key, value, *args, **kwargs):
                seen.append((int(query.shape[-2]), int(key.shape[-2])))
                return orig(module, query, key, value, *args, **kwargs)

            return eager

        setattr(mod, "eager_attention_forward", make(fn))
        patched.append((mod, fn))

    def restore():
        F.scaled_dot_product_attention = orig_sdpa
        for mod, fn in patched:
            setattr(mod, "eager_attention_forward", fn)

    return restore


def cache_tensors(cache):
    """Yield every tensor held by a transformers cache object."""
    # MiniMax's cache (MiniMaxCache): each lightning-attention layer's state [B, H, h, h], beside its DynamicCache.
    yield from (t for t in getattr(cache, "linear_cache", None) or [] if isinstance(t, torch.Tensor))
    layers = getattr(cache, "layers", None)
    if layers is not None:
        for layer in layers:
            for attr in ("keys", "values"):
                t = getattr(layer, attr, None)
                if isinstance(t, torch.Tensor):
                    yield t
            # Any further tensor state (e.g. compressed latents) on the layer.
            for attr, t in vars(layer).items():
                if attr not in ("keys", "values") and isinstance(t, torch.Tensor) and t.dim() >= 3:
                    yield t
            # A linear-attention layer (Mamba-2, Gated DeltaNet): its conv and recurrent states, one per sequence.
            for attr in ("conv_states", "recurrent_states"):
                yield from (t for t in (getattr(layer, attr, None) or {}).values() if isinstance(t, torch.Tensor))
        return
    for attr in ("key_cache", "value_cache"):
        for t in getattr(cache, attr, []) or []:
            if isinstance(t, torch.Tensor):
                yield t


@torch.no_grad()
def kv_cache_bytes(model, batch: int, seq: int) -> int:
    """Bytes held by the KV cache after a prefill of ``batch x seq`` tokens."""
    cache = _prefill_cache(model, batch, seq)
    return sum(t.numel() * t.element_size() for t in cache_tensors(cache))


def kv_cache_layout(model, batch: int, seq: int) -> list[tuple[str, tuple, tuple, str]]:
    """Per-layer (layer class, keys shape, values shape, dtype) after a prefill."""
    with torch.no_grad():
        cache = _prefill_cache(model, batch, seq)
    out = []
    for layer in cache.layers:
        k, v = layer.keys, layer.values
        out.append((type(layer).__name__, tuple(k.shape), tuple(v.shape), str(k.dtype)))
    return out


DEFAULT_FIXTURES = (
    "llama2-7b",
    "mistral-7b",
    "mixtral-8x7b",
    "qwen3-30b-a3b",
    "deepseek-v2-lite",
    "deepseek-v3",
    "gpt2",
    "gemma2-9b",
    "gpt-oss-20b",
)


def main(argv: list[str] | None = None) -> int:
    import warnings

    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    warnings.filterwarnings("ignore")

    args = sys.argv[1:] if argv is None else argv
    names = args or list(DEFAULT_FIXTURES)
    print(
        f"{'name':<17} {'attn':<5} {'prefill128 all':>16} {'prefill128 last':>16} "
        f"{'decode@2048':>14} {'KV bytes@4096':>15} {'sec':>6}"
    )
    breakdown = None
    for name in names:
        t0 = time.perf_counter()
        model = build_meta_model(Path(name) if os.path.sep in name else fixture_config(name))
        path = Path(name)
        pa = prefill_flops(model, 1, 128, "all")
        pl = prefill_flops(model, 1, 128, "last")
        dec = decode_flops(model, 1, 2048)
        kv = kv_cache_bytes(model, 1, 4096)
        dt = time.perf_counter() - t0
        print(
            f"{path.name:<17} {model.hf_flops_attn:<5} {pa['total']:>16,} {pl['total']:>16,} "
            f"{dec['total']:>14,} {kv:>15,} {dt:>6.1f}"
        )
        if breakdown is None:
            breakdown = (path.name, pa, dec)
        del model
    if breakdown is not None:
        name, pa, dec = breakdown
        print(f"\nper-op breakdown for {name}:")
        for label, r in (("prefill B=1 S=128 all", pa), ("decode B=1 ctx=2048", dec)):
            ops = ", ".join(f"{op}={v:,}" for op, v in sorted(r["by_op"].items()))
            print(f"  {label}: {ops}; attention(bmm in attn)={r['attention']:,}; experts={r['experts']:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


def rows(spec, batch: int, seq: int, phase: str, **kw) -> dict[str, int]:
    """llmcalc's FLOPs rows of `phase` (prefill, decode) as FlopCounterMode sees a model run: dense attention,
    logits for every position; `kw` more Workload fields."""
    from llmcalc.costs.flops import flops
    from llmcalc.workload import Workload

    w = Workload(batch=batch, seq=seq, logits="all", attention_core="dense", **kw)
    return {r.component: getattr(r, phase) for r in flops(spec, w).breakdown}


def counted(fn) -> dict[str, int]:
    """FlopCounterMode's FLOPs per aten op of `fn()`, run without gradients on the math attention kernel."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
        fn()
    return {str(op): n for op, n in fc.get_flop_counts()["Global"].items()}
