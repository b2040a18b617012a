"""transformers on npu: a tiny Llama's logits with attn_implementation="flash_attention_2" (which
reaches torch_npu.npu_fusion_attention) against "eager" on CPU, with and without padding; greedy
generate() on npu against CPU. Prints one JSON line."""

import json
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def model(attn, device):
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         attn_implementation=attn)
    return LlamaForCausalLM(config).to(device, torch.bfloat16 if device == "npu" else torch.float32).eval()


def main():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 128, (2, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[1, :4] = 0  # left padding in the second row
    cpu = model("eager", "cpu")
    fa2 = model("flash_attention_2", "npu")
    with torch.no_grad():
        ref = cpu(ids, attention_mask=mask).logits
        out = fa2(ids.npu(), attention_mask=mask.npu()).logits.float().cpu()
        valid = mask.bool()
        fa2_err = ((out - ref)[valid].abs().max() / ref[valid].abs().max()).item()
        eager_npu = model("eager", "npu")
        gen_npu = eager_npu.generate(ids[:1].npu(), max_new_tokens=8, do_sample=False).cpu()
        gen_cpu = model("eager", "cpu").to(torch.bfloat16).generate(ids[:1], max_new_tokens=8, do_sample=False)
    same_tokens = (gen_npu == gen_cpu).float().mean().item()
    result = {"fa2_vs_eager_rel_err": fa2_err, "attn_impl": fa2.config._attn_implementation,
              "generate_token_agreement": same_tokens, "ok": fa2_err < 3e-2 and same_tokens >= 0.85}
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
