"""Hugging Face Mixtral (mixture of experts: 4 experts, 2 per token) from a config, with the router's
auxiliary loss."""
# zoo-modules: MixtralForCausalLM model.layers.0.self_attn model.layers.1 lm_head
import _hf

_hf.train("MixtralConfig", "MixtralForCausalLM",
          dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=64, num_local_experts=4, num_experts_per_tok=2,
               output_router_logits=True))
