"""Hugging Face GPT-2 (2 layers, 64 wide) from a config, language-model loss, AdamW."""
# zoo-modules: GPT2LMHeadModel transformer.h.0.attn transformer.h.1.mlp lm_head
import _hf

_hf.train("GPT2Config", "GPT2LMHeadModel", _hf.GPT2)
