"""peft LoRA on npu: a LoRA-wrapped tiny Llama trained a few steps on npu and on CPU from the same
start, then merge_and_unload(); the merged model's logits equal the adapter model's, and npu's
match CPU's. One JSON line."""

import json
import sys

import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM


def lora_model(device):
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=32)
    base = LlamaForCausalLM(config)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0,
                      init_lora_weights="gaussian")
    return get_peft_model(base, lora).to(device)


def train(device, ids):
    model = lora_model(device)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(4):
        loss = model(ids.to(device), labels=ids.to(device)).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        adapter_logits = model(ids.to(device)).logits.cpu()
        with model.disable_adapter():
            base_logits = model(ids.to(device)).logits.cpu()
        merged = model.merge_and_unload()
        merged_logits = merged(ids.to(device)).logits.cpu()
    return adapter_logits, merged_logits, trainable, (adapter_logits - base_logits).abs().max().item()


def main():
    ids = torch.randint(0, 64, (2, 10), generator=torch.Generator().manual_seed(0))
    npu_adapter, npu_merged, trainable, adapted = train("npu", ids)
    cpu_adapter, _, _, _ = train("cpu", ids)
    merge_err = (npu_merged - npu_adapter).abs().max().item()
    cpu_err = (npu_adapter - cpu_adapter).abs().max().item()
    result = {"trainable_params": trainable, "adapter_effect": adapted, "merge_err": merge_err,
              "npu_vs_cpu_err": cpu_err, "ok": trainable > 0 and adapted > 1e-3 and merge_err < 1e-4 and cpu_err < 1e-3}
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
