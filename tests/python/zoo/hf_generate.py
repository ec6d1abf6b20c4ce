"""Hugging Face GPT-2 (2 layers, 64 wide) from a config generating 24 tokens greedily with its KV cache under
torch.inference_mode(): the tokens, and on CUDA memory_stats(), reserved peak and segments included."""
# zoo: both
# zoo-modules: GPT2LMHeadModel transformer.h.0.attn lm_head
import _hf
import _zoo

device = _zoo.setup()
_hf.transformers_or_skip()
import torch  # noqa: E402

with _zoo.recording():
    model = _hf.build("GPT2Config", "GPT2LMHeadModel", _hf.GPT2).to(device).eval()
    prompt = torch.randint(1, _hf.VOCAB, (2, 8), generator=torch.Generator().manual_seed(1)).to(device)
    with torch.inference_mode():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=24, do_sample=False,
                             use_cache=True, pad_token_id=0)
    print("tokens " + " ".join(str(t) for t in out.flatten().tolist()))
_zoo.finish(device)
