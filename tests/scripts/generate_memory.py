"""Does recording move the program's own memory numbers? Hugging Face GPT-2 (6 layers, d 512, random weights from a
config) generates 48 tokens greedily with its KV cache under torch.inference_mode(), and prints one JSON line of
memory_stats(): the reserved peak, the segment counts (all, small and large pools) and allocation counts, and where
the segments lie (MiB from the lowest, size in MiB, pool).

    generate_memory.py [--memrec none|start|record] [--option KEY=VALUE ...] [--late] [--gc normal|disable|freeze]
                       [--batch N] [--prompt N] [--prompt-rng cpu|cuda] [--pad ID]
                       [--probe none|device_alloc|pinned|profiler|snapshot] [--cupti-subscribe]

--memrec start records in-process with memrec.start(**options) (options as memrec.start takes them: device_memory=0,
stacks=off, kernels=0), before CUDA is used (--late: once the model is on the GPU); `record` is for a run under `memrec record` (nothing done here). --gc disable turns the cycle
collector off before torch is imported, freeze moves everything alive then to the permanent generation: a difference
that goes away with them comes from when the collector runs (memrec's own objects move its thresholds).
--probe does, without memrec, one thing a recorder may do to the device just before generate: device_alloc takes
2 MiB with cuMemAlloc outside the caching allocator, pinned 8 MiB of pinned host memory (both take virtual addresses
that cudaMalloc would hand out), profiler runs torch.profiler's CUDA activity over one kernel (Kineto sets CUPTI up),
snapshot reads the caching allocator's snapshot. --cupti-subscribe, without memrec, takes CUPTI's callback
subscription (enabling nothing) before torch is imported: CUPTI's presence alone. The caching allocator picks among free blocks of one size by address,
so whatever moves the addresses cudaMalloc returns can move its layout. Run by scripts/gpu-check.sh (guest, kv_layout).
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
    p.add_argument("--batch", type=int, default=1, help="prompts")
    p.add_argument("--prompt", type=int, default=16, help="tokens a prompt")
    p.add_argument("--prompt-rng", default="cpu", choices=["cpu", "cuda"],
                   help="prompt tokens from a CPU generator seeded 1, or from the CUDA generator seeded 0")
    p.add_argument("--pad", type=int, default=None, help="pad_token_id (default: the end-of-text token)")
    p.add_argument("--probe", default="none", choices=["none", "device_alloc", "pinned", "profiler", "snapshot"])
    p.add_argument("--cupti-subscribe", action="store_true", help="CUPTI's subscription alone, before torch")
    return p.parse_args()


def start_options(pairs):
    options = {}
    for pair in pairs:
        key, value = pair.split("=", 1)
        options[key] = {"0": False, "1": True}.get(value, value)
    return options


def probe(name, torch, prompt):
    """One thing done to the device outside the program's own work; returns what must stay alive."""
    if name == "device_alloc":
        import ctypes
        ptr = ctypes.c_uint64()
        status = ctypes.CDLL("libcuda.so.1").cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(2 << 20))
        assert status == 0, f"cuMemAlloc: {status}"
        return ptr
    if name == "pinned":
        return torch.empty(8 << 20, dtype=torch.uint8, pin_memory=True)
    if name == "profiler":
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
            prompt.add_(0)  # a kernel, no allocation
            torch.cuda.synchronize()
    if name == "snapshot":
        torch.cuda.memory._snapshot()
    return None


def cupti_subscribe():
    """cuptiSubscribe through ctypes, from the CUPTI library torch's wheel or the CUDA toolkit has; returns what
    must stay alive."""
    import ctypes
    import glob
    import site
    found = sorted(glob.glob("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so*") +
                   glob.glob("/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so*") +
                   [f for d in site.getsitepackages() for f in glob.glob(d + "/nvidia/**/libcupti.so*", recursive=True)])
    cupti = ctypes.CDLL(found[0])
    callback = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)(lambda *a: None)
    subscriber = ctypes.c_void_p()
    status = cupti.cuptiSubscribe(ctypes.byref(subscriber), callback, None)
    assert status == 0, f"cuptiSubscribe: {status}"
    return cupti, callback, subscriber


def layout(torch):
    """The segments by address: [MiB from the lowest, MiB, "s" small pool or "l" large]."""
    segments = torch.cuda.memory._snapshot()["segments"]
    base = min(s["address"] for s in segments)
    return [[(s["address"] - base) >> 20, s["total_size"] >> 20, s.get("segment_type", "?")[0]]
            for s in sorted(segments, key=lambda s: s["address"])]


def main():
    args = parse()
    if args.gc == "disable":
        gc.disable()
    subscribed = cupti_subscribe() if args.cupti_subscribe else None  # noqa: F841  alive to the end
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
    shape = (args.batch, args.prompt)
    if args.prompt_rng == "cuda":
        prompt = torch.randint(0, config.vocab_size, shape, device="cuda")
    else:
        prompt = torch.randint(0, config.vocab_size, shape, generator=torch.Generator().manual_seed(1)).to("cuda")
    kept = probe(args.probe, torch, prompt)
    with torch.inference_mode():
        out = model.generate(prompt, max_new_tokens=48, do_sample=False, use_cache=True,
                             pad_token_id=config.eos_token_id if args.pad is None else args.pad)
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
    facts["layout"] = layout(torch)
    del kept
    print(json.dumps(facts, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
