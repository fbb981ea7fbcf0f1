"""`llmcalc memory --train` against Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models" (arXiv 2205.05198), through the command line as a user runs it.

Table 2 gives the activation bytes of one transformer layer (GPT: LayerNorm, GELU MLP of 4h, multi-head attention,
dropout with 1-byte masks, 16-bit activations, no flash attention), s tokens, micro-batch b, hidden h, a heads,
tensor-parallel size t. Its rows, with the flags that select each:

  no parallelism                              sbh(34 + 5as/h)         --recompute none
  tensor parallel                             sbh(10 + 24/t + 5as/(ht)) --tp t
  tensor + sequence parallel                  sbh(34/t + 5as/(ht))    --tp t --sp
  tensor parallel + selective recompute       sbh(10 + 24/t)          --tp t --recompute selective
  tensor + sequence parallel + selective      sbh·34/t                --tp t --sp --recompute selective
  full recompute                              2sbh                    --recompute full

checked on the paper's Table 3 models (heads, hidden, layers, t, micro-batch), and §4.2.1's savings of selective
recompute (5as/h = 80 for GPT-3, 64 for MT-NLG: "70%" and "65%" of the activations). `activation_bytes_per_layer`
is the largest layer of the reported stage, per micro-batch (all layers are alike here).
"""

from __future__ import annotations

import json

import pytest
import yaml

from llmcalc.inputs.presets import load_preset
from llmcalc.model.spec import ModelSpec
from tests.conftest import run_cli

TABLE_3 = {  # Korthikanti et al., Table 3: attention heads, hidden size, layers, tensor-parallel size, micro-batch
    "22B": (64, 6144, 48, 8, 4), "175B": (96, 12288, 96, 8, 1),
    "530B": (128, 20480, 105, 8, 1), "1T": (160, 25600, 128, 8, 1)}
S = 2048  # sequence length of every Table 3 model

ROWS = {  # Table 2: flags → bytes per layer as a function of (s, b, h, a, t)
    "no parallelism": ((), lambda s, b, h, a, t: s * b * h * 34 + 5 * a * s * s * b),
    "tensor parallel": (("--tp", "T"),
                        lambda s, b, h, a, t: s * b * h * 10 + s * b * h * 24 // t + 5 * a * s * s * b // t),
    "tensor + sequence parallel": (("--tp", "T", "--sp"),
                                   lambda s, b, h, a, t: (s * b * h * 34 + 5 * a * s * s * b) // t),
    "tensor parallel + selective recompute": (("--tp", "T", "--recompute", "selective"),
                                              lambda s, b, h, a, t: s * b * h * 10 + s * b * h * 24 // t),
    "tensor + sequence parallel + selective recompute": (("--tp", "T", "--sp", "--recompute", "selective"),
                                                         lambda s, b, h, a, t: s * b * h * 34 // t),
    "full recompute": (("--recompute", "full"), lambda s, b, h, a, t: 2 * s * b * h),
}


def gpt_layer_spec(h: int, a: int, layers: int) -> ModelSpec:
    """The paper's GPT shape: GPT-3's preset (LayerNorm, GELU MLP, biases) at hidden h, a heads, MHA."""
    data = load_preset("gpt3-175b").model_dump()
    data |= dict(name=f"gpt-{h}", d_model=h, n_layers=layers)
    data["attention"] |= dict(heads=a, kv_heads=a, head_dim=h // a)
    data["ffn"] |= dict(d_ff=4 * h)
    return ModelSpec.model_validate(data)


def per_layer(config, b: int, t: int, flags: tuple[str, ...]) -> int:
    args = [f if f != "T" else str(t) for f in flags]
    r = run_cli("memory", "-c", str(config), "--train", "--batch", str(b), "--micro-batch", str(b), "--seq", str(S),
                "--dropout", "--no-flash", *args, "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["activation_bytes_per_layer"]


@pytest.mark.parametrize("size", ["22B", "530B"])
@pytest.mark.parametrize("row", ROWS)
def test_table_2_rows_from_the_command_line(tmp_path, size, row):
    a, h, layers, t, b = TABLE_3[size]
    config = tmp_path / "gpt.yaml"
    config.write_text(yaml.safe_dump(gpt_layer_spec(h, a, layers).model_dump()))
    flags, bytes_of = ROWS[row]
    assert per_layer(config, b, t, flags) == bytes_of(S, b, h, a, t)


@pytest.mark.parametrize(("size", "saved"), [("175B", 0.70), ("530B", 0.65)])
def test_selective_recompute_saves_what_section_4_2_says(tmp_path, size, saved):
    """§4.2.1: for GPT-3 (5as/h = 80) selective recompute drops 70% of the activations, for MT-NLG (64) 65%."""
    a, h, layers, t, b = TABLE_3[size]
    config = tmp_path / "gpt.yaml"
    config.write_text(yaml.safe_dump(gpt_layer_spec(h, a, layers).model_dump()))
    kept = per_layer(config, b, t, ("--tp", "T", "--sp", "--recompute", "selective"))
    full = per_layer(config, b, t, ("--tp", "T", "--sp"))
    assert round(1 - kept / full, 2) == saved
