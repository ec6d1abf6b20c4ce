"""Does recording move the program's own memory numbers? Hugging Face GPT-2 (6 layers, d 512, random weights from a
config) generates 48 tokens greedily with its KV cache under torch.inference_mode(), and prints one JSON line of
memory_stats(): the reserved peak, the segment counts (all, small and large pools) and allocation counts.

    generate_memory.py [--memrec none|start|record] [--option KEY=VALUE ...] [--late] [--gc normal|disable|freeze]

--memrec start records in-process with memrec.start(**options) (options as memrec.start takes them: device_memory=0,
stacks=off, kernels=0), before CUDA is used (--late: once the model is on the GPU); `record` is for a run under `memrec record` (nothing done here). --gc disable turns the cycle
collector off before torch is imported, freeze moves everything alive then to the permanent generation: a difference
that goes away with them comes from when the collector runs (memrec's own objects move its thresholds). Run by
scripts/gpu-check.sh (guest).
"""
import argparse
import gc
import json


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--memrec", default="none", choices=["none", "start", "record"])
    p.add_argument("--option", action="append", default=[], help="KEY=VALUE for memrec.start (0/1 are booleans)")
    p.add_argument("--gc", default="normal", choices=["normal", "disable", "freeze"])
    p.add_argument("--late", action="store_true", help="memrec.start once the model is on the GPU, not before")
    p.add_argument("--out", default="/tmp/generate.memrec")
    return p.parse_args()


def start_options(pairs):
    options = {}
    for pair in pairs:
        key, value = pair.split("=", 1)
        options[key] = {"0": False, "1": True}.get(value, value)
    return options


def main():
    args = parse()
    if args.gc == "disable":
        gc.disable()
    import torch
    import transformers
    if args.gc == "freeze":
        gc.freeze()
    if args.memrec == "start" and not args.late:
        import memrec
        memrec.start(args.out, **start_options(args.option))
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=6, n_embd=512, n_head=8, vocab_size=50257, n_positions=1024)
    model = transformers.GPT2LMHeadModel(config).to("cuda").eval()
    if args.memrec == "start" and args.late:
        import memrec
        memrec.start(args.out, **start_options(args.option))
    prompt = torch.randint(0, config.vocab_size, (1, 16), generator=torch.Generator().manual_seed(1)).to("cuda")
    with torch.inference_mode():
        out = model.generate(prompt, max_new_tokens=48, do_sample=False, use_cache=True,
                             pad_token_id=config.eos_token_id)
    torch.cuda.synchronize()
    s = torch.cuda.memory_stats()
    keys = ["reserved_bytes.all.peak", "segment.all.peak", "segment.all.allocated", "segment.small_pool.allocated",
            "segment.large_pool.allocated", "allocation.all.allocated", "num_alloc_retries"]
    facts = {k: s.get(k, 0) for k in keys}
    facts["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    facts["tokens"] = int(out.shape[1])
    facts["gc_collections"] = [g["collections"] for g in gc.get_stats()]
    if args.memrec == "start":
        import memrec
        memrec.stop()
    print(json.dumps(facts, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
