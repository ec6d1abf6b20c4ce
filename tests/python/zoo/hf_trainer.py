"""A Hugging Face Trainer run: GPT-2 (2 layers, 64 wide) from a config with random weights, a small dataset in a
list, 3 steps (bf16 on a GPU that has it), no saving, no reports, no progress bar, its logs kept off stdout; prints the
loss and gradient norm the Trainer logged at each step."""
# zoo: both
# zoo-modules: GPT2LMHeadModel transformer.h.0.attn lm_head
import importlib.util
import tempfile

import _hf
import _zoo

device = _zoo.setup()
transformers = _hf.transformers_or_skip()
_zoo.needs(importlib.util.find_spec("accelerate") is not None, "the Trainer needs accelerate")
import torch  # noqa: E402

with _zoo.recording(), tempfile.TemporaryDirectory(prefix="zoo-trainer-") as out:
    model = _hf.build("GPT2Config", "GPT2LMHeadModel", _hf.GPT2)
    ids = torch.randint(1, _hf.VOCAB, (8, 16), generator=torch.Generator().manual_seed(1))
    data = [dict(input_ids=row, labels=row) for row in ids]
    args = transformers.TrainingArguments(
        output_dir=out, max_steps=3, per_device_train_batch_size=2, learning_rate=1e-3, logging_steps=1,
        save_strategy="no", report_to="none", disable_tqdm=True, use_cpu=device.type == "cpu",
        bf16=device.type == "cuda" and torch.cuda.is_bf16_supported())
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data)
    trainer.remove_callback(transformers.PrinterCallback)  # it prints each log, timings included
    trainer.train()
for step, logged in enumerate(entry for entry in trainer.state.log_history if "loss" in entry):
    _zoo.loss(step, logged["loss"])
    _zoo.loss(step, logged["grad_norm"], "grad_norm")
_zoo.finish(device)
