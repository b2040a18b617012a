"""transformers' Trainer on a tiny Llama as users run it on Ascend: bf16, optim="adamw_torch_npu_fused",
a checkpoint and a resumed run; the same training on CPU (adamw_torch, fp32) is the reference.
Prints one JSON line: losses on both, whether the resumed run continued from the checkpoint."""

import json
import sys
import tempfile

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

STEPS = 6


def dataset():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 128, (24, 16), generator=g)
    return [{"input_ids": row, "labels": row} for row in ids]


def model():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(config)


def train(out, npu, max_steps, resume=False, after=0):
    args = TrainingArguments(output_dir=out, max_steps=max_steps, per_device_train_batch_size=4,
                             learning_rate=1e-3, logging_steps=1, save_steps=3, report_to=[],
                             bf16=npu, use_cpu=not npu, seed=0, data_seed=0,
                             optim="adamw_torch_npu_fused" if npu else "adamw_torch",
                             dataloader_num_workers=0, disable_tqdm=True)
    trainer = Trainer(model=model(), args=args, train_dataset=dataset())
    trainer.train(resume_from_checkpoint=resume or None)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h and h["step"] > after]
    return trainer, losses


def main():
    with tempfile.TemporaryDirectory() as npu_dir, tempfile.TemporaryDirectory() as cpu_dir:
        trainer, npu_losses = train(npu_dir, True, STEPS)
        device = str(next(trainer.model.parameters()).device)
        _, cpu_losses = train(cpu_dir, False, STEPS)
        # Resume: a new trainer picks up the step-3 checkpoint and runs to the end.
        resumed, resumed_losses = train(npu_dir, True, STEPS, resume=f"{npu_dir}/checkpoint-3", after=3)
        errs = [abs(a - b) / abs(b) for a, b in zip(npu_losses, cpu_losses)]
        result = {"transformers": transformers.__version__, "device": device, "npu_losses": npu_losses,
                  "cpu_losses": cpu_losses, "resumed_losses": resumed_losses, "max_rel_err": max(errs),
                  "ok": device.startswith("npu") and max(errs) < 0.05 and len(resumed_losses) == STEPS - 3
                  and max(abs(a - b) / b for a, b in zip(resumed_losses, npu_losses[3:])) < 1e-3}
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
