"""Hugging Face GPT-2 (2 layers, 64 wide) from a config generating 24 tokens greedily with its KV cache under
torch.inference_mode(): the tokens, and on CUDA memory_stats(), reserved peak and segments included."""
# zoo: both
# zoo-modules: GPT2LMHeadModel transformer.h.0.attn lm_head
import _hf
import _zoo

device = _zoo.setup()
try:
    import transformers
except ImportError:
    _zoo.skip("transformers is not installed")
import torch

with _zoo.recording():
    config = transformers.GPT2Config(vocab_size=_hf.VOCAB, n_layer=2, n_embd=64, n_head=4, n_positions=64)
    config._attn_implementation = "eager"
    model = transformers.GPT2LMHeadModel(config).to(device).eval()
    prompt = torch.randint(1, _hf.VOCAB, (2, 8), generator=torch.Generator().manual_seed(1)).to(device)
    with torch.inference_mode():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=24, do_sample=False,
                             use_cache=True, pad_token_id=0)
    print("tokens " + " ".join(str(t) for t in out.flatten().tolist()))
_zoo.finish(device)
