"""Hugging Face T5 (encoder-decoder) from a config, sequence-to-sequence loss."""
# zoo-modules: T5ForConditionalGeneration encoder.block.0 decoder.block.1 lm_head
import _hf

_hf.train("T5Config", "T5ForConditionalGeneration",
          dict(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4,
               decoder_start_token_id=0, pad_token_id=0),
          seq2seq=True)
