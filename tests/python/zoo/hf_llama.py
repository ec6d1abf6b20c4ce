"""Hugging Face Llama from a config (grouped-query attention) with gradient checkpointing and bf16 autocast."""
# zoo-modules: LlamaForCausalLM model.layers.0.self_attn model.layers.1.mlp lm_head
import _hf

_hf.train("LlamaConfig", "LlamaForCausalLM",
          dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=64),
          checkpointing=True, bf16=True)
