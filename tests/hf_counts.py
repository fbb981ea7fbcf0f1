"""Reference parameter counts from Hugging Face transformers (meta device).

Builds the real ``transformers`` model for a ``config.json`` on the meta
device (no weights are allocated, nothing is downloaded) and counts its
parameters.  Used as ground truth for llmcalc's analytical counts.

    python tests/hf_counts.py            # table for every model of tests/fixtures/hf_architectures.yaml
    python tests/hf_counts.py gpt2 t5-small path/to/config.json

``transformers_counts(path)`` returns::

    {"total": int, "active": int, "model_type": str}

* ``total``  -- ``sum(p.numel() for p in model.parameters())``; tied/shared
  weights are counted once, exactly as ``model.parameters()`` yields them.
* ``active`` -- ``total`` minus, for every routed-expert block,
  ``(n_experts - top_k) * params_of_one_expert``.  One expert's size is read
  from the module's own parameters (fused 3-D expert tensors divided by the
  number of experts, or the first entry of an expert ``ModuleList``), not
  from config arithmetic.  Shared experts, routers and dense layers count as
  always active.  For dense models ``active == total``.

Notes on what is built:

* ``quantization_config`` is dropped, so quantized checkpoints (DeepSeek-V3
  fp8, gpt-oss mxfp4) are counted as plain unquantized modules.
* ``auto_map`` is dropped so the in-library implementation is used (no remote
  code).  For DeepSeek-V3 this means the MTP layer
  (``num_nextn_predict_layers``) is not built, as in transformers.
* An encoder (bert, roberta, modernbert) is counted as its bare model (``AutoModel``:
  BertModel, RobertaModel with their pooler, ModernBertModel), the class one sizes an encoder by; an
  encoder-decoder (t5, bart) as its ``AutoModelForSeq2SeqLM`` (T5ForConditionalGeneration,
  BartForConditionalGeneration), whisper as its ``AutoModelForSpeechSeq2Seq`` (WhisperForConditionalGeneration:
  the encoder's sinusoidal position table is a frozen nn.Embedding, counted as transformers counts it).
* A vision-language config (one with a ``vision_config``: llava, gemma3,
  qwen2_5_vl) is counted whole, vision tower and projector included, as
  ``AutoModelForImageTextToText`` builds it (``LlavaForConditionalGeneration``,
  ``Gemma3ForConditionalGeneration``, ``Qwen2_5_VLForConditionalGeneration``).
* Every other model_type is counted as its causal LM.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ARCHITECTURES = Path(__file__).resolve().parent / "fixtures" / "hf_architectures.yaml"
"""The project's record of real models' architectures: each name maps to the Hugging Face config.json it was read
from (``source``) and the fields of it that describe the architecture (``config``). ``write_fixture`` writes one as
a config.json that ``--hf-config`` and transformers read as they read the original."""

SHARED_MODELS = {"command-r7b-12-2024": "command-r7b", "starcoder2-15b": "starcoder2-15b",
                 "olmoe-1b-7b-0924": "olmoe-1b-7b", "glm-4.5-air": "glm-4.5-air", "minimax-m2": "minimax-m2",
                 "dbrx-instruct": "dbrx-instruct", "exaone-4.0-1.2b": "exaone-4.0-1.2b",
                 "seed-oss-36b-instruct": "seed-oss-36b", "kimi-k2-instruct": "kimi-k2"}
"""Real config.json files of ../shared/model-configs-2026/ (their sources: its README.md) and the preset of each
model: tests/test_hf_2026_text.py holds those presets to transformers' count of the file, in place of an entry of
hf_architectures.yaml."""
SHARED_CONFIGS = {"qwen3-vl-4b": "qwen3-vl-4b-instruct.json", "qwen3-vl-30b-a3b": "qwen3-vl-30b-a3b-instruct.json",
                  "lfm2-1.2b": "lfm2-1.2b.json"}
"""Presets read from a real config.json of ../shared/model-configs-2026/ (kept outside the project, reached through
conftest's `shared`) rather than from the architectures file; tests/test_hf_2026_multimodal.py holds them to
transformers."""
LLAMA4_PRESETS = {"llama4-scout", "llama4-maverick"}
LONGCAT_PRESETS = {"longcat-flash-chat"}
"""Presets that tests/test_hf_longcat.py holds to transformers (its module less the zero experts' unread rows)."""
GEMMA3N_PRESETS = {"gemma-3n-e4b"}
"""Presets that tests/test_hf_gemma3n.py holds to transformers (Gemma3nTextConfig's defaults, its E4B)."""
"""Presets that tests/test_hf_llama4.py holds to transformers: Scout's from its config.json in
../shared/model-configs-2026/, Maverick's from the config that test restates."""

# Keys that must not reach the transformers config: they would trigger
# quantizers or remote code, neither of which is wanted for counting.
_DROP_KEYS = ("quantization_config", "auto_map")


AUTO_CLASS = {"bert": "AutoModel", "roberta": "AutoModel", "modernbert": "AutoModel",
              "t5": "AutoModelForSeq2SeqLM", "bart": "AutoModelForSeq2SeqLM", "whisper": "AutoModelForSpeechSeq2Seq"}
"""The transformers auto class a model_type is counted with (default: AutoModelForCausalLM)."""


def load_config_dict(config_path: str | os.PathLike) -> dict[str, Any]:
    """Read a config.json (or the folder holding one) into a dict."""
    path = Path(config_path)
    if path.is_dir():
        path = path / "config.json"
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def build_config(d: dict[str, Any]):
    """Turn a raw config dict into the transformers config of the model: the text LM's, or a
    vision-language model's whole config."""
    from transformers import AutoConfig

    d = {k: v for k, v in d.items() if k not in _DROP_KEYS}
    model_type = d.pop("model_type")
    cfg = AutoConfig.for_model(model_type, **d)
    # A text model nested in a wrapper without a vision tower: count the text model.
    text_cfg = getattr(cfg, "text_config", None)
    if text_cfg is not None and "text_config" in d and "vision_config" not in d:
        cfg = text_cfg
    return cfg


def _top_k(cfg) -> int:
    """The experts each token is routed to, from the config or (a vision-language MoE) its text config."""
    for c in (cfg, getattr(cfg, "text_config", None)):
        for name in ("num_experts_per_tok", "experts_per_token", "moe_topk", "top_k"):
            value = getattr(c, name, None)
            if isinstance(value, int) and value > 0:
                return value
    raise ValueError("MoE model without num_experts_per_tok in its config")


def _expert_blocks(model):
    """Yield (qualified_name, n_experts, params_per_expert) per routed-expert block.

    A routed-expert block is a submodule named ``experts``.  Either it stores
    fused tensors whose leading dimension is the number of experts (the
    transformers >= 5 layout), or it is a ``ModuleList`` of identical experts.
    """
    import torch

    for name, module in model.named_modules():
        if name.rsplit(".", 1)[-1] != "experts":
            continue
        if isinstance(module, torch.nn.ModuleList):
            n_experts = len(module)
            per_expert = sum(p.numel() for p in module[0].parameters())
        else:
            params = list(module.parameters())
            if not params:
                continue
            n_experts = params[0].shape[0]
            if any(p.shape[0] != n_experts for p in params):
                raise ValueError(f"{name}: expert tensors disagree on the expert dimension")
            n_total = sum(p.numel() for p in params)
            if n_total % n_experts:
                raise ValueError(f"{name}: {n_total} params do not split over {n_experts} experts")
            per_expert = n_total // n_experts
        yield name, n_experts, per_expert


def count_model(model, cfg) -> dict[str, int]:
    """Total and active parameter counts of an already built model."""
    total = sum(p.numel() for p in model.parameters())
    blocks = list(_expert_blocks(model))
    inactive = 0
    if blocks:
        top_k = _top_k(cfg)
        for _name, n_experts, per_expert in blocks:
            inactive += (n_experts - top_k) * per_expert
    return {"total": total, "active": total - inactive, "moe_layers": len(blocks)}


def transformers_counts(config_path: str | os.PathLike | dict[str, Any]) -> dict[str, Any]:
    """Parameter counts of the transformers model for ``config_path``.

    ``config_path`` is a config.json file, a folder containing one, or a config dict.
    Returns ``{"total", "active", "model_type"}`` (plus ``moe_layers``).
    """
    import torch
    import transformers

    raw = dict(config_path) if isinstance(config_path, dict) else load_config_dict(config_path)
    cfg = build_config(raw)
    auto = getattr(transformers, "AutoModelForImageTextToText" if "vision_config" in raw
                   else AUTO_CLASS.get(raw["model_type"], "AutoModelForCausalLM"))
    with torch.device("meta"):
        model = auto.from_config(cfg)
    counts = count_model(model, cfg)
    if raw.get("tie_word_embeddings") is False and model.lm_head.weight is model.get_input_embeddings().weight:
        # transformers 5's T5Config forces tie_word_embeddings to True (the false of T5 v1.1 / Flan-T5 configs
        # only turns off its decoder-output scaling), so the model shares its head with the embedding, while
        # those checkpoints store their own lm_head.weight: count it, read off the model, as the checkpoint does.
        counts["total"] += model.lm_head.weight.numel()
        counts["active"] += model.lm_head.weight.numel()
    counts["model_type"] = raw["model_type"]
    return counts


@functools.cache
def _architectures() -> dict[str, dict[str, Any]]:
    return yaml.safe_load(ARCHITECTURES.read_text(encoding="utf-8"))


def fixture_names() -> list[str]:
    """The models of tests/fixtures/hf_architectures.yaml, sorted."""
    return sorted(_architectures())


def fixture_source(name: str) -> str:
    """The URL of the config.json a model's architecture was read from."""
    return _architectures()[name]["source"]


def fixture_config(name: str) -> dict[str, Any]:
    """A model's architecture as a config dict (a fresh copy)."""
    return copy.deepcopy(_architectures()[name]["config"])


def write_fixture(name: str, root: str | os.PathLike) -> Path:
    """Write ROOT/NAME/config.json from the model's architecture; the folder (named after the model, as the
    import names a folder's config.json) is returned."""
    folder = Path(root) / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(fixture_config(name), indent=2) + "\n", encoding="utf-8")
    return folder


def fixture_dirs(root: str | os.PathLike) -> list[Path]:
    """Every model's folder, written under ROOT."""
    return [write_fixture(name, root) for name in fixture_names()]


def main(argv: list[str] | None = None) -> int:
    import time
    import warnings

    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    warnings.filterwarnings("ignore")

    args = sys.argv[1:] if argv is None else argv
    root = tempfile.mkdtemp(prefix="hf_counts_")
    dirs = [Path(a) if os.path.sep in a or a not in _architectures() else write_fixture(a, root)
            for a in args or fixture_names()]
    print(f"{'name':<20} {'model_type':<14} {'total':>17} {'active':>17} {'sec':>6}")
    for d in dirs:
        t0 = time.perf_counter()
        c = transformers_counts(d)
        dt = time.perf_counter() - t0
        name = d.name if d.is_dir() else d.parent.name
        print(f"{name:<20} {c['model_type']:<14} {c['total']:>17,} {c['active']:>17,} {dt:>6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
