"""Offline import of a Hugging Face `config.json` into a ModelSpec (no transformers needed).

A field absent from the file takes the default that transformers' config class for that
model_type uses (transformers 5.x), so the spec describes the model transformers would build.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llmcalc.errors import UserError, clip
from llmcalc.inputs.files import check_finite, check_size, is_folder
from llmcalc.inputs.presets import spec_from_data
from llmcalc.model.base import MAX_SIZE
from llmcalc.model.formats import MAX_GROUP
from llmcalc.model.units import ceil_div

_LLAMA = dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
              num_attention_heads=32, max_position_embeddings=2048, tie_word_embeddings=False,
              attention_bias=False, mlp_bias=False, hidden_act="silu")
_QWEN = dict(_LLAMA, vocab_size=151936, intermediate_size=22016, max_position_embeddings=32768,
             use_sliding_window=False, sliding_window=4096, max_window_layers=28)
_GEMMA = dict(_LLAMA, vocab_size=256000, hidden_size=3072, intermediate_size=24576, num_hidden_layers=28,
              num_attention_heads=16, head_dim=256, max_position_embeddings=8192, tie_word_embeddings=True,
              hidden_act="gelu_pytorch_tanh")
_GEMMA2 = dict(_GEMMA, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
               num_key_value_heads=4, sliding_window=4096)
_BERT = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
             hidden_act="gelu", max_position_embeddings=512, type_vocab_size=2, tie_word_embeddings=True)

DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": _LLAMA,
    "mllama_text_model": dict(_LLAMA, vocab_size=128256, intermediate_size=14336, num_hidden_layers=40,
                              num_key_value_heads=8, max_position_embeddings=131072, hidden_act="silu",
                              cross_attention_layers=[3, 8, 13, 18, 23, 28, 33, 38]),
    "mistral": dict(_LLAMA, intermediate_size=14336, num_key_value_heads=8, max_position_embeddings=131072,
                    sliding_window=4096),
    "mixtral": dict(_LLAMA, intermediate_size=14336, num_key_value_heads=8, max_position_embeddings=131072,
                    sliding_window=None, num_local_experts=8, num_experts_per_tok=2),
    "qwen2": _QWEN,
    "qwen2_moe": dict(_QWEN, hidden_size=2048, intermediate_size=5632, num_hidden_layers=24,
                      num_attention_heads=16, num_experts=60, num_experts_per_tok=4, moe_intermediate_size=1408,
                      shared_expert_intermediate_size=5632, decoder_sparse_step=1, mlp_only_layers=[],
                      qkv_bias=True),
    "qwen3": dict(_QWEN, head_dim=128),
    "qwen3_moe": dict(_QWEN, hidden_size=2048, intermediate_size=6144, num_hidden_layers=24,
                      num_key_value_heads=4, num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768,
                      decoder_sparse_step=1, mlp_only_layers=[]),
    "deepseek_v2": dict(_LLAMA, vocab_size=102400, n_routed_experts=64, num_experts_per_tok=None,
                        moe_intermediate_size=1407, n_shared_experts=2, first_k_dense_replace=0, q_lora_rank=1536,
                        kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128),
    "deepseek_v3": dict(_LLAMA, vocab_size=129280, hidden_size=7168, intermediate_size=18432,
                        num_hidden_layers=61, num_attention_heads=128, max_position_embeddings=4096,
                        n_routed_experts=256, num_experts_per_tok=8, moe_intermediate_size=2048,
                        n_shared_experts=1, first_k_dense_replace=3, q_lora_rank=1536, kv_lora_rank=512,
                        qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, num_nextn_predict_layers=1),
    "deepseek_v32": dict(_LLAMA, vocab_size=129280, hidden_size=7168, intermediate_size=18432,
                         num_hidden_layers=61, num_attention_heads=128, max_position_embeddings=4096,
                         n_routed_experts=256, num_experts_per_tok=8, moe_intermediate_size=2048,
                         n_shared_experts=1, first_k_dense_replace=3, q_lora_rank=1536, kv_lora_rank=512,
                         qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, num_nextn_predict_layers=1,
                         index_n_heads=64, index_head_dim=128, index_topk=2048),
    "gpt2": dict(vocab_size=50257, n_embd=768, n_layer=12, n_head=12, n_positions=1024, n_inner=None,
                 activation_function="gelu_new", tie_word_embeddings=True),
    "gemma": _GEMMA,
    "gemma2": _GEMMA2,
    "gemma3_text": dict(_GEMMA2, vocab_size=262208, max_position_embeddings=131072, sliding_window_pattern=6),
    "phi3": dict(_LLAMA, vocab_size=32064, hidden_size=3072, intermediate_size=8192,
                 max_position_embeddings=4096, sliding_window=None),
    "qwen2_5_vl_text": dict(_QWEN, vocab_size=152064, hidden_size=8192, intermediate_size=29568,
                            num_hidden_layers=80, num_attention_heads=64, num_key_value_heads=8, max_window_layers=80),
    "olmo2": dict(_LLAMA, vocab_size=50304),
    "falcon": dict(vocab_size=65024, hidden_size=4544, num_hidden_layers=32, num_attention_heads=71,
                   max_position_embeddings=2048, tie_word_embeddings=True, new_decoder_architecture=False,
                   multi_query=True, parallel_attn=True, bias=False, alibi=False, num_kv_heads=None,
                   ffn_hidden_size=None, num_ln_in_parallel_attn=None),
    "gpt_oss": dict(_LLAMA, vocab_size=201088, hidden_size=2880, intermediate_size=2880, num_hidden_layers=36,
                    num_attention_heads=64, num_key_value_heads=8, head_dim=64, max_position_embeddings=131072,
                    attention_bias=True, sliding_window=128, num_local_experts=128, num_experts_per_tok=4),
    "bert": _BERT,
    "roberta": dict(_BERT, vocab_size=50265),
    "t5": dict(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_decoder_layers=None,
               num_heads=8, relative_attention_num_buckets=32, relative_attention_max_distance=128,
               feed_forward_proj="relu", n_positions=512, tie_word_embeddings=True),
    "bart": dict(vocab_size=50265, d_model=1024, encoder_layers=12, decoder_layers=12, encoder_attention_heads=16,
                 decoder_attention_heads=16, encoder_ffn_dim=4096, decoder_ffn_dim=4096, activation_function="gelu",
                 max_position_embeddings=1024, tie_word_embeddings=True),
    "whisper": dict(vocab_size=51865, num_mel_bins=80, d_model=384, encoder_layers=4, decoder_layers=4,
                    encoder_attention_heads=6, decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536,
                    max_source_positions=1500, max_target_positions=448, activation_function="gelu",
                    tie_word_embeddings=True),
    "modernbert": dict(vocab_size=50368, hidden_size=768, intermediate_size=1152, num_hidden_layers=22,
                       num_attention_heads=12, hidden_activation="gelu", max_position_embeddings=8192,
                       local_attention=128, global_attn_every_n_layers=3, attention_bias=False, mlp_bias=False,
                       norm_bias=False, layer_types=None),
    "nemotron_h": dict(vocab_size=131072, hidden_size=4096, tie_word_embeddings=False, num_attention_heads=32,
                       num_key_value_heads=8, head_dim=128, max_position_embeddings=4096, intermediate_size=21504,
                       mlp_hidden_act="relu2", mlp_bias=False, ssm_state_size=128, mamba_num_heads=128,
                       mamba_head_dim=64, n_groups=8, conv_kernel=4, chunk_size=128, use_conv_bias=True,
                       use_bias=False, mamba_ssm_cache_dtype="float32", layers_block_type=None,
                       hybrid_override_pattern=None),
    "qwen3_next": dict(_QWEN, hidden_size=2048, intermediate_size=5632, num_hidden_layers=48,
                       num_attention_heads=16, num_key_value_heads=2, head_dim=256, attention_bias=False,
                       linear_conv_kernel_dim=4, linear_key_head_dim=128, linear_value_head_dim=128,
                       linear_num_key_heads=16, linear_num_value_heads=32, decoder_sparse_step=1,
                       moe_intermediate_size=512, shared_expert_intermediate_size=512, num_experts_per_tok=10,
                       num_experts=512, mlp_only_layers=[], layer_types=None, full_attention_interval=4),
    "minimax": dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                    num_attention_heads=32, num_key_value_heads=8, head_dim=None, hidden_act="silu",
                    max_position_embeddings=131072, tie_word_embeddings=False, sliding_window=None,
                    num_experts_per_tok=2, num_local_experts=8, layer_types=None, block_size=256),
    "mamba2": dict(num_heads=128, head_dim=64, vocab_size=32768, hidden_size=4096, state_size=128,
                   num_hidden_layers=64, expand=2, conv_kernel=4, n_groups=8, use_bias=False, use_conv_bias=True,
                   chunk_size=256, tie_word_embeddings=False),
    "mamba": dict(vocab_size=50280, hidden_size=768, state_size=16, num_hidden_layers=32, expand=2, conv_kernel=4,
                  use_bias=False, use_conv_bias=True, time_step_rank="auto", tie_word_embeddings=True),
    "falcon_mamba": dict(vocab_size=50280, hidden_size=768, state_size=16, num_hidden_layers=32, expand=2,
                         conv_kernel=4, use_bias=False, use_conv_bias=True, time_step_rank="auto",
                         tie_word_embeddings=True),
    "jamba": dict(vocab_size=65536, tie_word_embeddings=False, hidden_size=4096, intermediate_size=14336,
                  num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, hidden_act="silu",
                  max_position_embeddings=262144, num_experts_per_tok=2, num_experts=16, expert_layer_period=2,
                  expert_layer_offset=1, attn_layer_period=8, attn_layer_offset=4, mamba_d_state=16,
                  mamba_d_conv=4, mamba_expand=2, mamba_dt_rank="auto", mamba_conv_bias=True, mamba_proj_bias=False),
    "falcon_h1": dict(vocab_size=128000, tie_word_embeddings=False, hidden_size=4096, intermediate_size=14336,
                      num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, hidden_act="silu",
                      max_position_embeddings=8192, mamba_d_ssm=1024, mamba_n_heads=128, mamba_d_head="auto",
                      mamba_n_groups=1, mamba_d_state=256, mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=256,
                      mamba_conv_bias=True, mamba_proj_bias=False, mamba_rms_norm=False, projectors_bias=False,
                      attention_bias=False, mlp_bias=False, head_dim=None),
    "qwen3_vl_text": dict(_QWEN, hidden_size=4096, intermediate_size=22016, num_hidden_layers=32,
                          num_attention_heads=32, num_key_value_heads=32, head_dim=128, max_position_embeddings=128000,
                          attention_bias=False),
    "qwen3_vl_moe_text": dict(_QWEN, hidden_size=2048, intermediate_size=5632, num_hidden_layers=24,
                              num_attention_heads=16, num_key_value_heads=16, head_dim=None,
                              max_position_embeddings=128000, attention_bias=False, tie_word_embeddings=True,
                              num_experts=60, num_experts_per_tok=4, moe_intermediate_size=1408,
                              decoder_sparse_step=1, mlp_only_layers=[]),
    "granitemoehybrid": dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                             num_attention_heads=32, num_key_value_heads=None, hidden_act="silu",
                             max_position_embeddings=2048, tie_word_embeddings=False, attention_bias=False,
                             num_local_experts=8, num_experts_per_tok=2, shared_intermediate_size=1024,
                             position_embedding_type=None, layer_types=None, mamba_n_heads=128, mamba_n_groups=1,
                             mamba_d_state=256, mamba_d_head="auto", mamba_d_conv=4, mamba_expand=2,
                             mamba_chunk_size=256, mamba_conv_bias=True, mamba_proj_bias=False),
    "lfm2": dict(vocab_size=65536, hidden_size=2560, intermediate_size=12288, num_hidden_layers=32,
                 num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=128000,
                 tie_word_embeddings=True, conv_bias=False, conv_L_cache=3, block_multiple_of=256,
                 block_ffn_dim_multiplier=1.0, block_auto_adjust_ff_dim=True, full_attn_idxs=None, layer_types=None),
    "glm4v_text": dict(vocab_size=151552, hidden_size=4096, intermediate_size=13696, num_hidden_layers=40,
                       num_attention_heads=32, num_key_value_heads=2, hidden_act="silu", max_position_embeddings=32768,
                       tie_word_embeddings=False),
}
TEXT_2026_DEFAULTS: dict[str, dict[str, Any]] = {
    "starcoder2": dict(vocab_size=49152, hidden_size=3072, intermediate_size=12288, num_hidden_layers=30,
                       num_attention_heads=24, num_key_value_heads=2, hidden_act="gelu_pytorch_tanh",
                       max_position_embeddings=4096, sliding_window=None, use_bias=True, tie_word_embeddings=True),
    "cohere2": dict(vocab_size=256000, hidden_size=8192, intermediate_size=22528, num_hidden_layers=40,
                    num_attention_heads=64, num_key_value_heads=None, hidden_act="silu", max_position_embeddings=8192,
                    tie_word_embeddings=True, attention_bias=False, sliding_window=4096, sliding_window_pattern=4,
                    layer_types=None),
    "olmoe": dict(vocab_size=50304, hidden_size=2048, intermediate_size=2048, num_hidden_layers=16,
                  num_attention_heads=16, num_key_value_heads=None, hidden_act="silu", max_position_embeddings=4096,
                  tie_word_embeddings=False, attention_bias=False, num_experts_per_tok=8, num_experts=64),
    "glm4_moe": dict(vocab_size=151552, hidden_size=4096, intermediate_size=10944, num_hidden_layers=46,
                     num_attention_heads=96, num_key_value_heads=8, head_dim=None, hidden_act="silu",
                     max_position_embeddings=131072, tie_word_embeddings=False, attention_bias=False,
                     moe_intermediate_size=1408, num_experts_per_tok=8, n_shared_experts=1, n_routed_experts=128,
                     first_k_dense_replace=1, use_qk_norm=False),
    "minimax_m2": dict(vocab_size=200064, hidden_size=3072, intermediate_size=1536, num_hidden_layers=62,
                       num_attention_heads=48, num_key_value_heads=8, head_dim=128, hidden_act="silu",
                       max_position_embeddings=196608, tie_word_embeddings=False, num_experts_per_tok=8,
                       num_local_experts=256),
    "dbrx": dict(vocab_size=32000, d_model=2048, n_heads=16, n_layers=24, max_seq_len=2048, tie_word_embeddings=False,
                 attn_config=None, ffn_config=None),
    "exaone4": dict(vocab_size=102400, hidden_size=4096, intermediate_size=16384, num_hidden_layers=32,
                    num_attention_heads=32, num_key_value_heads=32, head_dim=None, hidden_act="silu",
                    max_position_embeddings=2048, tie_word_embeddings=False, sliding_window=4096, layer_types=None),
    "seed_oss": dict(vocab_size=155136, hidden_size=4096, intermediate_size=27648, num_hidden_layers=64,
                     num_attention_heads=80, num_key_value_heads=8, hidden_act="silu", max_position_embeddings=524288,
                     tie_word_embeddings=False, attention_bias=True, attention_out_bias=False, mlp_bias=False,
                     head_dim=128),
    "smollm3": dict(vocab_size=128256, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
                    num_attention_heads=16, num_key_value_heads=4, hidden_act="silu", max_position_embeddings=32768,
                    use_sliding_window=False, sliding_window=None, no_rope_layers=None, no_rope_layer_interval=4,
                    layer_types=None, attention_bias=False, mlp_bias=False, tie_word_embeddings=True),
    "olmo3": dict(vocab_size=50304, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=None, hidden_act="silu", max_position_embeddings=2048,
                  tie_word_embeddings=False, attention_bias=False, sliding_window=4096, layer_types=None),
    "ernie4_5_moe": dict(vocab_size=103424, hidden_size=2560, intermediate_size=12288, num_hidden_layers=28,
                         num_attention_heads=20, num_key_value_heads=4, head_dim=None, hidden_act="silu",
                         max_position_embeddings=131072, tie_word_embeddings=True, use_bias=False,
                         moe_intermediate_size=1536, moe_k=6, moe_num_experts=64, moe_num_shared_experts=2,
                         moe_layer_start_index=1, moe_layer_end_index=-1, moe_layer_interval=1),
    "hunyuan_v1_moe": dict(vocab_size=290943, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                           num_attention_heads=32, num_key_value_heads=None, hidden_act="silu",
                           max_position_embeddings=2048, tie_word_embeddings=False, attention_bias=False,
                           num_experts=1, moe_topk=1, head_dim=None),
    "apertus": dict(vocab_size=131072, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                    num_attention_heads=32, num_key_value_heads=None, head_dim=None, hidden_act="xielu",
                    max_position_embeddings=65536, tie_word_embeddings=False, attention_bias=False),
    "kimi_k2": DEFAULTS["deepseek_v3"],
}
"""Text decoders and MoEs of 2025–26: the defaults of each model_type's config class in transformers 5.24
(configuration_<type>.py), built by _text_2026. Kimi-K2's `kimi_k2` is not registered in transformers: its
deployment guides build it as DeepSeek-V3 (its config.json names DeepseekV3ForCausalLM), and so does the import."""
DEFAULTS.update(TEXT_2026_DEFAULTS)
DEFAULTS["gemma3n_text"] = dict(
    vocab_size=262400, hidden_size=2048, intermediate_size=16384, num_hidden_layers=35, num_attention_heads=8,
    num_key_value_heads=2, head_dim=256, hidden_activation="gelu_pytorch_tanh", max_position_embeddings=32768,
    tie_word_embeddings=True, attention_bias=False, sliding_window=512, layer_types=None, final_logit_softcapping=30.0,
    vocab_size_per_layer_input=262144, hidden_size_per_layer_input=256, altup_active_idx=0, altup_num_inputs=4,
    num_kv_shared_layers=15, laurel_rank=64, activation_sparsity_pattern=None)
"""Gemma 3n's language model: the defaults of transformers 5.24's Gemma3nTextConfig (models/gemma3n/
configuration_gemma3n.py, its E4B), built by _gemma3n_text."""
DEFAULTS["llama4_text"] = dict(
    vocab_size=202048, hidden_size=5120, intermediate_size=8192, intermediate_size_mlp=16384, num_hidden_layers=48,
    num_attention_heads=40, num_key_value_heads=8, head_dim=128, hidden_act="silu", max_position_embeddings=131072,
    tie_word_embeddings=False, num_experts_per_tok=1, num_local_experts=16, moe_layers=None,
    interleave_moe_layer_step=1, use_qk_norm=True, no_rope_layers=None, no_rope_layer_interval=4,
    attention_chunk_size=8192, layer_types=None, attention_bias=False)
"""Llama 4's language model: the defaults of Llama4TextConfig in transformers 5.24 (configuration_llama4.py, the
values of Llama 4 Scout); a `llama4` config's text_config is read as this type, its vision_config by
_llama4_vision."""
NO_POSITION_LIMIT = 2**20
"""max_seq_len of a model whose config names none because nothing in it is sized by the length (Mamba-2):
a bound for the length checks, not a limit of the model."""
_SAME_AS = {"qwen2_5_vl_text": "qwen2", "qwen3_vl_text": "qwen3", "qwen3_vl_moe_text": "qwen3_moe",
            "kimi_k2": "deepseek_v3"}
"""Language models built exactly as another model_type: Qwen2.5-VL's is Qwen2's decoder; Qwen3-VL's are Qwen3's and
Qwen3-MoE's (interleaved M-RoPE and DeepStack's additions to the first layers' hidden states are element-wise);
Kimi-K2, which transformers does not register, is DeepSeek-V3 as its deployment guides build it."""
_QWEN3_VISION = dict(depth=27, hidden_size=1152, hidden_act="gelu_pytorch_tanh", intermediate_size=4304, num_heads=16,
                     in_channels=3, patch_size=16, spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=3584,
                     num_position_embeddings=2304, deepstack_visual_indexes=[8, 16, 24])
"""Qwen3VLVisionConfig's (and Qwen3VLMoeVisionConfig's) defaults, transformers 5.24."""
VISION_DEFAULTS: dict[str, dict[str, Any]] = {
    "llava": dict(text_model_type="llama", projector_hidden_act="gelu", vision_feature_select_strategy="default",
                  multimodal_projector_bias=True,
                  vision=dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
                              image_size=224, patch_size=32, num_channels=3, hidden_act="quick_gelu")),
    "gemma3": dict(text_model_type="gemma3_text", mm_tokens_per_image=256,
                   vision=dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
                               image_size=224, patch_size=16, num_channels=3, hidden_act="gelu_pytorch_tanh",
                               vision_use_head=True)),
    "qwen2_5_vl": dict(text_model_type="qwen2_5_vl_text",
                       vision=dict(depth=32, hidden_size=3584, intermediate_size=3420, num_heads=16, in_channels=3,
                                   patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=112,
                                   out_hidden_size=3584, fullatt_block_indexes=[7, 15, 23, 31], hidden_act="silu")),
    "mllama": dict(text_model_type="mllama_text_model",
                   vision=dict(hidden_size=1280, hidden_act="gelu", num_hidden_layers=32, num_global_layers=8,
                               attention_heads=16, num_channels=3, intermediate_size=5120, image_size=448,
                               patch_size=14, max_num_tiles=4, intermediate_layers_indices=[3, 7, 15, 23, 30],
                               supported_aspect_ratios=[[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2], [3, 1],
                                                        [4, 1]])),
    "qwen3_vl": dict(text_model_type="qwen3_vl_text", outer_tie=False, vision=dict(_QWEN3_VISION)),
    "qwen3_vl_moe": dict(text_model_type="qwen3_vl_moe_text", outer_tie=False, vision=dict(_QWEN3_VISION)),
    "llama4": dict(text_model_type="llama4_text", image_processor=dict(max_patches=16),
                   vision=dict(hidden_size=768, num_hidden_layers=34, num_attention_heads=16, num_channels=3,
                               intermediate_size=5632, vision_output_dim=7680, image_size=448, patch_size=14,
                               pixel_shuffle_ratio=0.5, projector_input_dim=4096, projector_output_dim=4096)),
    "internvl": dict(text_model_type="qwen2", outer_tie=True, downsample_ratio=0.5, projector_hidden_act="gelu",
                     vision_feature_select_strategy="default",
                     vision=dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, attention_bias=False,
                                 use_qk_norm=False, intermediate_size=4096, hidden_act="gelu", norm_type="layer_norm",
                                 image_size=448, patch_size=14, num_channels=3, use_mask_token=False,
                                 use_absolute_position_embeddings=True, use_mean_pooling=True)),
    "glm4v": dict(text_model_type="glm4v_text", outer_tie=False,
                  vision=dict(depth=24, hidden_size=1536, hidden_act="silu", attention_bias=False, num_heads=12,
                              in_channels=3, image_size=336, patch_size=14, spatial_merge_size=2,
                              temporal_patch_size=2, out_hidden_size=4096, intermediate_size=13696)),
}
"""Vision-language model_types: the outer config's defaults and its vision_config's (transformers 5.x: LlavaConfig
with CLIPVisionConfig, Gemma3Config with SiglipVisionConfig, Qwen2_5_VLConfig with Qwen2_5_VLVisionConfig, MllamaConfig
with MllamaVisionConfig, whose defaults are not the 11B checkpoint's: image_size 448, not 560; Qwen3VLConfig and
Qwen3VLMoeConfig with their vision configs, Llama4Config with Llama4VisionConfig, InternVLConfig with
InternVLVisionConfig and a Qwen2 text model). `outer_tie`: the outer config's tie_word_embeddings alone decides whether
the head is tied (its default here; text_config's flag is not read: transformers 5.24's Qwen3-VL)."""
QWEN_PIXELS = (3136, 12845056)
"""Qwen2.5-VL's image processor bounds (min_pixels, max_pixels) from the checkpoint's preprocessor_config.json
(https://huggingface.co/Qwen/Qwen2.5-VL-7B-Instruct/blob/main/preprocessor_config.json); config.json has none."""
QWEN_IMAGE_SIZE = 448
"""The default image side for a dynamic-resolution tower, which has no native size: 448 px = 16 × 28, 256 tokens."""
QWEN3_PIXELS = (65536, 16777216)
"""Qwen3-VL's image processor bounds (shortest_edge, longest_edge of `size`: 256² and 4096² pixels) from the
checkpoints' preprocessor_config.json (https://huggingface.co/Qwen/Qwen3-VL-4B-Instruct/blob/main/
preprocessor_config.json, the same in the 30B-A3B's); config.json has none."""
QWEN3_IMAGE_SIZE = 512
"""Qwen3-VL's default image side (factor p·m = 32): 512 px = 16 × 32, 256 tokens, as QWEN_IMAGE_SIZE for Qwen2.5-VL."""
LONGCAT_FLASH_DEFAULTS = dict(
    vocab_size=131072, hidden_size=6144, num_layers=28, num_attention_heads=64, hidden_act="silu",
    max_position_embeddings=131072, tie_word_embeddings=False, attention_bias=False, ffn_hidden_size=12288,
    q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, qk_head_dim=None,
    moe_topk=12, n_routed_experts=512, zero_expert_num=256, expert_ffn_hidden_size=2048, router_bias=False)
"""transformers 5.24's LongcatFlashConfig defaults (configuration_longcat_flash.py), those of LongCat-Flash-Chat."""
DEFAULTS["longcat_flash"] = LONGCAT_FLASH_DEFAULTS
REFUSED = {
    "gemma3n": "Gemma 3n's multimodal model adds a MobileNet-V5 vision tower (built through timm) and a USM conformer "
               "audio tower, which are not modelled; to cost its language model, save config.json's text_config "
               "(model_type gemma3n_text) as a config.json of its own and pass that as `hf_config`",
}
"""model_types the import knows and refuses, each with what llmcalc cannot express that would change a count."""
SUPPORTED = sorted(set(DEFAULTS) | set(VISION_DEFAULTS))
_HF_NAMES = {"n_layers": "num_hidden_layers", "d_model": "hidden_size", "vocab_size": "vocab_size",
             "max_seq_len": "max_position_embeddings", "attention.heads": "num_attention_heads",
             "attention.kv_heads": "num_key_value_heads", "attention.head_dim": "head_dim",
             "ffn.top_k": "num_experts_per_tok", "ffn.experts": "num_experts", "ffn.d_ff": "intermediate_size",
             "sliding_window": "sliding_window"}
_UNBOUNDED = ("time_step_limit",)
"""Fields a real config.json holds Infinity in, which the import does not read: Mamba-2's Δ clamp, (0.0, inf) by
default in transformers' Mamba2Config and NemotronHConfig (Mamba-Codestral-7B's config.json writes it so)."""
_ACT = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh", "gelu": "gelu",
        "relu": "relu", "silu": "silu", "swish": "silu", "quick_gelu": "quick_gelu", "relu2": "relu2"}


SIDECARS = ("hf_quant_config.json", "generation_config.json", "model.safetensors.index.json")
"""Files beside config.json that a model's folder (or Hub repository) may hold: ModelOpt's quantisation config,
the generation defaults (fetched with the others; nothing of it is costed) and the safetensors shard index."""
MAX_INDEX_BYTES = 64 << 20
"""Largest model.safetensors.index.json read: one line per tensor (DeepSeek-V3's lists ~91,000 tensors in ~9 MB)."""


def _shown(value: Any) -> str:
    """A config value as an error quotes it: its JSON spelling (null, true), cut at 40 characters with an ellipsis."""
    return clip(json.dumps(value, ensure_ascii=False, default=str))


def read_json(p: Path, what: str, limit: int | None = None) -> Any:
    """A JSON file, bounded in size, with one-line errors naming the file and `what` (the option) for the fix."""
    check_size(p, what, **({"limit": limit} if limit else {}), kind="a JSON file")
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{p}: no such file; check the {what} path") from None
    except OSError as e:
        raise UserError(f"{clip(str(p))}: cannot read it ({e.strerror or e.__class__.__name__}); check the {what} "
                        "path") from None
    except UnicodeDecodeError:
        raise UserError(f"{p}: cannot read it (not UTF-8 text); give a readable {p.name}") from None
    return parse_json(text, p)


def parse_json(text: str, p: Path) -> Any:
    """The JSON `text` of the file `p` names, with one-line errors naming it."""
    from llmcalc.inputs.files import KeyTwice, NestedTooDeep, TooManyContainers, json_loads

    try:
        return json_loads(text, constant=float)  # NaN and Infinity read, then refused by the field they are in
    except json.JSONDecodeError as e:
        raise UserError(f"{p}: malformed JSON at line {e.lineno}, column {e.colno}: {e.msg}; fix the file") from None
    except NestedTooDeep:
        raise UserError(f"{p}: JSON nested too deeply; give a Hugging Face {p.name}") from None
    except KeyTwice as e:
        raise UserError(f"{p}: {e}; keep one") from None
    except TooManyContainers as e:
        raise UserError(f"{p}: {e}; give a Hugging Face {p.name}") from None
    except ValueError as e:  # an int of thousands of digits
        raise UserError(f"{p}: a value cannot be read ({clip(str(e), 50)}); write plain numbers") from None


def load_hf_config(path: str | Path, *, name: str | None = None, source: str | None = None,
                   generic: bool = False, what: str = "`hf_config`", text: str | None = None):
    """Read `config.json` (or a folder holding one) and build the ModelSpec transformers would build. A folder's
    hf_quant_config.json (ModelOpt) gives the checkpoint's formats when config.json has no quantization_config;
    its model.safetensors.index.json gives `metadata.total_size` (Checkpoint.index_total_size). `name` and
    `source` replace the folder's name and path (a Hub download: the repository's); `generic` imports an unknown
    model_type as a llama-style decoder, best effort (ModelSpec.best_effort lists what was assumed); `what` names
    the files in an error (the option that gave them); `text` is config.json's text held in memory (a pasted
    file), read instead of `path`, which then only names it."""
    p = Path(path)
    folder = None
    if text is not None:
        raw = parse_json(text, p)
    elif is_folder(p):
        if not ((p / "config.json").exists() or (p / "config.json").is_symlink()):  # else read_json says what it is
            raise UserError(f"{p}: folder has no config.json; point `hf_config` at a config.json or its folder")
        folder, p = p, p / "config.json"
    if text is None:
        raw = read_json(p, what)
    check_finite(raw, str(p), unbounded=_UNBOUNDED)
    if name is None:
        name = p.parent.name or p.stem if p.name == "config.json" else p.stem  # a folder's config.json: the folder
    source = source or str(p)
    total = None
    if folder is not None:
        raw, total = _sidecars(folder, raw, what)
    try:
        spec = spec_dict_from_hf(raw, name=name, source=source, generic=generic)
        if total is not None:
            spec["checkpoint"]["index_total_size"] = total
        return spec_from_data(spec, source)
    except UserError as e:
        msg = str(e)
        for ours, theirs in _HF_NAMES.items():
            msg = msg.replace(f": {ours}:", f": {theirs} (llmcalc {ours}):", 1)
        if msg.startswith("config.json: "):  # the converters name the file as the Hub does: here, by its own name
            msg = f"{p.name}: {msg.removeprefix('config.json: ')}"
        raise UserError(msg) from None


MODELOPT_FORMATS = {"FP8": "fp8-tensor", "FP8_PER_CHANNEL_PER_TOKEN": "fp8-row", "FP8_PB_WO": "fp8-block",
                    "NVFP4": "nvfp4"}
"""ModelOpt's `quant_algo` values and their weight formats: FP8 with one scale per tensor, per output channel, or
per 128 × 128 block (weight-only), NVFP4 (fp8 scale per 16 weights). Source: vLLM's
docs/features/quantization/modelopt.md (vllm-project/vllm, 2026), which reads them from hf_quant_config.json."""


def _sidecars(folder: Path, raw: Any, what: str) -> tuple[Any, int | None]:
    """config.json's fields with a ModelOpt hf_quant_config.json folded in as its quantization_config (when it has
    none), and the safetensors index's metadata.total_size (None without an index)."""
    total = None
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        data = read_json(index, what, MAX_INDEX_BYTES)
        meta = data.get("metadata") if isinstance(data, dict) else None
        total = meta.get("total_size") if isinstance(meta, dict) else None
        if total is not None and (type(total) is not int or not 0 <= total < 2**62):
            raise UserError(f"{index}: metadata.total_size is {_shown(total)}, not a byte count; fix or remove "
                            "the file")
    quant = folder / "hf_quant_config.json"
    if quant.is_file() and isinstance(raw, dict) and raw.get("quantization_config") is None:
        data = read_json(quant, what)
        q = data.get("quantization") if isinstance(data, dict) else None
        if not isinstance(q, dict):
            raise UserError(f"{quant}: no `quantization` object; fix or remove the file")
        check_finite(q, str(quant))
        raw = raw | {"quantization_config": {"quant_method": "modelopt"} | q}
    return raw, total


def spec_dict_from_hf(raw: Any, *, name: str, source: str | None = None, generic: bool = False) -> dict[str, Any]:
    """The ModelSpec fields for a parsed config.json (a nested `text_config` is used when present)."""
    if not isinstance(raw, dict):
        raise UserError(f"{source}: expected a JSON object with a model_type; give a Hugging Face config.json")
    if raw.get("model_type") == "exaone4":
        raw = _exaone4_pattern(raw)
    if raw.get("model_type") in ("gemma3n_text", "gemma3n"):
        raw = _gemma3n_widths(raw)
    _check_fields(raw)
    outer_raw, nested = raw, raw.get("text_config") is not None  # else Qwen2.5-VL's flat form: the text fields on top
    if nested:
        _check_fields(raw["text_config"], "text_config.")
    vlm = VISION_DEFAULTS.get(raw["model_type"]) if isinstance(raw.get("model_type"), str) else None
    if vlm is not None:
        text = raw["text_config"] if nested else {k: v for k, v in raw.items() if k != "vision_config"}
        raw = {k: raw[k] for k in ("tie_word_embeddings",) if k in raw} | text | {
            "model_type": (text.get("model_type") if nested else None) or vlm["text_model_type"]}
        if "outer_tie" in vlm:  # the outer config's flag alone ties the head (text_config's is not read)
            raw["tie_word_embeddings"] = outer_raw.get("tie_word_embeddings", vlm["outer_tie"])
    elif nested:
        outer = raw.get("model_type")
        raw = {"model_type": f"{outer}_text" if outer else None} | raw["text_config"] | {
            k: raw[k] for k in ("tie_word_embeddings",) if k in raw and k not in raw["text_config"]}
    mt = raw.get("model_type")
    refused = next((t for t in (outer_raw.get("model_type"), mt) if isinstance(t, str) and t in REFUSED), None)
    if refused is not None:
        raise UserError(f"{source}: model_type {refused!r}: {REFUSED[refused]}; write a llmcalc spec YAML and pass it "
                        "as `config`")
    if isinstance(mt, str) and mt not in DEFAULTS and vlm is None and generic:
        spec, assumed = _generic(mt, raw)
        spec = {"name": name, "source": source, "best_effort": assumed} | spec
        return spec | {"checkpoint": checkpoint_of(outer_raw, spec)}
    if not isinstance(mt, str) or mt not in DEFAULTS:
        raise UserError(
            f"{source}: model_type {mt!r} is not supported; supported: {', '.join(SUPPORTED)} "
            "(or pass `hf_generic` to read a plain decoder llama-style, best effort, or write a llmcalc spec YAML "
            "and pass it as `config`)"
        )
    c = DEFAULTS[mt] | {k: v for k, v in raw.items() if v is not None or k in DEFAULTS[mt]}
    mt = _SAME_AS.get(mt, mt)
    build = {"gpt2": _gpt2, "falcon": _falcon, "bert": _bert, "roberta": _bert, "modernbert": _modernbert,
             "t5": _t5, "bart": _bart, "whisper": _whisper, "mamba2": _mamba2, "nemotron_h": _nemotron_h,
             "qwen3_next": _qwen3_next, "minimax": _minimax, "mamba": _mamba, "falcon_mamba": _mamba,
             "jamba": _jamba, "falcon_h1": _falcon_h1, "granitemoehybrid": _granitemoehybrid,
             "lfm2": _lfm2, "glm4v_text": _glm4v_text, "llama4_text": _llama4, "gemma3n_text": _gemma3n_text,
             "longcat_flash": _longcat_flash,
             **{m: _text_2026 for m in TEXT_2026_DEFAULTS if m not in _SAME_AS}}.get(mt, _decoder)
    spec = {"name": name, "source": source} | build(mt, c)
    if vlm is not None and outer_raw["model_type"] == "mllama":
        spec |= _mllama(c, vlm["vision"] | (outer_raw.get("vision_config") or {}))
    elif vlm is not None:
        spec["vision"] = _vision(outer_raw["model_type"], vlm | {k: v for k, v in outer_raw.items() if v is not None})
    return spec | {"checkpoint": checkpoint_of(outer_raw, spec)}


def _vision(mt: str, c: dict) -> dict[str, Any]:
    """The VisionTower fields (llmcalc/model/vision.py) of a llava, gemma3 or qwen2_5_vl config (others: TOWERS)."""
    if mt in TOWERS:
        return TOWERS[mt](c)
    v = c["vision"] | (c.get("vision_config") or {})
    keys = ("depth", "num_heads", "in_channels", "spatial_merge_size", "temporal_patch_size", "window_size") if (
        mt == "qwen2_5_vl") else ("num_hidden_layers", "num_attention_heads", "num_channels", "image_size")
    _check_fields(v, "vision_config.", (*keys, "hidden_size", "intermediate_size", "patch_size"))
    if mt == "qwen2_5_vl":
        p, merge = v["patch_size"], v["spatial_merge_size"]
        return dict(image_size=QWEN_IMAGE_SIZE, resize="dynamic", min_pixels=QWEN_PIXELS[0], max_pixels=QWEN_PIXELS[1],
                    patch_size=p, channels=v["in_channels"], frames_per_patch=v["temporal_patch_size"],
                    patch_bias=False, learned_positions=False, norm="rmsnorm", post_norm=False,
                    d_model=v["hidden_size"], n_layers=v["depth"], heads=v["num_heads"], d_ff=v["intermediate_size"],
                    gated=True, activation=_act(v["hidden_act"]), window=v["window_size"] // p,
                    full_layers=list(v["fullatt_block_indexes"]),
                    projector=dict(kind="merger", merge=merge))
    tower = dict(image_size=v["image_size"], patch_size=v["patch_size"], channels=v["num_channels"],
                 d_model=v["hidden_size"], n_layers=v["num_hidden_layers"], heads=v["num_attention_heads"],
                 d_ff=v["intermediate_size"], activation=_act(v["hidden_act"]))
    if mt == "gemma3":
        if v.get("vision_use_head"):
            raise UserError("config.json: vision_config.vision_use_head: Gemma 3 runs its SigLIP tower without the "
                            "pooling head; set it to false")
        return tower | dict(patch_bias=True, projector=dict(kind="pool", tokens_per_image=c["mm_tokens_per_image"]))
    if c["vision_feature_select_strategy"] != "default" or not c["multimodal_projector_bias"]:
        raise UserError("config.json: vision_feature_select_strategy and multimodal_projector_bias: only LLaVA-1.5's "
                        '"default" (class token dropped) with biases is known; set them so or write a llmcalc spec')
    return tower | dict(patch_bias=False, class_token=True, pre_norm=True,
                        projector=dict(kind="mlp", activation=_act(c["projector_hidden_act"])))


def _text_width(c: dict) -> Any:
    """The language model's hidden_size of a vision-language config (`c`: its VISION_DEFAULTS entry and the outer
    config): text_config's, else the top level's, else the text model_type's default."""
    text = c.get("text_config") or {}
    mt = text.get("model_type") if isinstance(text.get("model_type"), str) else None
    default = DEFAULTS.get(mt or "", DEFAULTS[c["text_model_type"]])
    return text.get("hidden_size") or c.get("hidden_size") or default["hidden_size"]


def _qwen3_vl_vision(c: dict) -> dict[str, Any]:
    """Qwen3-VL's tower (transformers' Qwen3VLVisionModel, the same in Qwen3-VL-MoE): a Conv3d patch embedding
    with a bias over t × p × p × C, a learned table of num_position_embeddings rows resampled to each grid (plus 2-D
    rotary positions), LayerNorm blocks with biased qkv / proj and a two-matrix GELU-tanh MLP, full attention in
    every layer, no outer norms; the patch merger (LayerNorm over d) and one DeepStack merger (LayerNorm over m²·d)
    per deepstack_visual_indexes entry; dynamic resizing with the processor's bounds (QWEN3_PIXELS)."""
    v = c["vision"] | (c.get("vision_config") or {})
    _check_fields(v, "vision_config.", ("depth", "num_heads", "in_channels", "spatial_merge_size", "temporal_patch_size",
                                        "hidden_size", "intermediate_size", "patch_size", "out_hidden_size",
                                        "num_position_embeddings"))
    deep = v["deepstack_visual_indexes"]
    if not (isinstance(deep, list) and all(type(i) is int and 0 <= i < v["depth"] for i in deep)):
        raise UserError(f"config.json: vision_config.deepstack_visual_indexes: give a list of layer indices in "
                        f"0..{v['depth'] - 1}")
    d_text = _text_width(c)
    if v["out_hidden_size"] != d_text:
        raise UserError(f"config.json: vision_config.out_hidden_size {v['out_hidden_size']} differs from the "
                        f"language model's hidden_size {d_text}; make them equal")
    return dict(image_size=QWEN3_IMAGE_SIZE, resize="dynamic", min_pixels=QWEN3_PIXELS[0],
                max_pixels=QWEN3_PIXELS[1], patch_size=v["patch_size"], channels=v["in_channels"],
                frames_per_patch=v["temporal_patch_size"], patch_bias=True, learned_positions=True,
                position_rows=v["num_position_embeddings"], norm="layernorm", pre_norm=False, post_norm=False,
                d_model=v["hidden_size"], n_layers=v["depth"], heads=v["num_heads"], d_ff=v["intermediate_size"],
                gated=False, activation=_act(v["hidden_act"]), bias=True,
                projector=dict(kind="merger", merge=v["spatial_merge_size"], norm="layernorm",
                               deepstack_layers=list(deep)))


GLM4V_PIXELS = (112 * 112, 28 * 28 * 15000)
"""GLM-4V's image processor bounds (shortest_edge, longest_edge of `size`), Glm4vImageProcessor's defaults
(transformers 5.24). Its smart_resize compares t·h·w with them (t = temporal_patch_size frames): for t = 2 that is
Qwen's rule with both bounds halved, which is how the tower holds them."""


def _glm4v_vision(c: dict) -> dict[str, Any]:
    """GLM-4V's tower (transformers' Glm4vVisionModel): a Conv3d patch embedding with a bias (t × p × p × C), an
    RMSNorm after it, a learned table of (image_size / p)² positions resampled to each grid (element-wise), RMSNorm
    blocks with bias-free qkv and proj and a gated MLP of out_hidden_size (no biases), full attention, an RMSNorm
    after the blocks; then the downsample projector (llmcalc/model/vision.py DownsampleProjector): an m × m Conv2d to
    out_hidden_size and the merger's gated MLP of intermediate_size. Dynamic resizing with GLM4V_PIXELS (halved:
    see there); image_size is the default side."""
    v = c["vision"] | (c.get("vision_config") or {})
    _check_fields(v, "vision_config.", ("depth", "num_heads", "in_channels", "spatial_merge_size", "temporal_patch_size",
                                        "hidden_size", "intermediate_size", "patch_size", "out_hidden_size",
                                        "image_size"))
    if v["attention_bias"] is not False:
        raise UserError("config.json: vision_config.attention_bias: biases on the tower's qkv alone are not modelled; "
                        "set it to false")
    t = v["temporal_patch_size"]
    d_text = _text_width(c)
    if v["out_hidden_size"] != d_text:
        raise UserError(f"config.json: vision_config.out_hidden_size {v['out_hidden_size']} differs from the "
                        f"language model's hidden_size {d_text}; make them equal")
    if t != 2:
        raise UserError(f"config.json: vision_config.temporal_patch_size: {t} frames per patch change GLM-4V's "
                        "resize rule, which is modelled for 2; set it to 2")
    act = _act(v["hidden_act"])
    return dict(image_size=v["image_size"], resize="dynamic", min_pixels=GLM4V_PIXELS[0] // t,
                max_pixels=GLM4V_PIXELS[1] // t, patch_size=v["patch_size"], channels=v["in_channels"],
                frames_per_patch=t, patch_bias=True, learned_positions=True, norm="rmsnorm", pre_norm=True,
                post_norm=True, d_model=v["hidden_size"], n_layers=v["depth"], heads=v["num_heads"],
                d_ff=v["out_hidden_size"], gated=True, activation=act, bias=False,
                projector=dict(kind="downsample", merge=v["spatial_merge_size"], context=v["intermediate_size"],
                               activation=act))


def _llama4_vision(c: dict) -> dict[str, Any]:
    """Llama 4's tower (transformers' Llama4VisionModel; llmcalc/model/vision.py Llama4VisionTower) and its projector:
    the encoder (LayerNorm blocks with biases, a GELU MLP whatever hidden_act says: Llama4VisionMLP builds nn.GELU),
    its pixel-shuffle adapter (fc1 of intermediate_size → projector_input_dim, fc2 of projector_output_dim, no
    biases) and multi_modal_projector's linear (vision_output_dim → the text width, no bias whatever
    multi_modal_projector_bias says). transformers runs only configs whose widths chain: intermediate_size =
    hidden_size / pixel_shuffle_ratio², projector_input_dim = projector_output_dim = vision_output_dim. Tiles: the
    image processor's max_patches (16: Llama4ImageProcessor's default; image_processor_config may set it)."""
    v = c["vision"] | (c.get("vision_config") or {})
    _check_fields(v, "vision_config.", ("num_hidden_layers", "num_attention_heads", "num_channels", "image_size",
                                        "hidden_size", "intermediate_size", "patch_size", "vision_output_dim",
                                        "projector_input_dim", "projector_output_dim"))
    ratio, d = v["pixel_shuffle_ratio"], v["hidden_size"]
    merge = round(1 / ratio) if type(ratio) in (int, float) and 0 < ratio <= 1 else 0
    if not merge or merge * ratio != 1:
        raise UserError(f"config.json: vision_config.pixel_shuffle_ratio is {_shown(ratio)}; give 1 / m for a "
                        "whole m (0.5)")
    if v["intermediate_size"] != d * merge**2 or len({v[k] for k in ("projector_input_dim", "projector_output_dim",
                                                                      "vision_output_dim")}) != 1:
        raise UserError("config.json: vision_config.intermediate_size, projector_input_dim, projector_output_dim, "
                        "vision_output_dim: transformers' tower runs only when intermediate_size = hidden_size / "
                        "pixel_shuffle_ratio² and the three projector widths are equal; set them so")
    tiles = (c.get("image_processor_config") or {}).get("max_patches", c["image_processor"]["max_patches"])
    if type(tiles) is not int or tiles < 1:
        raise UserError(f"config.json: image_processor_config.max_patches is {_shown(tiles)}, not a whole number "
                        "> 0; fix it")
    return dict(kind="llama4", image_size=v["image_size"], max_tiles=tiles, patch_size=v["patch_size"],
                channels=v["num_channels"], patch_bias=False, class_token=True, learned_positions=True,
                norm="layernorm", pre_norm=True, post_norm=True, d_model=d, n_layers=v["num_hidden_layers"],
                heads=v["num_attention_heads"], d_ff=v["intermediate_size"], gated=False, activation="gelu",
                bias=True, projector=dict(kind="pixel_shuffle", merge=merge, inner=v["projector_input_dim"]))


INTERNVL_TILES = (1, 12)
"""InternVL's tiles per image (min_patches, max_patches): the defaults of transformers 5.24's GotOcr2ImageProcessor,
which InternVLProcessor runs with crop_to_patches true (its images_kwargs); config.json has none."""


def _side(v: dict, key: str) -> Any:
    """A square size given as a number or as [height, width] (InternVLVisionConfig's image_size and patch_size)."""
    x = v[key]
    if isinstance(x, list) and len(x) == 2 and x[0] == x[1]:
        return x[0]
    if isinstance(x, list):
        raise UserError(f"config.json: vision_config.{key} is {_shown(x)}; only square sizes are modelled, give "
                        "one number")
    return x


def _internvl_vision(c: dict) -> dict[str, Any]:
    """InternVL's tower (transformers' InternVLVisionModel; llmcalc/model/vision.py InternVLVisionTower) and projector
    (InternVLMultiModalProjector: pixel shuffle by 1 / downsample_ratio, LayerNorm, Linear + projector_hidden_act +
    Linear with biases). norm_type layer_norm or rms_norm; attention_bias on q, k, v (o always has one); use_qk_norm
    adds RMSNorms over all of q and of k; use_mask_token a mask embedding; use_absolute_position_embeddings the
    learned table; a LayerNorm after the blocks unless use_mean_pooling; two layer-scale vectors a layer. Tiles:
    INTERNVL_TILES plus a thumbnail. vision_feature_layer picks which layer's output is projected; every layer runs."""
    v = c["vision"] | (c.get("vision_config") or {})
    v = v | {"image_size": _side(v, "image_size"), "patch_size": _side(v, "patch_size")}
    _check_fields(v, "vision_config.", ("num_hidden_layers", "num_attention_heads", "num_channels", "image_size",
                                        "hidden_size", "intermediate_size", "patch_size"))
    for key in ("attention_bias", "use_qk_norm", "use_mask_token", "use_absolute_position_embeddings",
                "use_mean_pooling"):
        if type(v[key]) is not bool:
            raise UserError(f"config.json: vision_config.{key} is {_shown(v[key])}, not true or false; fix it")
    if v["norm_type"] not in ("layer_norm", "rms_norm"):
        raise UserError(f"config.json: vision_config.norm_type is {_shown(v['norm_type'])}; give layer_norm or "
                        "rms_norm")
    ratio = c["downsample_ratio"]
    merge = round(1 / ratio) if type(ratio) in (int, float) and 0 < ratio <= 1 else 0
    if not merge or merge * ratio != 1:
        raise UserError(f"config.json: downsample_ratio is {_shown(ratio)}; give 1 / m for a whole m (0.5)")
    if c["vision_feature_select_strategy"] != "default":
        raise UserError("config.json: vision_feature_select_strategy: InternVL's pixel shuffle needs the class token "
                        'dropped ("default"); set it so')
    return dict(kind="internvl", image_size=v["image_size"], patch_size=v["patch_size"], channels=v["num_channels"],
                patch_bias=True, class_token=True, learned_positions=v["use_absolute_position_embeddings"],
                norm="layernorm" if v["norm_type"] == "layer_norm" else "rmsnorm", pre_norm=False,
                post_norm=not v["use_mean_pooling"], d_model=v["hidden_size"], n_layers=v["num_hidden_layers"],
                heads=v["num_attention_heads"], d_ff=v["intermediate_size"], gated=False,
                activation=_act(v["hidden_act"]), bias=True, min_tiles=INTERNVL_TILES[0], max_tiles=INTERNVL_TILES[1],
                attention_bias=v["attention_bias"], qk_norm=v["use_qk_norm"], mask_token=v["use_mask_token"],
                projector=dict(kind="internvl", merge=merge, activation=_act(c["projector_hidden_act"])))


TOWERS: dict[str, Callable[[dict], dict[str, Any]]] = {"qwen3_vl": _qwen3_vl_vision, "qwen3_vl_moe": _qwen3_vl_vision,
                                                       "glm4v": _glm4v_vision, "llama4": _llama4_vision,
                                                       "internvl": _internvl_vision}
"""Vision-language model_types whose tower has a builder of its own (the outer config, defaults merged, in)."""


def _mllama(c: dict, v: dict) -> dict[str, Any]:
    """Llama 3.2 Vision's tiled tower (llmcalc/model/vision.py TiledVisionTower) and its text layers at
    cross_attention_layers as gated cross-attention (llmcalc/model/cross_attention.py) over one image's tokens,
    max_num_tiles · ((image_size / patch_size)² + 1), placed by hybrid_pattern (its shortest repeating cycle). Its
    embed_tokens holds vocab_size + 8 rows (MllamaTextModel's fixed 8, for the image token and padding): 8
    embedding_extra_rows; the LM head has vocab_size outputs."""
    _check_fields(v, "vision_config.", ("hidden_size", "num_hidden_layers", "num_global_layers", "attention_heads",
                                        "num_channels", "intermediate_size", "image_size", "patch_size", "max_num_tiles"))
    n, cross = c["num_hidden_layers"], c["cross_attention_layers"]
    if not (isinstance(cross, list) and all(type(i) is int and 0 <= i < n for i in cross)):
        raise UserError(f"config.json: text_config.cross_attention_layers: give layer indices in 0..{n - 1}")
    ratios, layers = v["supported_aspect_ratios"], v["intermediate_layers_indices"]
    if not (isinstance(ratios, list) and ratios and isinstance(layers, list)):
        raise UserError("config.json: vision_config.supported_aspect_ratios and intermediate_layers_indices: give "
                        "lists (the 11B: 8 ratios, layers [3, 7, 15, 23, 30])")
    tile_tokens = (v["image_size"] // v["patch_size"]) ** 2 + 1
    tower = dict(kind="tiled", image_size=v["image_size"], patch_size=v["patch_size"], channels=v["num_channels"],
                 patch_bias=False, class_token=True, pre_norm=True, post_norm=True, d_model=v["hidden_size"],
                 n_layers=v["num_hidden_layers"], heads=v["attention_heads"], d_ff=v["intermediate_size"],
                 activation=_act(v["hidden_act"]), max_tiles=v["max_num_tiles"], aspect_ratios=len(ratios),
                 global_layers=v["num_global_layers"], intermediate_layers=list(layers),
                 projector=dict(kind="linear", concat=1 + len(layers)))
    d, h = c["hidden_size"], c["num_attention_heads"]
    kinds = ["cross_attention" if i in cross else "attention" for i in range(n)]
    mixer = dict(kind="cross", heads=h, kv_heads=c.get("num_key_value_heads") or h, head_dim=_div(d, h),
                 image_tokens=v["max_num_tiles"] * tile_tokens, image_width=d)
    return dict(vision=tower, mixers={"cross_attention": mixer}, embedding_extra_rows=8,
                hybrid_pattern=[{"mixer": k} for k in _shortest_cycle(kinds)])


_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
ROUTER_BIAS = ("glm4_moe", "minimax_m2")
"""model_types whose checkpoints store each MoE layer's e_score_correction_bias, as DeepSeek-V3's noaux_tc does
(MiniMax-M2's quantization_config keeps it unconverted by name; GLM-4.5's weights hold
mlp.gate.e_score_correction_bias)."""
KEEP_KEYS = ("modules_to_not_convert", "ignored_layers", "ignore", "llm_int8_skip_modules", "exclude_modules")
"""Where a quantization_config lists the modules it keeps unquantised."""


def checkpoint_of(raw: dict, spec: dict[str, Any]) -> dict[str, Any]:
    """How the checkpoint stores the model (llmcalc/model/formats.py: Checkpoint), from `torch_dtype` (or
    `dtype`) and `quantization_config`: gptq, awq, bitsandbytes (8-bit, nf4, fp4, double quantisation), fp8 (block
    scales), mxfp4, compressed-tensors. What each leaves unquantised follows the quantiser: the embedding, the head
    and the norms always; the router for gptq, awq, bitsandbytes and fp8; everything but the experts for mxfp4;
    the modules the config names (KEEP_KEYS) as it names them."""
    dense = _DTYPES.get(raw.get("torch_dtype") or raw.get("dtype") or "bfloat16", "bf16")
    version = str(raw.get("transformers_version") or "9")
    rotary = spec.get("positions", {}).get("kind") == "rope" and _older(version, (4, 31))
    out: dict[str, Any] = {"rotary_buffers": rotary, "mtp_copies": bool(spec.get("mtp_modules")),
                           "router_buffers": raw.get("topk_method") == "noaux_tc"
                           or raw.get("model_type") in ROUTER_BIAS}
    q = raw.get("quantization_config")
    if q is None:
        return out | {"formats": {"default": dense, "dense": dense}}
    _check_fields(q, "quantization_config.")
    method = str(q.get("quant_method", "")).lower()
    kept = [str(m) for k in KEEP_KEYS for m in (q.get(k) or [])]
    edges = {"embedding": dense, "head": dense, "norms": dense, "mtp": dense}
    if method == "mxfp4":
        formats = {"default": dense, "components": {"experts": "mxfp4"}}
    elif method == "fp8":
        block = q.get("weight_block_size")  # none: one fp32 scale per matrix, as vLLM's Fp8Config reads it
        name = "fp8-tensor" if block is None else "fp8-block" if block == [128, 128] else _unsupported(
            f"fp8 weight_block_size {block}")
        formats = {"default": name, "components": edges | {"router": dense}}
    elif method in ("gptq", "awq"):
        bits, group = q.get("bits", q.get("w_bit", 4)), q.get("group_size", q.get("q_group_size", 128))
        if method == "gptq" and bits not in (2, 3, 4, 8):  # transformers' GPTQConfig refuses the others
            raise UserError(f"config.json: quantization_config.bits: GPTQ stores 2, 3, 4 or 8 bits, not {bits}; fix "
                            "quantization_config.bits")
        base = f"gptq-int{bits}" if method == "gptq" else "awq-int4" if bits == 4 else _unsupported(f"awq {bits}-bit")
        name = f"{base}-g{'row' if group in (-1, None) else group}"
        formats = {"default": name, "components": edges | {"router": dense}}
    elif method == "bitsandbytes":
        if q.get("load_in_8bit") and q.get("load_in_4bit"):  # transformers' BitsAndBytesConfig refuses both
            raise UserError("config.json: quantization_config.load_in_4bit and load_in_8bit are both true; set one "
                            "of them to false")
        if q.get("load_in_8bit"):
            name = "bnb-int8"
        elif q.get("load_in_4bit"):
            kind = q.get("bnb_4bit_quant_type", "fp4")
            name = {"nf4": "nf4", "fp4": "bnb-fp4"}.get(kind) or _unsupported(f"bnb_4bit_quant_type {kind}")
            name += "-dq" if q.get("bnb_4bit_use_double_quant") else ""
        else:
            return out | {"formats": {"default": dense, "dense": dense}}
        formats = {"default": name, "components": edges | {"router": dense}}
    elif method == "compressed-tensors":
        formats = {"default": _compressed(q), "components": edges}
    elif method == "modelopt":
        algo = str(q.get("quant_algo", "")).upper()
        name = MODELOPT_FORMATS.get(algo) or _unsupported(f"ModelOpt quant_algo {algo!r}")
        formats = {"default": name, "components": edges | {"router": dense}}
    else:
        _unsupported(f"quant_method {method!r}")
    head_kept = any(m.split(".")[-1] in ("lm_head", "output") for m in kept)
    if head_kept:
        formats["components"]["head"] = dense
    kv = _stated_kv_dtype(q, method)
    stated = {"kv_dtype": kv, "kv_quantizer": method} if kv else {}
    return out | {"formats": formats | {"dense": dense}, "kept": kept} | stated


def _stated_kv_dtype(q: dict, method: str) -> str | None:
    """The KV cache dtype a quantisation config states: ModelOpt's kv_cache_quant_algo (FP8, INT8), or a
    compressed-tensors kv_cache_scheme of 8 bits (float: fp8, int: int8); None where it states none, or one that
    no KV dtype here stands for (NVFP4's 4 bits with a scale per 16)."""
    if method == "modelopt":
        return {"FP8": "fp8", "INT8": "int8"}.get(str(q.get("kv_cache_quant_algo")).upper())
    scheme = q.get("kv_cache_scheme") if method == "compressed-tensors" else None
    if isinstance(scheme, dict) and scheme.get("num_bits") == 8:
        return {"float": "fp8", "int": "int8"}.get(scheme.get("type"))
    return None


def _compressed(q: dict) -> str:
    """The format of a compressed-tensors config's (first) weight scheme."""
    name, scheme = next(iter((q.get("config_groups") or {}).items()), ("", {}))
    at = f"quantization_config.config_groups.{name}"
    if not isinstance(scheme, dict):
        raise UserError(f"config.json: {at} is {_shown(scheme)}, not a JSON object; fix {at}")
    _check_fields(scheme, f"{at}.")
    w = scheme.get("weights") or {}
    _check_fields(w, f"{at}.weights.")
    bits, kind, strategy = w.get("num_bits"), w.get("type"), w.get("strategy")
    if kind == "float" and bits == 8:
        return {"tensor": "fp8-tensor", "channel": "fp8-row", "block": "fp8-block"}.get(strategy) or _unsupported(
            f"compressed-tensors fp8 strategy {strategy!r}")
    if kind == "float" and bits == 4 and w.get("group_size") == 16:
        return "nvfp4"
    return _unsupported(f"compressed-tensors {kind} {bits}-bit {strategy} weights")


def _unsupported(what: str) -> str:
    raise UserError(f"`quantization_config`: {what} is not a known format; remove quantization_config to size the "
                    "model unquantised, or give `weights_format` (docs/formats.md lists the formats)")


def _older(version: str, than: tuple[int, int]) -> bool:
    """Whether a `transformers_version` such as 4.30.0.dev0 is before `than`."""
    try:
        major, minor = (int(p) for p in version.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) < than


_POSITIVE = ("num_hidden_layers", "n_layer", "num_attention_heads", "n_head", "decoder_sparse_step",
             "sliding_window_pattern", "global_attn_every_n_layers", "num_heads", "full_attention_interval",
             "mamba_n_heads", "attn_layer_period", "expert_layer_period", "mm_tokens_per_image", "bits", "w_bit",
             "num_bits", "n_heads", "n_layers", "kv_n_heads", "moe_num_experts", "moe_top_k", "no_rope_layer_interval",
             "moe_k", "moe_layer_interval", "interleave_moe_layer_step")
"""Fields the import divides by or loops over: whole numbers > 0 (layer counts at most MAX_LAYERS)."""
_NUMBERS = ("expand", "mamba_expand")
"""Width multipliers: numbers > 0, whole or not (transformers sizes the Mamba width int(expand · hidden_size))."""
_GROUPS = ("group_size", "q_group_size")
"""Weights per quantisation scale: 1 to MAX_GROUP, or -1 for one group per row (GPTQ, AWQ; transformers' GPTQConfig
refuses 0 and any other negative)."""
_BOOLS = ("tie_word_embeddings", "attention_bias", "mlp_bias", "qkv_bias", "use_sliding_window",
          "new_decoder_architecture", "multi_query", "parallel_attn", "bias", "alibi", "use_bias", "use_conv_bias",
          "mamba_conv_bias", "mamba_proj_bias", "mamba_rms_norm", "projectors_bias", "norm_bias", "scale_embedding",
          "multimodal_projector_bias", "vision_use_head", "load_in_4bit", "load_in_8bit", "bnb_4bit_use_double_quant",
          "use_qk_norm", "attention_out_bias")
"""Flags: true or false (or null where transformers' config class takes None as its default)."""
_STRINGS = ("hidden_act", "activation_function", "hidden_activation", "mlp_hidden_act", "projector_hidden_act",
            "feed_forward_proj", "torch_dtype", "dtype", "transformers_version", "topk_method", "quant_method",
            "bnb_4bit_quant_type", "mamba_ssm_cache_dtype", "hybrid_override_pattern",
            "vision_feature_select_strategy", "type", "strategy")
_OBJECTS = ("text_config", "vision_config", "quantization_config", "config_groups", "weights", "attn_config",
            "image_processor_config",
            "ffn_config")
"""Nested configs: JSON objects, or null (a list or a string in their place is refused, never read as absent)."""
_LISTS: dict[str, type] = {
    "layer_types": str, "layers_block_type": str, "mlp_only_layers": int, "cross_attention_layers": int,
    "fullatt_block_indexes": int, "intermediate_layers_indices": int, "supported_aspect_ratios": list,
    "weight_block_size": int, **{key: str for key in ("modules_to_not_convert", "ignored_layers", "ignore",
                                                       "llm_int8_skip_modules")}, "no_rope_layers": int,
    "moe_layers": int}
"""Lists and the type of their items."""
_NOT_NULL = _POSITIVE + _NUMBERS + ("hidden_size", "n_embd", "max_window_layers", "first_k_dense_replace",
                                    "max_position_embeddings", "n_positions", "d_model", "num_experts",
                                    "moe_intermediate_size", "moe_layer_start_index",
                                    "fullatt_block_indexes", "load_in_4bit", "load_in_8bit", "bnb_4bit_use_double_quant")
"""Fields the import computes with before validation (and flags transformers requires as booleans): null is refused
too."""
_COUNTS = _POSITIVE + (
    "vocab_size", "hidden_size", "n_embd", "intermediate_size", "n_inner", "ffn_hidden_size", "num_key_value_heads",
    "num_kv_heads", "head_dim", "max_position_embeddings", "n_positions", "sliding_window", "max_window_layers",
    "num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
    "shared_expert_intermediate_size", "n_shared_experts", "first_k_dense_replace", "q_lora_rank", "kv_lora_rank",
    "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "num_nextn_predict_layers", "num_ln_in_parallel_attn",
    "type_vocab_size", "local_attention", "d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers",
    "relative_attention_num_buckets", "relative_attention_max_distance", "encoder_layers", "decoder_layers",
    "encoder_attention_heads", "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim", "num_mel_bins",
    "max_source_positions", "max_target_positions",
    "state_size", "n_groups", "conv_kernel", "chunk_size", "ssm_state_size", "mamba_num_heads", "mamba_head_dim",
    "mamba_d_ssm", "mamba_n_groups", "mamba_d_state", "mamba_d_conv", "mamba_chunk_size", "attn_layer_offset",
    "expert_layer_offset", "linear_conv_kernel_dim", "linear_key_head_dim", "linear_value_head_dim",
    "linear_num_key_heads", "linear_num_value_heads", "index_n_heads", "index_head_dim", "index_topk", "max_seq_len",
    "moe_num_shared_experts", "moe_layer_start_index", "attention_chunk_size", "intermediate_size_mlp")
"""Fields the import does arithmetic with: whole numbers ≥ 0, or null."""
_SIZES = ("num_key_value_heads", "num_kv_heads", "head_dim", "max_position_embeddings", "n_positions")
"""Of _COUNTS, the ones transformers takes as given unless null (0 kv heads, a head of width 0 or 0 positions builds
no model): whole numbers > 0, or null (derived from the other fields) where _NOT_NULL does not name them."""


def _check_fields(d: dict, at: str = "", positive: tuple[str, ...] = ()) -> None:
    """The type of every field of `d` the import reads (the tables above), checked before any arithmetic: a wrong
    one is refused, named as `at` + its key (text_config.hidden_size). `positive`: more fields that must be whole
    numbers > 0 (a vision tower's sizes). Every config the import reads, nested or not, passes here first."""
    from llmcalc.model.spec import MAX_LAYERS

    for key in dict.fromkeys((*positive, *_COUNTS, *_NUMBERS, *_GROUPS, *_BOOLS, *_STRINGS, *_OBJECTS, *_LISTS)):
        v, rule = d.get(key), _rule(key, positive)
        if key not in d or (v is None and key not in _NOT_NULL and key not in positive):
            continue
        want, test = rule
        if not test(v):
            raise UserError(f"config.json: {at}{key} is {_shown(v)}, not {want}; fix {at}{key}")
        if key in ("num_hidden_layers", "n_layer", "n_layers") and v > MAX_LAYERS:
            raise UserError(f"config.json: {at}{key}: {v} is more than {MAX_LAYERS:,} layers; give a smaller number")


_RULES: tuple[tuple[tuple[str, ...], str, Callable[[Any], bool]], ...] = (
    (_NUMBERS, f"a number > 0 and at most {MAX_SIZE:,}", lambda v: type(v) in (int, float) and 0 < v <= MAX_SIZE),
    (_GROUPS, f"a whole number from 1 to {MAX_GROUP:,}, or -1 (one group per row)",
     lambda v: type(v) is int and (0 < v <= MAX_GROUP or v == -1)),
    (_BOOLS, "true or false", lambda v: type(v) is bool),
    (_STRINGS, "a string", lambda v: isinstance(v, str)),
    (_OBJECTS, "a JSON object", lambda v: isinstance(v, dict)))
"""Each table's words and test (a bool is never a number: type(True) is bool, not int)."""


def _rule(key: str, positive: tuple[str, ...]) -> tuple[str, Callable[[Any], bool]]:
    """What the field `key` (one the tables name) must be: in words, and its test."""
    if key in _POSITIVE or key in positive:
        return "a whole number > 0", lambda v: type(v) is int and v > 0
    if key in _SIZES:
        return "a whole number > 0" + ("" if key in _NOT_NULL else " or null"), lambda v: type(v) is int and v > 0
    if key in _COUNTS:
        return "a whole number ≥ 0" + ("" if key in _NOT_NULL else " or null"), lambda v: type(v) is int and v >= 0
    if key in _LISTS:
        item = _LISTS[key]
        words = {str: "strings", int: "whole numbers"}.get(item, "lists")
        return f"a list of {words}", lambda v: isinstance(v, list) and all(type(x) is item for x in v)
    return next((want, test) for keys, want, test in _RULES if key in keys)


def _get(c: dict, key: str) -> Any:
    if key not in c:
        raise UserError(f"config.json: missing {key}; add it")
    return c[key]


def _gpt2(mt: str, c: dict) -> dict[str, Any]:
    d = c["n_embd"]
    return dict(
        vocab_size=c["vocab_size"], d_model=d, n_layers=c["n_layer"], max_seq_len=c["n_positions"],
        tie_embeddings=c["tie_word_embeddings"],
        norm=dict(kind="layernorm", bias=True, per_layer=2, final=True),
        positions=dict(kind="learned"),
        attention=dict(kind="gqa", heads=c["n_head"], kv_heads=c["n_head"], head_dim=_div(d, c["n_head"]),
                       qkv_bias=True, o_bias=True),
        ffn=dict(kind="dense", d_ff=c["n_inner"] or 4 * d, activation=_act(c["activation_function"]), bias=True),
    )


def _bert(mt: str, c: dict) -> dict[str, Any]:
    """BERT and RoBERTa as their bare models (BertModel, RobertaModel: the pooler included): learned
    positions (max_position_embeddings rows; RoBERTa's two first rows are reserved for padding), a
    token-type table, an embedding LayerNorm, post-norm LayerNorms with biases, biases on every
    projection, a GELU MLP."""
    d, h = _get(c, "hidden_size"), _get(c, "num_attention_heads")
    return dict(
        vocab_size=_get(c, "vocab_size"), d_model=d, n_layers=_get(c, "num_hidden_layers"),
        max_seq_len=_get(c, "max_position_embeddings"), tie_embeddings=True,
        norm=dict(kind="layernorm", bias=True, per_layer=2, final=False),
        positions=dict(kind="learned"),
        attention=dict(kind="gqa", heads=h, kv_heads=h, head_dim=_div(d, h), qkv_bias=True, o_bias=True),
        ffn=dict(kind="dense", d_ff=_get(c, "intermediate_size"), activation=_act(c["hidden_act"]), bias=True),
        stack=dict(kind="encoder", token_types=c["type_vocab_size"], embedding_norm=True, pooler=True),
    )


def _t5(mt: str, c: dict) -> dict[str, Any]:
    """T5 and Flan-T5 (T5 v1.1) as T5ForConditionalGeneration: an encoder of num_layers layers and a decoder of
    num_decoder_layers (default num_layers), d_kv per head (any width), no biases, RMS-style norms (weight only)
    before each block and at the end of each stack, the bucketed relative bias in each stack's first layer;
    feed_forward_proj "relu" (a two-matrix MLP) or "gated-gelu" (GeGLU with the tanh GELU, as transformers
    maps it); the LM head tied to the shared embedding unless tie_word_embeddings is false (T5 v1.1)."""
    proj = c["feed_forward_proj"]
    if not isinstance(proj, str) or proj.split("-")[-1] not in ("relu", "gelu", "silu") or proj.count("-") > 1 or (
            "-" in proj and not proj.startswith("gated-")):
        raise UserError(f"config.json: feed_forward_proj {_shown(proj)} is not supported; use relu, gated-gelu, "
                        "gated-relu or gated-silu")
    gated, act = proj.startswith("gated-"), proj.split("-")[-1]
    act = "gelu_tanh" if proj == "gated-gelu" else _act(act)
    h, n_enc = _get(c, "num_heads"), _get(c, "num_layers")
    return dict(
        vocab_size=_get(c, "vocab_size"), d_model=_get(c, "d_model"), n_layers=c["num_decoder_layers"] or n_enc,
        max_seq_len=c["n_positions"], tie_embeddings=c["tie_word_embeddings"],
        norm=dict(kind="rmsnorm", per_layer=2, final=True),
        positions=dict(kind="t5_buckets", num_buckets=c["relative_attention_num_buckets"],
                       max_distance=c["relative_attention_max_distance"]),
        attention=dict(kind="gqa", heads=h, kv_heads=h, head_dim=_get(c, "d_kv")),
        ffn=dict(kind="gated" if gated else "dense", d_ff=_get(c, "d_ff"), activation=act),
        stack=dict(kind="encoder-decoder", encoder_layers=n_enc),
    )


def _bart(mt: str, c: dict) -> dict[str, Any]:
    """BART as BartForConditionalGeneration: learned positions in each stack with two rows before position 0
    (max_position_embeddings + 2), a LayerNorm over each stack's embeddings, post-norm LayerNorms with biases,
    biases on every projection, an MLP of the activation_function, no final norm, the LM head tied to the
    shared embedding (its final_logits_bias is a buffer, not a parameter). Both stacks take one shape, so the
    encoder's heads and FFN width must equal the decoder's."""
    for enc, dec in (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")):
        if c[enc] != c[dec]:
            raise UserError(f"config.json: {enc} {c[enc]} differs from {dec} {c[dec]}; an encoder-decoder is "
                            "modelled with one layer shape, give equal values")
    d, h = _get(c, "d_model"), c["decoder_attention_heads"]
    return dict(
        vocab_size=_get(c, "vocab_size"), d_model=d, n_layers=c["decoder_layers"],
        max_seq_len=_get(c, "max_position_embeddings"), tie_embeddings=True,
        norm=dict(kind="layernorm", bias=True, per_layer=2, final=False),
        positions=dict(kind="learned", offset=2),
        attention=dict(kind="gqa", heads=h, kv_heads=h, head_dim=_div(d, h), qkv_bias=True, o_bias=True),
        ffn=dict(kind="dense", d_ff=c["decoder_ffn_dim"], activation=_act(c["activation_function"]), bias=True),
        stack=dict(kind="encoder-decoder", encoder_layers=c["encoder_layers"], embedding_norm=True),
    )


def _whisper(mt: str, c: dict) -> dict[str, Any]:
    """Whisper as WhisperForConditionalGeneration: an audio stem of two Conv1d (num_mel_bins → d, then d → d at
    stride 2, kernel 3, with biases) halving 2·max_source_positions mel frames to max_source_positions; the
    encoder's position table (max_source_positions × d, sinusoidal, a frozen nn.Embedding that transformers counts
    as a parameter) and the decoder's learned one (max_target_positions × d); pre-norm LayerNorms with biases and a
    final one in each stack; q, v and out projections biased, k not; a GELU MLP with biases; the LM head (proj_out)
    tied to the decoder's embedding. Both stacks take one shape, so the encoder's heads and FFN width must equal
    the decoder's."""
    for enc, dec in (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")):
        if c[enc] != c[dec]:
            raise UserError(f"config.json: {enc} {c[enc]} differs from {dec} {c[dec]}; an encoder-decoder is "
                            "modelled with one layer shape, give equal values")
    if c.get("scale_embedding"):
        raise UserError("config.json: scale_embedding true is not supported for whisper; set it to false")
    d, h = _get(c, "d_model"), c["decoder_attention_heads"]
    return dict(
        vocab_size=_get(c, "vocab_size"), d_model=d, n_layers=c["decoder_layers"],
        max_seq_len=_get(c, "max_target_positions"), tie_embeddings=c["tie_word_embeddings"],
        norm=dict(kind="layernorm", bias=True, per_layer=2, final=True),
        positions=dict(kind="learned"),
        attention=dict(kind="gqa", heads=h, kv_heads=h, head_dim=_div(d, h), qkv_bias=True, key_bias=False,
                       o_bias=True),
        ffn=dict(kind="dense", d_ff=c["decoder_ffn_dim"], activation=_act(c["activation_function"]), bias=True),
        stack=dict(kind="encoder-decoder", encoder_layers=c["encoder_layers"],
                   encoder_frames=c["max_source_positions"], mel_bins=c["num_mel_bins"]),
    )


def _modernbert(mt: str, c: dict) -> dict[str, Any]:
    """ModernBERT as ModernBertModel (no pooler, no head): RoPE, LayerNorms (bias per norm_bias) with one after
    the embedding, none before layer 0's attention, and a final one; a GeGLU MLP (Wi: d → 2f, Wo: f → d);
    full attention every global_attn_every_n_layers layers from layer 0, the others local: keys within
    local_attention // 2 positions either side (as `sliding_window` W, the band |i − j| ≤ ⌊W/2⌋)."""
    d, h, n_layers = _get(c, "hidden_size"), _get(c, "num_attention_heads"), _get(c, "num_hidden_layers")
    every = c.get("global_attn_every_n_layers") or 3
    types = c["layer_types"] or ["sliding" if i % every else "full" for i in range(n_layers)]
    kinds = ["sliding" if t in ("sliding", "sliding_attention") else "full" for t in types]
    if len(kinds) != n_layers:
        raise UserError(f"config.json: layer_types has {len(kinds)} entries for {n_layers} layers; fix layer_types")
    sliding = "sliding" in kinds
    bias = c["attention_bias"]
    return dict(
        vocab_size=_get(c, "vocab_size"), d_model=d, n_layers=n_layers,
        max_seq_len=_get(c, "max_position_embeddings"), tie_embeddings=True,
        norm=dict(kind="layernorm", bias=c["norm_bias"], per_layer=2, final=True),
        positions=dict(kind="rope"),
        attention=dict(kind="gqa", heads=h, kv_heads=h, head_dim=_div(d, h), qkv_bias=bias, o_bias=bias),
        ffn=dict(kind="gated", d_ff=_get(c, "intermediate_size"), activation=_act(c["hidden_activation"]),
                 bias=c["mlp_bias"]),
        sliding_window=c["local_attention"] if sliding else None,
        layer_pattern=_shortest_cycle(kinds) if sliding else ["full"],
        stack=dict(kind="encoder", embedding_norm=True, first_attention_norm=False),
    )


def _falcon(mt: str, c: dict) -> dict[str, Any]:
    d, h = c["hidden_size"], c["num_attention_heads"]
    if c["new_decoder_architecture"]:
        kv = c["num_kv_heads"] or h
        n_ln = 2 if c["num_ln_in_parallel_attn"] in (None, 2) else 1
    else:
        kv = 1 if c["multi_query"] else h
        n_ln = 1 if c["parallel_attn"] else 2
    if not c["parallel_attn"]:
        n_ln = 2
    return dict(
        vocab_size=c["vocab_size"], d_model=d, n_layers=c["num_hidden_layers"],
        max_seq_len=c["max_position_embeddings"], tie_embeddings=c["tie_word_embeddings"],
        norm=dict(kind="layernorm", bias=True, per_layer=n_ln, final=True),
        positions=dict(kind="alibi" if c["alibi"] else "rope"),
        attention=dict(kind="gqa", heads=h, kv_heads=kv, head_dim=_div(d, h), qkv_bias=c["bias"], o_bias=c["bias"]),
        ffn=dict(kind="dense", d_ff=c["ffn_hidden_size"] or 4 * d, activation="gelu", bias=c["bias"]),
    )


def _mamba2(mt: str, c: dict) -> dict[str, Any]:
    """Mamba-2: every layer an RMSNorm and the SSD mixer, no FFN, no positions; I = expand·d = H·P."""
    d, h, p = c["hidden_size"], c["num_heads"], c["head_dim"]
    if p is None:  # null means derive it for attention; a Mamba-2 head has no width to derive it from
        raise UserError("config.json: head_dim is null; give the Mamba-2 heads' width (transformers' default: 64)")
    if d * c["expand"] != h * p:
        raise UserError(f"config.json: hidden_size·expand ({d * c['expand']}) differs from num_heads·head_dim "
                        f"({h * p}); make them equal")
    return dict(
        vocab_size=c["vocab_size"], d_model=d, n_layers=c["num_hidden_layers"],
        max_seq_len=NO_POSITION_LIMIT, tie_embeddings=c["tie_word_embeddings"],
        norm=dict(kind="rmsnorm", per_layer=1, final=True), positions=dict(kind="none"),
        attention=dict(kind="mamba2", heads=h, head_dim=p, state_size=c["state_size"], groups=c["n_groups"],
                       conv_kernel=c["conv_kernel"], chunk_size=c["chunk_size"], bias=c["use_bias"],
                       conv_bias=c["use_conv_bias"]),
        ffn=dict(kind="none"),
    )


def _dt_rank(rank: Any, d: int, field: str) -> int:
    """Δ's projection rank: ⌈d / 16⌉ for "auto" (transformers' MambaConfig, JambaConfig), else the int given."""
    if rank == "auto":
        return ceil_div(d, 16)
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        raise UserError(f"config.json: {field}: {rank!r} is not a positive int or \"auto\"; give one")
    return rank


def _mamba(mt: str, c: dict) -> dict[str, Any]:
    """Mamba-1 and Falcon-Mamba: every layer an RMSNorm and the selective-scan mixer, no FFN, no positions;
    I = expand·d (int, as transformers), R = ⌈d / 16⌉ for "auto". Falcon-Mamba's norms over Δ, B and C are
    weightless (buffers, no parameters), so both import alike."""
    d = c["hidden_size"]
    return dict(
        vocab_size=c["vocab_size"], d_model=d, n_layers=c["num_hidden_layers"],
        max_seq_len=NO_POSITION_LIMIT, tie_embeddings=c["tie_word_embeddings"],
        norm=dict(kind="rmsnorm", per_layer=1, final=True), positions=dict(kind="none"),
        attention=dict(kind="mamba", inner=int(c["expand"] * d), state_size=c["state_size"],
                       conv_kernel=c["conv_kernel"], dt_rank=_dt_rank(c["time_step_rank"], d, "time_step_rank"),
                       bias=c["use_bias"], conv_bias=c["use_conv_bias"]),
        ffn=dict(kind="none"),
    )


def _jamba(mt: str, c: dict) -> dict[str, Any]:
    """Jamba: Mamba-1 layers (with RMSNorms over Δ, B and C) and GQA attention without positions, one every
    attn_layer_period from attn_layer_offset; the MoE FFN every expert_layer_period from expert_layer_offset, a
    gated MLP of the same width elsewhere (all of them when num_experts is 1); two norms per layer."""
    d, h, n_layers = c["hidden_size"], c["num_attention_heads"], c["num_hidden_layers"]
    for period, offset in (("attn_layer_period", "attn_layer_offset"), ("expert_layer_period", "expert_layer_offset")):
        if not (isinstance(c[period], int) and isinstance(c[offset], int) and 0 <= c[offset] < c[period]):
            raise UserError(f"config.json: {offset}: give an int from 0 to {period} − 1")
    moe = c["num_experts"] > 1
    slots = [dict(mixer="attention" if i % c["attn_layer_period"] == c["attn_layer_offset"] else "mamba",
                  ffn="ffn" if not moe or i % c["expert_layer_period"] == c["expert_layer_offset"] else "dense")
             for i in range(n_layers)]
    act, d_ff = _act(c["hidden_act"]), c["intermediate_size"]
    ffn = (dict(kind="moe", experts=c["num_experts"], top_k=c["num_experts_per_tok"], d_ff=d_ff, activation=act,
                dense_d_ff=d_ff) if moe else dict(kind="gated", d_ff=d_ff, activation=act))
    return dict(
        vocab_size=c["vocab_size"], d_model=d, n_layers=n_layers, max_seq_len=c["max_position_embeddings"],
        tie_embeddings=c["tie_word_embeddings"], norm=dict(kind="rmsnorm", per_layer=2, final=True),
        positions=dict(kind="none"),
        attention=dict(kind="gqa", heads=h, kv_heads=c.get("num_key_value_heads") or h, head_dim=_div(d, h)),
        ffn=ffn,
        mixers={"mamba": dict(kind="mamba", inner=int(c["mamba_expand"] * d), state_size=c["mamba_d_state"],
                              conv_kernel=c["mamba_d_conv"], dt_rank=_dt_rank(c["mamba_dt_rank"], d, "mamba_dt_rank"),
                              bias=c["mamba_proj_bias"], conv_bias=c["mamba_conv_bias"], dt_norms=True)},
        hybrid_pattern=_shortest_cycle(slots),
    )


def _falcon_h1(mt: str, c: dict) -> dict[str, Any]:
    """Falcon-H1: every layer runs GQA attention (RoPE) and a Mamba-2 mixer side by side on the same normed
    input (a `parallel` mixer), then a gated MLP; two norms per layer. The Mamba's width is mamba_d_ssm (else
    mamba_expand·d), its head dim that over mamba_n_heads for "auto"; its gated norm only with mamba_rms_norm.
    The µP multipliers scale activations and have no parameters."""
    d, h = c["hidden_size"], c["num_attention_heads"]
    inner = c["mamba_d_ssm"] if c["mamba_d_ssm"] is not None else int(c["mamba_expand"] * d)
    heads = c["mamba_n_heads"]
    head_dim = c["mamba_d_head"] if c["mamba_d_head"] != "auto" else inner // heads
    if not isinstance(head_dim, int) or head_dim * heads != inner:
        raise UserError(f"config.json: mamba_d_head: {head_dim!r} × mamba_n_heads {heads} is not the Mamba width "
                        f"{inner}; give a head dim that fits (or \"auto\")")
    attention = dict(kind="gqa", heads=h, kv_heads=c.get("num_key_value_heads") or h,
                     head_dim=c.get("head_dim") or _div(d, h), qkv_bias=c["attention_bias"], o_bias=c["attention_bias"])
    mamba = dict(kind="mamba2", heads=heads, head_dim=head_dim, state_size=c["mamba_d_state"],
                 groups=c["mamba_n_groups"], conv_kernel=c["mamba_d_conv"], chunk_size=c["mamba_chunk_size"],
                 bias=c["mamba_proj_bias"], conv_bias=c["mamba_conv_bias"], gate_norm=bool(c["mamba_rms_norm"]))
    if c["projectors_bias"] != c["mamba_proj_bias"]:
        raise UserError("config.json: projectors_bias: out_proj's bias differing from in_proj's "
                        "(mamba_proj_bias) is not modelled; give both the same")
    return dict(
        vocab_size=c["vocab_size"], d_model=d, n_layers=c["num_hidden_layers"],
        max_seq_len=c["max_position_embeddings"], tie_embeddings=c["tie_word_embeddings"],
        norm=dict(kind="rmsnorm", per_layer=2, final=True), positions=dict(kind="rope"), attention=attention,
        ffn=dict(kind="gated", d_ff=c["intermediate_size"], activation=_act(c["hidden_act"]), bias=c["mlp_bias"]),
        mixers={"parallel": dict(kind="parallel", attention=attention, mamba=mamba)},
        hybrid_pattern=[dict(mixer="parallel", ffn="ffn")],
    )


_NEMOTRON_SLOTS = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}


def _nemotron_h(mt: str, c: dict) -> dict[str, Any]:
    """Nemotron-H: each layer one RMSNorm and ONE block, a Mamba-2 mixer (M), GQA attention without positions (*)
    or a squared-ReLU MLP (-), from layers_block_type (or the older hybrid_override_pattern string)."""
    types = c["layers_block_type"]
    if types is None and isinstance(c["hybrid_override_pattern"], str):
        if not set(c["hybrid_override_pattern"]) <= set(_NEMOTRON_SLOTS):
            raise UserError("config.json: hybrid_override_pattern: use only the letters M, *, - and E")
        types = [_NEMOTRON_SLOTS[ch] for ch in c["hybrid_override_pattern"]]
    if not isinstance(types, list) or not types:
        raise UserError("config.json: layers_block_type: give each layer's block (or hybrid_override_pattern)")
    slots = {"linear_attention": dict(mixer="mamba", ffn="none"), "full_attention": dict(mixer="attention", ffn="none"),
             "mlp": dict(mixer=None, ffn="ffn")}
    if unknown := sorted(set(map(str, types)) - set(slots)):
        raise UserError(f"config.json: layers_block_type {', '.join(unknown)} is not supported; "
                        "use linear_attention, full_attention and mlp")
    d, h = c["hidden_size"], c["num_attention_heads"]
    return dict(
        vocab_size=c["vocab_size"], d_model=d, n_layers=len(types), max_seq_len=c["max_position_embeddings"],
        tie_embeddings=c["tie_word_embeddings"], norm=dict(kind="rmsnorm", per_layer=1, final=True),
        positions=dict(kind="none"),
        attention=dict(kind="gqa", heads=h, kv_heads=c.get("num_key_value_heads") or h,
                       head_dim=c.get("head_dim") or _div(d, h)),
        ffn=dict(kind="dense", d_ff=c["intermediate_size"], activation=_act(c["mlp_hidden_act"]), bias=c["mlp_bias"]),
        mixers={"mamba": dict(kind="mamba2", heads=c["mamba_num_heads"], head_dim=c["mamba_head_dim"],
                              state_size=c["ssm_state_size"], groups=c["n_groups"], conv_kernel=c["conv_kernel"],
                              chunk_size=c["chunk_size"], bias=c["use_bias"], conv_bias=c["use_conv_bias"],
                              state_dtype="fp32" if c["mamba_ssm_cache_dtype"] == "float32" else "cache")},
        hybrid_pattern=[slots[t] for t in _shortest_cycle(types)],
    )


def _granitemoehybrid(mt: str, c: dict) -> dict[str, Any]:
    """Granite 4.0-H (transformers' GraniteMoeHybrid): each layer an RMSNorm, ONE mixer by layer_types (a Mamba-2
    mixer with its gated norm for mamba / linear_attention, else GQA attention, RoPE only with
    position_embedding_type "rope"), an RMSNorm, then the MoE (num_local_experts gated experts of intermediate_size, a bias-free router)
    beside an always-on gated shared MLP of shared_intermediate_size (no gate of its own); with no experts the shared
    MLP alone. The Mamba width is int(mamba_expand · d), its head dim that over mamba_n_heads for "auto". The µP
    multipliers scale activations and have no parameters."""
    d, h, n_layers = c["hidden_size"], c["num_attention_heads"], c["num_hidden_layers"]
    types = c["layer_types"] or ["linear_attention"] * n_layers
    if len(types) != n_layers or not set(types) <= {"attention", "mamba", "linear_attention", "full_attention"}:
        raise UserError(f"config.json: layer_types: give {n_layers} entries of linear_attention (Mamba-2) or attention")
    inner = int(c["mamba_expand"] * d)
    heads = c["mamba_n_heads"]
    head_dim = c["mamba_d_head"] if c["mamba_d_head"] != "auto" else inner // heads
    if not isinstance(head_dim, int) or isinstance(head_dim, bool) or head_dim * heads != inner:
        raise UserError(f"config.json: mamba_d_head: {head_dim!r} × mamba_n_heads {heads} is not the Mamba width "
                        f"{inner}; give a head dim that fits (or \"auto\")")
    pos = c["position_embedding_type"]  # transformers rotates only for "rope" (Granite 4.0-H writes "nope")
    act, shared, experts = _act(c["hidden_act"]), c["shared_intermediate_size"], c["num_local_experts"] or 0
    ffn = (dict(kind="moe", experts=experts, top_k=c["num_experts_per_tok"], d_ff=c["intermediate_size"],
                activation=act, shared_experts=1, shared_d_ff=shared) if experts
           else dict(kind="gated", d_ff=shared, activation=act))
    slots = [dict(mixer="mamba" if t in ("mamba", "linear_attention") else "attention", ffn="ffn") for t in types]
    bias = c["attention_bias"]
    return dict(
        vocab_size=c["vocab_size"], d_model=d, n_layers=n_layers, max_seq_len=c["max_position_embeddings"],
        tie_embeddings=c["tie_word_embeddings"], norm=dict(kind="rmsnorm", per_layer=2, final=True),
        positions=dict(kind="rope" if pos == "rope" else "none"),
        attention=dict(kind="gqa", heads=h, kv_heads=c["num_key_value_heads"] or h, head_dim=_div(d, h),
                       qkv_bias=bias, o_bias=bias),
        ffn=ffn,
        mixers={"mamba": dict(kind="mamba2", heads=heads, head_dim=head_dim, state_size=c["mamba_d_state"],
                              groups=c["mamba_n_groups"], conv_kernel=c["mamba_d_conv"], chunk_size=c["mamba_chunk_size"],
                              bias=c["mamba_proj_bias"], conv_bias=c["mamba_conv_bias"])},
        hybrid_pattern=_shortest_cycle(slots),
    )


def _lfm2(mt: str, c: dict) -> dict[str, Any]:
    """LFM2 (transformers' Lfm2ForCausalLM): each layer an RMSNorm, ONE mixer by layer_types (else full_attention at
    full_attn_idxs, every layer when those are absent): GQA attention with RoPE and per-head RMSNorms on q and k, or
    the gated short conv (llmcalc/model/short_conv.py, conv_L_cache taps, conv_bias on in_proj, conv and out_proj);
    an RMSNorm and a SwiGLU MLP; the final norm (embedding_norm, applied after the layers). Lfm2Config reads
    block_ff_dim and tie_embedding in place of intermediate_size and tie_word_embeddings when given; the MLP's width
    is, with block_auto_adjust_ff_dim, int(2·f / 3), times block_ffn_dim_multiplier (int) and rounded up to
    block_multiple_of."""
    d, h, n_layers = c["hidden_size"], c["num_attention_heads"], c["num_hidden_layers"]
    f = c.get("block_ff_dim") or c["intermediate_size"]
    if not isinstance(f, int) or isinstance(f, bool) or f < 1:
        raise UserError("config.json: block_ff_dim: give a whole number > 0")
    if c["block_auto_adjust_ff_dim"]:
        f = int(2 * f / 3)
        mult, multiple = c["block_ffn_dim_multiplier"], c["block_multiple_of"]
        if mult is not None:
            if type(mult) not in (int, float) or not 0 < mult <= MAX_SIZE or type(multiple) is not int or multiple < 1:
                raise UserError("config.json: block_ffn_dim_multiplier and block_multiple_of: give a number > 0 (at "
                                "most 2^40) and a whole number > 0")
            f = multiple * ceil_div(int(mult * f), multiple)
    tie = c.get("tie_embedding", c["tie_word_embeddings"])
    types = c["layer_types"]
    if types is None:
        full = c["full_attn_idxs"] if c["full_attn_idxs"] is not None else list(range(n_layers))
        if not (isinstance(full, list) and all(type(i) is int for i in full)):
            raise UserError("config.json: full_attn_idxs: give a list of layer indices")
        types = ["full_attention" if i in full else "conv" for i in range(n_layers)]
    if len(types) != n_layers or not set(types) <= {"full_attention", "conv"}:
        raise UserError(f"config.json: layer_types: give {n_layers} entries of full_attention or conv")
    slots = [dict(mixer="attention" if t == "full_attention" else "conv", ffn="ffn") for t in types]
    return dict(
        vocab_size=c["vocab_size"], d_model=d, n_layers=n_layers, max_seq_len=c["max_position_embeddings"],
        tie_embeddings=bool(tie), norm=dict(kind="rmsnorm", per_layer=2, final=True, qk_norm="head"),
        positions=dict(kind="rope"),
        attention=dict(kind="gqa", heads=h, kv_heads=c["num_key_value_heads"] or h,
                       head_dim=c.get("head_dim") or _div(d, h)),
        ffn=dict(kind="gated", d_ff=f, activation="silu"),
        mixers={"conv": dict(kind="short_conv", width=d, conv_kernel=c["conv_L_cache"], bias=bool(c["conv_bias"]))},
        hybrid_pattern=_shortest_cycle(slots),
    )


def _qwen3_next(mt: str, c: dict) -> dict[str, Any]:
    """Qwen3-Next: Gated DeltaNet layers and gated attention (q's projection doubled for the output gate, per-head
    q/k norms) by layer_types (else one attention layer every full_attention_interval), every FFN the MoE with a
    gated shared expert (mlp_only_layers and decoder_sparse_step give dense ones)."""
    d, h, n_layers = c["hidden_size"], c["num_attention_heads"], c["num_hidden_layers"]
    types = c["layer_types"] or ["full_attention" if (i + 1) % c["full_attention_interval"] == 0
                                 else "linear_attention" for i in range(n_layers)]
    if len(types) != n_layers or not set(types) <= {"full_attention", "linear_attention"}:
        raise UserError(f"config.json: layer_types: give {n_layers} entries of full_attention or linear_attention")
    only, step = set(c["mlp_only_layers"] or []), c["decoder_sparse_step"]
    slots = [dict(mixer="attention" if t == "full_attention" else "linear",
                  ffn="dense" if i in only or (i + 1) % step else "ffn") for i, t in enumerate(types)]
    if any(s["ffn"] == "dense" for s in slots):
        raise UserError("config.json: mlp_only_layers / decoder_sparse_step: dense FFN layers in a Qwen3-Next model "
                        "are not supported yet; give every layer the MoE")
    shared = c["shared_expert_intermediate_size"]
    return dict(
        vocab_size=c["vocab_size"], d_model=d, n_layers=n_layers, max_seq_len=c["max_position_embeddings"],
        tie_embeddings=c["tie_word_embeddings"], norm=dict(kind="rmsnorm", per_layer=2, final=True, qk_norm="head"),
        positions=dict(kind="rope"),
        attention=dict(kind="gqa", heads=h, kv_heads=c["num_key_value_heads"], head_dim=c["head_dim"],
                       qkv_bias=c["attention_bias"], o_bias=c["attention_bias"], output_gate=True),
        ffn=dict(kind="moe", experts=c["num_experts"], top_k=c["num_experts_per_tok"], d_ff=c["moe_intermediate_size"],
                 activation=_act(c["hidden_act"]), shared_experts=1 if shared else 0, shared_d_ff=shared,
                 shared_gate=bool(shared)),
        mixers={"linear": dict(kind="gated_deltanet", key_heads=c["linear_num_key_heads"],
                               value_heads=c["linear_num_value_heads"], key_head_dim=c["linear_key_head_dim"],
                               value_head_dim=c["linear_value_head_dim"], conv_kernel=c["linear_conv_kernel_dim"])},
        hybrid_pattern=_shortest_cycle(slots),
    )


def _llama4(mt: str, c: dict) -> dict[str, Any]:
    """Llama 4's language model as transformers 5.24 builds it (modeling_llama4.py, configuration_llama4.py):

    - layer_types (else from no_rope_layers: 1 marks a RoPE layer, default every no_rope_layer_interval-th layer
      NoPE): `chunked_attention` layers (the RoPE ones while attention_chunk_size is set) attend within aligned
      chunks (the `chunked` mixer, llmcalc/model/chunked_attention.py); `full_attention` layers (NoPE) over every
      earlier token. Their attention temperature tuning and the L2 q/k norm (use_qk_norm) hold no weights.
    - moe_layers (else every interleave_moe_layer_step-th layer, from layer step − 1): Llama4TextMoe, num_local_experts
      gated experts of intermediate_size, top num_experts_per_tok by a bias-free d→E router (sigmoid gates), one
      shared expert of intermediate_size; the other layers a gated MLP of intermediate_size_mlp.
    """
    d, n = c["hidden_size"], c["num_hidden_layers"]
    chunk, types = c["attention_chunk_size"], c["layer_types"]
    if types is None:
        rope = c["no_rope_layers"] or [int((i + 1) % c["no_rope_layer_interval"] != 0) for i in range(n)]
        if len(rope) < n or not set(rope) <= {0, 1}:
            raise UserError(f"config.json: no_rope_layers: give at least {n} entries of 1 (RoPE) or 0 (NoPE)")
        types = ["chunked_attention" if r and chunk is not None else "full_attention" for r in rope[:n]]
    if len(types) != n or not set(types) <= {"chunked_attention", "full_attention"}:
        raise UserError(f"config.json: layer_types: give {n} entries of chunked_attention or full_attention")
    if "chunked_attention" in types and not chunk:
        raise UserError("config.json: attention_chunk_size: layer_types has chunked layers; give the chunk (tokens)")
    step = c["interleave_moe_layer_step"]
    moe = set(c["moe_layers"] if c["moe_layers"] is not None else range(step - 1, n, step))
    act, heads = _act(c["hidden_act"]), c["num_attention_heads"]
    attention = dict(kind="gqa", heads=heads, kv_heads=c["num_key_value_heads"] or heads,
                     head_dim=c["head_dim"] or _div(d, heads), qkv_bias=c["attention_bias"], o_bias=c["attention_bias"])
    if moe & set(range(n)):
        ffn = dict(kind="moe", experts=c["num_local_experts"], top_k=c["num_experts_per_tok"],
                   d_ff=c["intermediate_size"], activation=act, shared_experts=1, shared_d_ff=c["intermediate_size"],
                   dense_d_ff=c["intermediate_size_mlp"] if len(moe & set(range(n))) < n else 0)
    else:
        ffn = dict(kind="gated", d_ff=c["intermediate_size_mlp"], activation=act)
    slots = [dict(mixer="chunked" if t == "chunked_attention" else "attention",
                  ffn="ffn" if i in moe or ffn["kind"] == "gated" else "dense") for i, t in enumerate(types)]
    uniform = all(s == dict(mixer="attention", ffn="ffn") for s in slots)
    return dict(
        vocab_size=c["vocab_size"], d_model=d, n_layers=n, max_seq_len=c["max_position_embeddings"],
        tie_embeddings=c["tie_word_embeddings"], norm=dict(kind="rmsnorm", per_layer=2, final=True),
        positions=dict(kind="rope"), attention=attention, ffn=ffn,
        **({} if uniform else dict(
            mixers={"chunked": attention | dict(kind="chunked", chunk=chunk)} if chunk and "chunked_attention" in types
            else {}, hybrid_pattern=_shortest_cycle(slots))),
    )


def _longcat_flash(mt: str, c: dict) -> dict[str, Any]:
    """LongCat-Flash as transformers 5.24 builds it (modeling_longcat_flash.py, configuration_longcat_flash.py). Each
    of its num_layers layers holds two sublayers, each an MLA block (q_lora_rank, kv_lora_rank, qk_nope / qk_rope /
    v head dims; attention_bias on q_a, kv_a and o) then a gated MLP of ffn_hidden_size, with RMSNorm before each;
    beside the first sublayer's MLP, on the same normed input, a shortcut MoE whose output joins at the layer's end
    (ScMoE). The spec has 2·num_layers layers (transformers' num_hidden_layers; its cache holds one MLA latent per
    sublayer) in the hybrid_pattern [ffn, dense]: the MoE's shared expert is the first MLP (a gated MLP on every
    token is what it costs, wherever its sum joins), the dense slot the second.

    The MoE: n_routed_experts gated experts of expert_ffn_hidden_size and zero_expert_num zero-computation
    (identity) experts, a router d → E + Z (a bias only with router_bias), moe_topk slots a token. How many slots
    land on real experts depends on the routing; the spec states the share of a balanced router, top_k =
    moe_topk · E / (E + Z) rounded half up (at least 1): 8 of 12 for LongCat-Flash-Chat, whose ~27B average
    active parameters it gives (docs/longcat.md). Its MTP layer is not built by transformers (model.mtp.* ignored).
    transformers allocates gate_up_proj for E + Z experts, the zero ones' rows never read; they are not counted."""
    for key in ("num_layers", "n_routed_experts", "moe_topk", "expert_ffn_hidden_size", "ffn_hidden_size",
                "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
        if type(c[key]) is not int or c[key] < 1:
            raise UserError(f"config.json: {key} is {_shown(c[key])}, not a whole number > 0; fix {key}")
    from llmcalc.model.spec import MAX_LAYERS

    if 2 * c["num_layers"] > MAX_LAYERS:
        raise UserError(f"config.json: num_layers: {c['num_layers']} layers of two sublayers each are more than "
                        f"{MAX_LAYERS:,} layers; give a smaller number")
    zero = c["zero_expert_num"] or 0
    if type(zero) is not int or zero < 0:
        raise UserError(f"config.json: zero_expert_num is {_shown(zero)}, not a whole number ≥ 0; "
                        "fix zero_expert_num")
    if type(c["router_bias"]) is not bool:
        raise UserError(f"config.json: router_bias is {_shown(c['router_bias'])}, not true or false; "
                        "fix router_bias")
    if c.get("num_hidden_layers") not in (None, 2 * c["num_layers"]):
        raise UserError(f"config.json: num_hidden_layers ({c['num_hidden_layers']}) is not 2 · num_layers "
                        f"({2 * c['num_layers']}): LongCat-Flash derives it; drop num_hidden_layers")
    nope, rope = c["qk_nope_head_dim"], c["qk_rope_head_dim"]
    if c["qk_head_dim"] not in (None, nope + rope):
        raise UserError(f"config.json: qk_head_dim ({c['qk_head_dim']}) is not qk_nope_head_dim + qk_rope_head_dim "
                        f"({nope + rope}); drop qk_head_dim")
    experts, slots = c["n_routed_experts"], c["moe_topk"]
    if slots > experts + zero:
        raise UserError(f"config.json: moe_topk ({slots}) exceeds n_routed_experts + zero_expert_num "
                        f"({experts + zero}); lower moe_topk")
    real = max(1, (2 * slots * experts + experts + zero) // (2 * (experts + zero)))  # balanced share, half up
    d, f, act = _get(c, "hidden_size"), c["ffn_hidden_size"], _act(c["hidden_act"])
    ffn = dict(kind="moe", experts=experts, top_k=real, d_ff=c["expert_ffn_hidden_size"], activation=act,
               router_bias=c["router_bias"], shared_experts=1, shared_d_ff=f, dense_d_ff=f)
    if zero:
        ffn |= dict(zero_experts=zero, router_top_k=slots)
    return dict(
        vocab_size=_get(c, "vocab_size"), d_model=d, n_layers=2 * c["num_layers"],
        max_seq_len=_get(c, "max_position_embeddings"), tie_embeddings=c["tie_word_embeddings"],
        norm=dict(kind="rmsnorm", per_layer=2, final=True), positions=dict(kind="rope"),
        attention=dict(kind="mla", heads=_get(c, "num_attention_heads"), q_lora_rank=c["q_lora_rank"],
                       kv_lora_rank=c["kv_lora_rank"], qk_nope_head_dim=nope, qk_rope_head_dim=rope,
                       v_head_dim=c["v_head_dim"], bias=c["attention_bias"]),
        ffn=ffn, hybrid_pattern=[dict(mixer="attention", ffn="ffn"), dict(mixer="attention", ffn="dense")],
    )


def _minimax(mt: str, c: dict) -> dict[str, Any]:
    """MiniMax-Text-01 / MiniMax-M1 (transformers 5.24's MiniMaxForCausalLM): lightning attention on the
    `linear_attention` layers of layer_types and GQA softmax attention (RoPE over the whole head, no biases) on the
    `full_attention` ones (default: full on even layers, linear on odd, MiniMaxConfig.__post_init__), every FFN a
    top-k MoE of gated experts with a bias-free router. RMSNorm before the mixer and the FFN and at the end; the
    residual scalings (*_alpha_factor, *_beta_factor) are element-wise and add nothing counted. The lightning
    layers use num_attention_heads and head_dim (else hidden_size / heads), not num_key_value_heads."""
    d, h, n_layers = c["hidden_size"], c["num_attention_heads"], c["num_hidden_layers"]
    block = c["block_size"]
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise UserError(f"config.json: block_size: {block!r} is not a whole number > 0; give the lightning blocks' "
                        "length (256 in MiniMax-Text-01)")
    if c["sliding_window"] is not None:
        raise UserError("config.json: sliding_window: a sliding window on MiniMax's softmax layers is not modelled; "
                        "set it to null")
    if c.get("attn_type_list") is not None and c["layer_types"] is None:
        raise UserError("config.json: attn_type_list: transformers' MiniMaxConfig does not read it (it alternates "
                        "full and linear layers instead); give layer_types")
    types = c["layer_types"] or ["full_attention" if (i + 1) % 2 else "linear_attention" for i in range(n_layers)]
    if len(types) != n_layers or not set(types) <= {"full_attention", "linear_attention"}:
        raise UserError(f"config.json: layer_types: give {n_layers} entries of full_attention or linear_attention")
    head_dim = c["head_dim"] or _div(d, h)
    slots = [dict(mixer="attention" if t == "full_attention" else "linear", ffn="ffn") for t in types]
    return dict(
        vocab_size=c["vocab_size"], d_model=d, n_layers=n_layers, max_seq_len=c["max_position_embeddings"],
        tie_embeddings=c["tie_word_embeddings"], norm=dict(kind="rmsnorm", per_layer=2, final=True),
        positions=dict(kind="rope"),
        attention=dict(kind="gqa", heads=h, kv_heads=c["num_key_value_heads"] or h, head_dim=head_dim),
        ffn=dict(kind="moe", experts=c["num_local_experts"], top_k=c["num_experts_per_tok"],
                 d_ff=c["intermediate_size"], activation=_act(c["hidden_act"])),
        mixers={"linear": dict(kind="lightning", heads=h, head_dim=head_dim, chunk_size=block)},
        hybrid_pattern=_shortest_cycle(slots),
    )


def _text_2026(mt: str, c: dict) -> dict[str, Any]:
    """Text decoders and MoEs of 2025–26, as transformers 5.24 builds them (modeling_<type>.py):

    - starcoder2: LayerNorms with biases, biases on q/k/v/o and on a plain (not gated) MLP (use_bias), every layer
      sliding when sliding_window is set (Mistral's attention).
    - cohere2: one weight-only LayerNorm per layer feeding attention and MLP side by side (a parallel block), a tied
      head, head_dim = hidden_size / heads whatever the file says, sliding layers by layer_types (else three of
      every sliding_window_pattern, 4); the full layers' missing RoPE and logit_scale hold no weights.
    - olmoe: OLMo-2's q/k norms over all q and all k heads, a routed MoE without shared experts; clip_qkv clamps.
    - glm4_moe: biased q/k/v (attention_bias), an unbiased o; first_k_dense_replace dense layers of
      intermediate_size, then routed experts plus n_shared_experts fused into one shared MLP; per-head q/k norms
      with use_qk_norm; partial rotary needs no weights. Its next-token (MTP) layer is not built by transformers and
      is left out here too.
    - minimax_m2: q/k norms over all heads (q: H·h, k: H_kv·h), every layer the routed MoE; partial rotary; its MTP
      modules are not built by transformers.
    - dbrx: attn_config / ffn_config nested; a fused unbiased Wqkv of the same shapes as q, k, v; weight-only
      LayerNorms; gated experts (w1, v1, w2) of ffn_hidden_size; clip_qkv clamps.
    - exaone4: norms after attention and after the MLP (two a layer, as many as pre-norm), per-head q/k norms,
      sliding layers by layer_types (else sliding_window_pattern; none without sliding_window).
    - seed_oss: biased q/k/v (attention_bias), o by attention_out_bias, MLP by mlp_bias.
    - smollm3: Llama's layers; the layers without RoPE (no_rope_layers) hold no other weights, and slide only with
      use_sliding_window.
    - olmo3: OLMo-2's layers (norms after each block, q/k norms over all heads), three sliding layers in four.
    - ernie4_5_moe: use_bias on q/k/v/o, on the dense and shared MLPs and on the LM head, not on the experts (so only
      false is read); the MoE layers are every moe_layer_interval-th from moe_layer_start_index to
      moe_layer_end_index, which must be the last layers (the first ones dense, of intermediate_size); the shared
      experts are one MLP of moe_num_shared_experts · moe_intermediate_size; each MoE layer's
      e_score_correction_bias is a parameter of one value per expert, counted as the router's bias.
    - hunyuan_v1_moe: per-head q/k norms, every layer num_experts experts of intermediate_size (transformers
      5.24 reads neither moe_intermediate_size nor num_shared_expert) plus one shared MLP of intermediate_size;
      moe_topk may be a list per layer, of one value.
    - apertus: per-head q/k norms, a plain (not gated) MLP without biases, whose xIELU activation (the default
      and the published models') holds two learned scalars per layer (llmcalc/model/ffn.py XIELU_PARAMS)."""
    if mt == "dbrx":
        return _dbrx(c)
    d, h, n_layers = c["hidden_size"], c["num_attention_heads"], c["num_hidden_layers"]
    kv = c.get("num_key_value_heads") or h
    head_dim = _div(d, h) if mt == "cohere2" else c.get("head_dim") or _div(d, h)
    bias = c.get("attention_bias", False)
    attention = dict(kind="gqa", heads=h, kv_heads=kv, head_dim=head_dim, qkv_bias=bias, o_bias=bias)
    norm = dict(kind="rmsnorm", per_layer=2, final=True)
    act = "xielu" if mt == "apertus" and c["hidden_act"] == "xielu" else _act(c["hidden_act"])
    ffn: dict[str, Any] = dict(kind="gated", d_ff=c["intermediate_size"], activation=act, bias=c.get("mlp_bias", False))
    if mt == "starcoder2":
        attention |= dict(qkv_bias=c["use_bias"], o_bias=c["use_bias"])
        norm = dict(kind="layernorm", bias=True, per_layer=2, final=True)
        ffn = dict(kind="dense", d_ff=c["intermediate_size"], activation=act, bias=c["use_bias"])
    elif mt == "cohere2":
        norm = dict(kind="layernorm", bias=False, per_layer=1, final=True)
        ffn["bias"] = False
    elif mt in ("olmoe", "olmo3", "minimax_m2"):
        norm["qk_norm"] = "full"
    elif mt in ("exaone4", "hunyuan_v1_moe", "apertus") or (mt == "glm4_moe" and c["use_qk_norm"]):
        norm["qk_norm"] = "head"
    if mt == "olmoe":
        ffn = dict(kind="moe", experts=c["num_experts"], top_k=c["num_experts_per_tok"], d_ff=c["intermediate_size"],
                   activation=act)
    elif mt == "minimax_m2":
        ffn = dict(kind="moe", experts=c["num_local_experts"], top_k=c["num_experts_per_tok"],
                   d_ff=c["intermediate_size"], activation=act)
    elif mt == "glm4_moe":
        attention["o_bias"] = False
        n_shared, moe_ff = c["n_shared_experts"] or 0, c["moe_intermediate_size"]
        dense = min(c["first_k_dense_replace"], n_layers)
        ffn = dict(kind="moe", experts=c["n_routed_experts"], top_k=c["num_experts_per_tok"], d_ff=moe_ff,
                   activation=act, shared_experts=1 if n_shared else 0, shared_d_ff=n_shared * moe_ff,
                   dense_layers=dense, dense_d_ff=c["intermediate_size"] if dense else 0)
    elif mt == "seed_oss":
        attention["o_bias"] = c["attention_out_bias"]
    elif mt == "apertus":
        ffn = dict(kind="dense", d_ff=c["intermediate_size"], activation=act)
    elif mt == "ernie4_5_moe":
        ffn = _ernie_moe(c, n_layers, act)
        attention |= dict(qkv_bias=False, o_bias=False)
    elif mt == "hunyuan_v1_moe":
        top_k = c["moe_topk"]
        if isinstance(top_k, list) and top_k and all(type(k) is int for k in top_k) and len(set(top_k)) == 1:
            top_k = top_k[0]
        if type(top_k) is not int or top_k < 1:
            raise UserError(f"config.json: moe_topk is {_shown(c['moe_topk'])}, not a whole number > 0 (or a list "
                            "of one such value per layer); fix moe_topk")
        if type(c["num_experts"]) is not int or c["num_experts"] < 1:
            raise UserError("config.json: num_experts: give one whole number > 0 (transformers 5.24 builds every "
                            "layer with the same experts)")
        ffn = dict(kind="moe", experts=c["num_experts"], top_k=top_k, d_ff=c["intermediate_size"], activation=act,
                   shared_experts=1, shared_d_ff=c["intermediate_size"])
    window, pattern = _layers_2026(mt, c, n_layers)
    return dict(vocab_size=c["vocab_size"], d_model=d, n_layers=n_layers, max_seq_len=c["max_position_embeddings"],
                tie_embeddings=c["tie_word_embeddings"], norm=norm, positions=dict(kind="rope"), attention=attention,
                ffn=ffn, sliding_window=window, layer_pattern=pattern)


def _ernie_moe(c: dict, n_layers: int, act: str) -> dict[str, Any]:
    """ERNIE 4.5's FFN (see _text_2026): the MoE from the first MoE layer on, the layers before it dense."""
    if c["use_bias"]:
        raise UserError("config.json: use_bias: ERNIE 4.5 then biases its dense and shared MLPs and its head but not "
                        "its experts, which llmcalc's MoE cannot express; write a llmcalc spec")
    end = c["moe_layer_end_index"]
    if type(end) is not int or end < -1:
        raise UserError(f"config.json: moe_layer_end_index is {_shown(end)}, not a layer index (or -1 for the "
                        "last layer); fix moe_layer_end_index")
    end = n_layers - 1 if end == -1 else end
    start, every = c["moe_layer_start_index"], c["moe_layer_interval"]
    moe = [i for i in range(n_layers) if (i + 1) % every == 0 and start <= i <= end]
    if not moe:
        return dict(kind="gated", d_ff=c["intermediate_size"], activation=act)
    if moe != list(range(moe[0], n_layers)):
        raise UserError("config.json: moe_layer_start_index / moe_layer_end_index / moe_layer_interval: only MoE "
                        "layers that run from one layer to the last are supported (dense layers first); fix them or "
                        "write a llmcalc spec")
    shared, moe_ff = c["moe_num_shared_experts"] or 0, c["moe_intermediate_size"]
    return dict(kind="moe", experts=c["moe_num_experts"], top_k=c["moe_k"], d_ff=moe_ff, activation=act,
                router_bias=True, shared_experts=1 if shared else 0, shared_d_ff=shared * moe_ff,
                dense_layers=moe[0], dense_d_ff=c["intermediate_size"] if moe[0] else 0)


def _layers_2026(mt: str, c: dict, n_layers: int) -> tuple[int | None, list[str]]:
    """The sliding window and the per-layer kinds of a _text_2026 model, as its config class derives them."""
    window, types = c.get("sliding_window"), c.get("layer_types")
    if mt == "starcoder2":  # Mistral's attention: every layer slides when a window is set
        types = None
    elif mt == "smollm3" and types is None:
        no_rope = c["no_rope_layers"]
        if no_rope is None:
            no_rope = [int((i + 1) % c["no_rope_layer_interval"] != 0) for i in range(n_layers)]
        if len(no_rope) != n_layers:
            raise UserError(f"config.json: no_rope_layers has {len(no_rope)} entries for {n_layers} layers; fix it")
        slide = c["use_sliding_window"] and window is not None
        types = ["sliding_attention" if slide and not rope else "full_attention" for rope in no_rope]
    elif mt in ("cohere2", "exaone4") and types is None and window:
        every = c.get("sliding_window_pattern") or 4
        types = ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(n_layers)]
    elif mt == "olmo3" and types is None:
        types = ["sliding_attention" if (i + 1) % 4 else "full_attention" for i in range(n_layers)]
    if types is None:
        kinds = ["sliding" if window else "full"] * n_layers
    else:
        if len(types) != n_layers or not set(types) <= {"sliding_attention", "full_attention"}:
            raise UserError(f"config.json: layer_types: give {n_layers} entries of sliding_attention or "
                            "full_attention")
        kinds = ["sliding" if t == "sliding_attention" else "full" for t in types]
    if "sliding" not in kinds:
        return None, ["full"]
    if not window:
        raise UserError("config.json: sliding_window: layer_types has sliding layers; give the window (tokens)")
    return window, _shortest_cycle(kinds)


def _exaone4_pattern(raw: dict) -> dict:
    """EXAONE 4's sliding_window_pattern, read before the field checks: a whole number (every n-th layer full; 4
    when absent). A string ("LLLG", in the 32B's file) is what transformers 5.24 cannot compute with, so its layer_types
    must be given; without sliding_window every layer is full."""
    pattern = raw.get("sliding_window_pattern", 4)
    rest = {k: v for k, v in raw.items() if k != "sliding_window_pattern"}
    if raw.get("layer_types") is not None or not raw.get("sliding_window", 4096):
        return rest
    if type(pattern) is not int or pattern < 1:
        raise UserError(f"config.json: sliding_window_pattern is {_shown(pattern)}, not a whole number > 0; give "
                        "it as one (4: three sliding layers, then a full one) or give layer_types")
    return rest | {"sliding_window_pattern": pattern}


def _dbrx(c: dict) -> dict[str, Any]:
    """DBRX (see _text_2026): the attention's and the experts' fields live in attn_config and ffn_config, with the
    defaults of DbrxAttentionConfig and DbrxFFNConfig."""
    a = dict(kv_n_heads=1) | {k: v for k, v in (c["attn_config"] or {}).items() if v is not None}
    f = dict(ffn_hidden_size=3584, moe_num_experts=4, moe_top_k=1, ffn_act_fn={"name": "silu"}) | {
        k: v for k, v in (c["ffn_config"] or {}).items() if v is not None}
    _check_fields(a, "attn_config.")
    _check_fields(f, "ffn_config.")
    act = f["ffn_act_fn"].get("name", "silu") if isinstance(f["ffn_act_fn"], dict) else None
    if not isinstance(act, str):
        raise UserError("config.json: ffn_config.ffn_act_fn: give an object such as {\"name\": \"silu\"}")
    d, h = c["d_model"], c["n_heads"]
    return dict(
        vocab_size=c["vocab_size"], d_model=d, n_layers=c["n_layers"], max_seq_len=c["max_seq_len"],
        tie_embeddings=c["tie_word_embeddings"], norm=dict(kind="layernorm", bias=False, per_layer=2, final=True),
        positions=dict(kind="rope"),
        attention=dict(kind="gqa", heads=h, kv_heads=a["kv_n_heads"], head_dim=_div(d, h)),
        ffn=dict(kind="moe", experts=f["moe_num_experts"], top_k=f["moe_top_k"], d_ff=f["ffn_hidden_size"],
                 activation=_act(act)),
    )


GENERIC_REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
"""The fields a config.json of an unknown model_type must hold to be read as a plain decoder (`--hf-generic`)."""
GENERIC_ASSUMED = dict(num_key_value_heads=None, head_dim=None, max_position_embeddings=4096,
                       tie_word_embeddings=False, hidden_act="silu", attention_bias=False, mlp_bias=False)
"""The optional fields and what a best-effort import takes when one is absent: no GQA, hidden_size / heads per
head, transformers' LlamaConfig values otherwise (a 4,096-token context where none is named); the output
projection's bias follows attention_bias unless `attention_out_bias` is given."""
GENERIC_SHAPE = "RMSNorm before attention and FFN and at the end, RoPE, full attention in every layer, gated FFN"
"""What a best-effort import assumes of every unknown model: the llama block."""
_GENERIC_REFUSED = ("num_experts", "num_local_experts", "n_routed_experts", "moe_intermediate_size", "kv_lora_rank",
                    "num_nextn_predict_layers", "ssm_state_size", "mamba_d_state", "cross_attention_layers",
                    "encoder_layers", "is_encoder_decoder", "linear_num_key_heads", "text_config")
"""Fields that say a model is not a plain decoder (experts, MLA, state-space or linear-attention layers, cross
attention, an encoder, a nested language model): a best-effort import refuses them rather than guess."""


def _generic(mt: str, raw: dict) -> tuple[dict[str, Any], list[str]]:
    """An unknown model_type with the common decoder fields, read as llama: the spec, and what was assumed."""
    for key in _GENERIC_REFUSED:
        if raw.get(key) not in (None, False, 0, [], {}):
            raise UserError(f"config.json: {key}: model_type {mt!r} is not a plain decoder, which is all "
                            "`hf_generic` reads; write a llmcalc spec YAML and pass it as `config`")
    missing = [k for k in GENERIC_REQUIRED if raw.get(k) is None]
    if missing:
        raise UserError(f"config.json: missing {', '.join(missing)}; `hf_generic` needs "
                        f"{', '.join(GENERIC_REQUIRED)} (or write a llmcalc spec YAML and pass it as `config`)")
    absent = [k for k in GENERIC_ASSUMED if raw.get(k) is None]
    c = GENERIC_ASSUMED | {k: v for k, v in raw.items() if v is not None}
    c["sliding_window"] = c["layer_types"] = None
    ignored = [k for k in ("sliding_window", "layer_types", "rope_scaling", "partial_rotary_factor")
               if raw.get(k) is not None]
    assumed = [f"model_type {mt!r} read as llama: {GENERIC_SHAPE}"]
    taken = {"head_dim": "hidden_size / num_attention_heads", "num_key_value_heads": "num_attention_heads"}
    assumed += [f"{k} absent: {taken.get(k, json.dumps(GENERIC_ASSUMED[k]))}" for k in absent]
    assumed += [f"{k} ignored" for k in ignored]
    spec = _decoder("llama", c)
    out_bias = raw.get("attention_out_bias")  # o_proj's own bias flag where a config has one (Seed-OSS)
    if out_bias is not None and type(out_bias) is not bool:
        raise UserError(f"config.json: attention_out_bias is {_shown(out_bias)}, not true or false; fix it")
    if out_bias is not None:
        spec["attention"]["o_bias"] = out_bias
    elif c["attention_bias"]:
        assumed.append("attention_out_bias absent: as attention_bias")
    return spec, assumed


def _glm4v_text(mt: str, c: dict) -> dict[str, Any]:
    """GLM-4V's language model (transformers' Glm4vTextModel): four RMSNorms a layer (before and after attention and
    the MLP), biases on q, k and v (not o), a SwiGLU MLP with gate and up fused, partial rotary positions (M-RoPE,
    element-wise)."""
    d, h = c["hidden_size"], c["num_attention_heads"]
    return dict(
        vocab_size=c["vocab_size"], d_model=d, n_layers=c["num_hidden_layers"],
        max_seq_len=c["max_position_embeddings"], tie_embeddings=c["tie_word_embeddings"],
        norm=dict(kind="rmsnorm", per_layer=4, final=True), positions=dict(kind="rope"),
        attention=dict(kind="gqa", heads=h, kv_heads=c["num_key_value_heads"] or h, head_dim=_div(d, h),
                       qkv_bias=True, o_bias=False),
        ffn=dict(kind="gated", d_ff=c["intermediate_size"], activation=_act(c["hidden_act"])),
    )


def _decoder(mt: str, c: dict) -> dict[str, Any]:
    """Llama-shaped decoders: llama, mistral, mixtral, qwen*, deepseek*, gemma*, phi3, olmo2, gpt_oss."""
    d, h, n_layers = _get(c, "hidden_size"), _get(c, "num_attention_heads"), _get(c, "num_hidden_layers")
    window, pattern = _layer_pattern(mt, c, n_layers)
    gemma = mt.startswith("gemma")
    spec = dict(
        vocab_size=_get(c, "vocab_size"), d_model=d, n_layers=n_layers,
        max_seq_len=_get(c, "max_position_embeddings"), tie_embeddings=c["tie_word_embeddings"],
        norm=dict(kind="rmsnorm", per_layer=4 if mt in ("gemma2", "gemma3_text") else 2, final=True,
                  qk_norm={"qwen3": "head", "qwen3_moe": "head", "gemma3_text": "head", "olmo2": "full"}.get(mt, "none")),
        positions=dict(kind="rope"),
        attention=_attention(mt, c, d, h),
        ffn=_ffn(mt, c, n_layers),
        sliding_window=window,
        layer_pattern=pattern,
    )
    if gemma:  # transformers reads hidden_activation first and treats a legacy "gelu" as the tanh form
        act = c.get("hidden_activation") or c["hidden_act"]
        spec["ffn"]["activation"] = "gelu_tanh" if act == "gelu" else _act(act)
    if mt in ("deepseek_v3", "deepseek_v32"):
        spec["mtp_modules"] = c.get("num_nextn_predict_layers", 0)
    return spec


def _attention(mt: str, c: dict, d: int, h: int) -> dict[str, Any]:
    if mt.startswith("deepseek"):
        mla = dict(kind="mla", heads=h, q_lora_rank=c["q_lora_rank"], kv_lora_rank=c["kv_lora_rank"],
                   qk_nope_head_dim=c["qk_nope_head_dim"], qk_rope_head_dim=c["qk_rope_head_dim"],
                   v_head_dim=c["v_head_dim"], bias=c["attention_bias"])
        if mt == "deepseek_v32":  # DeepSeek Sparse Attention: MLA plus the lightning indexer
            mla |= dict(kind="dsa", index_heads=c["index_n_heads"], index_head_dim=c["index_head_dim"],
                        index_topk=c["index_topk"])
        return mla
    head_dim = c.get("head_dim") or _div(d, h)
    kv = c.get("num_key_value_heads") or h
    if mt in ("qwen2", "qwen2_moe"):
        qkv_bias, o_bias = c.get("qkv_bias", True), False
    elif mt in ("mistral", "mixtral", "phi3"):
        qkv_bias = o_bias = False
    else:
        qkv_bias = o_bias = c.get("attention_bias", False)
    return dict(kind="gqa", heads=h, kv_heads=kv, head_dim=head_dim, qkv_bias=qkv_bias, o_bias=o_bias,
                sinks=mt == "gpt_oss")


def _ffn(mt: str, c: dict, n_layers: int) -> dict[str, Any]:
    act = _act(c["hidden_act"])
    bias = c.get("mlp_bias", False) if mt == "llama" else False
    if mt == "mixtral" or mt == "gpt_oss":
        return dict(kind="moe", experts=c["num_local_experts"], top_k=c["num_experts_per_tok"],
                    d_ff=c["intermediate_size"], activation=act, expert_bias=mt == "gpt_oss",
                    router_bias=mt == "gpt_oss")
    if mt in ("qwen2_moe", "qwen3_moe"):
        step, only = c["decoder_sparse_step"], set(c["mlp_only_layers"] or [])
        dense = sum(1 for i in range(n_layers) if i in only or (i + 1) % step)
        shared = c.get("shared_expert_intermediate_size", 0) if mt == "qwen2_moe" else 0
        return dict(kind="moe", experts=c["num_experts"], top_k=c["num_experts_per_tok"],
                    d_ff=c["moe_intermediate_size"], activation=act, shared_experts=1 if shared else 0,
                    shared_d_ff=shared, shared_gate=bool(shared), dense_layers=dense,
                    dense_d_ff=c["intermediate_size"] if dense else 0)
    if mt.startswith("deepseek"):
        if c.get("n_routed_experts") is None:
            return dict(kind="gated", d_ff=c["intermediate_size"], activation=act, bias=bias)
        dense = min(c["first_k_dense_replace"], n_layers)
        top_k = c["num_experts_per_tok"]
        if top_k is None:
            raise UserError("config.json: num_experts_per_tok is missing for a MoE model; add it")
        n_shared = c.get("n_shared_experts") or 0
        return dict(kind="moe", experts=c["n_routed_experts"], top_k=top_k, d_ff=c["moe_intermediate_size"],
                    activation=act, shared_experts=1 if n_shared else 0,
                    shared_d_ff=n_shared * (c["moe_intermediate_size"] or 0), dense_layers=dense,
                    dense_d_ff=c["intermediate_size"] if dense else 0)
    return dict(kind="gated", d_ff=c["intermediate_size"], activation=act, bias=bias)


def _layer_pattern(mt: str, c: dict, n_layers: int) -> tuple[int | None, list[str]]:
    """The sliding window and the per-layer kinds, as transformers derives them for `mt`."""
    window = c.get("sliding_window")
    if mt in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe") and not c.get("use_sliding_window"):
        window = None
    if mt in ("llama", "olmo2", "gemma", "deepseek_v2", "deepseek_v3", "deepseek_v32"):
        window = None
    types = c.get("layer_types")
    if types is None:
        if not window:
            types = ["full"] * n_layers
        elif mt in ("gemma2", "gpt_oss"):
            types = ["sliding" if (i + 1) % 2 else "full" for i in range(n_layers)]
        elif mt == "gemma3_text":
            every = c.get("sliding_window_pattern", 6)
            types = ["sliding" if (i + 1) % every else "full" for i in range(n_layers)]
        elif mt in ("qwen2", "qwen3", "qwen3_moe"):
            types = ["sliding" if i >= c["max_window_layers"] else "full" for i in range(n_layers)]
        elif mt == "qwen2_moe":
            types = ["sliding" if (i + 1) % 2 and i < c["max_window_layers"] else "full" for i in range(n_layers)]
        else:  # mistral, mixtral, phi3: every layer slides
            types = ["sliding"] * n_layers
    kinds = ["sliding" if t == "sliding_attention" or t == "sliding" else "full" for t in types]
    if len(kinds) != n_layers:
        raise UserError(f"config.json: layer_types has {len(kinds)} entries for {n_layers} layers; fix layer_types")
    if "sliding" not in kinds or not window:
        return None, ["full"]
    return window, _shortest_cycle(kinds)


def _shortest_cycle(kinds: list[str]) -> list[str]:
    """The shortest prefix that, repeated, gives `kinds` (the whole list if none does): the smallest
    period, n − (longest proper border), from the prefix function in O(n)."""
    border = [0] * len(kinds)
    for i in range(1, len(kinds)):
        k = border[i - 1]
        while k and kinds[i] != kinds[k]:
            k = border[k - 1]
        border[i] = k + (kinds[i] == kinds[k])
    return kinds[:len(kinds) - border[-1]] if kinds else kinds


def _div(d: int, h: int) -> int:
    if d % h:
        raise UserError(f"config.json: hidden_size {d} is not divisible by {h} heads; set head_dim explicitly")
    return d // h


def _act(name: str) -> str:
    if name not in _ACT:
        raise UserError(f"config.json: activation {name!r} is not supported; use one of {', '.join(sorted(_ACT))}")
    return _ACT[name]


def _gemma3n_widths(raw: dict) -> dict:
    """Gemma 3n's intermediate_size (its text_config's for model_type gemma3n), read before the field checks: one
    width, or a list of one per layer (Gemma3nTextConfig's form; a MatFormer slice mixes widths per layer): the
    largest as intermediate_size, the list as ffn_widths when the widths differ."""
    text = raw.get("text_config") if raw.get("model_type") == "gemma3n" else raw
    if not isinstance(text, dict) or not isinstance(text.get("intermediate_size"), list):
        return raw
    at = "text_config." if text is not raw else ""
    widths, layers = text["intermediate_size"], text.get("num_hidden_layers", 35)
    if not widths or any(type(f) is not int or f < 1 for f in widths) or (
            type(layers) is int and len(widths) != layers):
        raise UserError(f"config.json: {at}intermediate_size: give one whole number > 0, or a list of one per layer "
                        f"({layers!r} layers)")
    text = text | {"intermediate_size": max(widths)} | ({"ffn_widths": widths} if len(set(widths)) > 1 else {})
    return raw | {"text_config": text} if at else text


def _gemma3n_int(c: dict, key: str, least: int = 1) -> int:
    v = c[key]
    if type(v) is not int or v < least:
        raise UserError(f"config.json: {key}: {_shown(v)} is not a whole number ≥ {least}; give the "
                        "Gemma3nTextConfig value")
    return v


def _gemma3n_text(mt: str, c: dict) -> dict[str, Any]:
    """Gemma 3n's language model as transformers 5.24's Gemma3nForCausalLM builds it (docs/gemma3n.md): Gemma 3's
    decoder (GQA without biases, per-head q/k norms, a weightless v norm, four norms a layer, a tied head scaled
    embeddings, final logit softcapping: element-wise) with per-layer embeddings, AltUp, LAuReL and the last
    num_kv_shared_layers layers reading an earlier layer's K/V (llmcalc/model/gemma3n.py). layer_types defaults to
    four sliding layers then a full one. activation_sparsity_pattern (one share per layer, default 0.95 on the first
    10 of more than 10 layers) changes no matmul."""
    d, h, n_layers = _get(c, "hidden_size"), _get(c, "num_attention_heads"), _get(c, "num_hidden_layers")
    if c["layer_types"] is None:
        c = c | {"layer_types": ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention"
                                 for i in range(n_layers)]}
    types = c["layer_types"]
    if len(types) != n_layers or not set(types) <= {"full_attention", "sliding_attention"}:
        raise UserError(f"config.json: layer_types: give {n_layers} entries of sliding_attention or full_attention")
    window, pattern = _layer_pattern(mt, c, n_layers)
    if d % h:  # Gemma3nTextConfig.validate_architecture
        raise UserError(f"config.json: hidden_size {d} is not a multiple of num_attention_heads {h}; fix either")
    n = _gemma3n_int(c, "altup_num_inputs")
    active = c["altup_active_idx"]
    if type(active) is not int or not 0 <= active < n:
        raise UserError(f"config.json: altup_active_idx: {active!r} is not a stream index below altup_num_inputs {n}")
    shared = _gemma3n_int(c, "num_kv_shared_layers", 0)
    sparsity = c["activation_sparsity_pattern"]
    if sparsity is not None and (not isinstance(sparsity, list) or len(sparsity) != n_layers or any(
            isinstance(x, bool) or not isinstance(x, int | float) or not 0 <= x < 1 for x in sparsity)):
        raise UserError(f"config.json: activation_sparsity_pattern: give {n_layers} shares in [0, 1), one per layer")
    act = c.get("hidden_activation") or "gelu_pytorch_tanh"
    return dict(
        vocab_size=_get(c, "vocab_size"), d_model=d, n_layers=n_layers, max_seq_len=_get(c, "max_position_embeddings"),
        tie_embeddings=c["tie_word_embeddings"],
        norm=dict(kind="rmsnorm", per_layer=4, final=True, qk_norm="head"),
        positions=dict(kind="rope"),
        attention=dict(kind="gemma3n", heads=h, kv_heads=c["num_key_value_heads"] or h,
                       head_dim=c["head_dim"] or d // h, qkv_bias=c["attention_bias"], o_bias=c["attention_bias"]),
        ffn=dict(kind="gated", d_ff=c["intermediate_size"], activation="gelu_tanh" if act == "gelu" else _act(act)),
        sliding_window=window, layer_pattern=pattern,
        stack=dict(kind="gemma3n", altup_inputs=n, laurel_rank=_gemma3n_int(c, "laurel_rank"),
                   per_layer_width=_gemma3n_int(c, "hidden_size_per_layer_input"),
                   per_layer_vocab=_gemma3n_int(c, "vocab_size_per_layer_input"), kv_shared_layers=shared,
                   ffn_widths=c.get("ffn_widths")),
    )
