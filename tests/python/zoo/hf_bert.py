"""Hugging Face BERT from a config, masked-language-model loss."""
# zoo-modules: BertForMaskedLM bert.encoder.layer.0 bert.encoder.layer.1
import _hf

_hf.train("BertConfig", "BertForMaskedLM",
          dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
               max_position_embeddings=64))
