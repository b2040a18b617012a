// AdvanceStepKernelNpu.cpp - npu_advance_step_flashattn: vLLM's advance_step_flashattn, updating a decode batch's
// input_tokens, input_positions, seq_lens and slot_mapping in place after sampling; aclnnAdvanceStep, or with
// speculative tokens (spec_token, accepted_num) aclnnAdvanceStepV2. Inference only.
#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

void checkIndexTensor(const char* op, const char* what, const at::Tensor& t) {
  TORCH_CHECK_TYPE(t.scalar_type() == at::kLong || t.scalar_type() == at::kInt, op, ": ", what,
                   " must be int64 (or int32), got ", t.scalar_type());
}

void checkAdvanceStep(const at::Tensor& input_tokens, const at::Tensor& sampled_token_ids,
                      const at::Tensor& input_positions, const at::Tensor& seq_lens, const at::Tensor& slot_mapping,
                      const at::Tensor& block_tables, int64_t num_seqs, int64_t num_queries, int64_t block_size,
                      const std::optional<at::Tensor>& spec_token, const std::optional<at::Tensor>& accepted_num) {
  const char* op = "npu_advance_step_flashattn";
  checkIndexTensor(op, "input_tokens", input_tokens);
  checkIndexTensor(op, "sampled_token_ids", sampled_token_ids);
  checkIndexTensor(op, "input_positions", input_positions);
  checkIndexTensor(op, "seq_lens", seq_lens);
  checkIndexTensor(op, "slot_mapping", slot_mapping);
  checkIndexTensor(op, "block_tables", block_tables);
  TORCH_CHECK_VALUE(num_seqs > 0 && num_queries > 0 && block_size > 0, op, ": num_seqs, num_queries and block_size "
                    "must be positive, got ", num_seqs, ", ", num_queries, " and ", block_size);
  TORCH_CHECK_VALUE(block_tables.dim() == 2 && block_tables.size(0) >= num_seqs, op, ": block_tables must be 2-D "
                    "[num_seqs, max_blocks], got ", block_tables.sizes());
  TORCH_CHECK_VALUE(sampled_token_ids.dim() == 2 && sampled_token_ids.size(0) >= num_queries, op,
                    ": sampled_token_ids must be [num_queries, tokens], got ", sampled_token_ids.sizes());
  const bool spec = spec_token.has_value() && spec_token->defined();
  const bool accepted = accepted_num.has_value() && accepted_num->defined();
  TORCH_CHECK_VALUE(spec == accepted, op, ": speculative decoding needs both spec_token and accepted_num");
  for (const at::Tensor* t : {&input_tokens, &input_positions, &seq_lens, &slot_mapping}) {
    TORCH_CHECK_VALUE(t->dim() == 1, op, ": input_tokens, input_positions, seq_lens and slot_mapping must be 1-D, "
                      "got ", t->sizes());
  }
  if (!spec) {
    TORCH_CHECK_VALUE(num_queries <= num_seqs, op, ": num_queries (", num_queries, ") cannot exceed num_seqs (",
                      num_seqs, ")");
    for (const at::Tensor* t : {&input_tokens, &input_positions, &seq_lens, &slot_mapping}) {
      TORCH_CHECK_VALUE(t->size(0) >= num_seqs, op, ": the per-sequence tensors need num_seqs (", num_seqs,
                        ") entries, got ", t->sizes());
    }
    return;
  }
  checkIndexTensor(op, "spec_token", *spec_token);
  checkIndexTensor(op, "accepted_num", *accepted_num);
  TORCH_CHECK_VALUE(num_queries == num_seqs, op, ": with speculative tokens num_queries must equal num_seqs, got ",
                    num_queries, " and ", num_seqs);
  TORCH_CHECK_VALUE(spec_token->dim() == 2 && spec_token->size(0) == num_seqs, op,
                    ": spec_token must be [num_seqs, spec_num], got ", spec_token->sizes());
  const int64_t per_request = spec_token->size(1) + 1;
  TORCH_CHECK_VALUE(accepted_num->dim() == 1 && accepted_num->size(0) == num_seqs, op,
                    ": accepted_num must be [num_seqs], got ", accepted_num->sizes());
  TORCH_CHECK_VALUE(sampled_token_ids.size(1) == per_request, op, ": sampled_token_ids must be [num_seqs, 1 + "
                    "spec_num] = [", num_seqs, ", ", per_request, "], got ", sampled_token_ids.sizes());
  for (const at::Tensor* t : {&input_tokens, &input_positions, &seq_lens, &slot_mapping}) {
    TORCH_CHECK_VALUE(t->size(0) == num_seqs * per_request, op, ": with speculative tokens the per-token tensors need "
                      "num_seqs * (1 + spec_num) = ", num_seqs * per_request, " entries, got ", t->sizes());
  }
}

}  // namespace

void npu_advance_step_flashattn(at::Tensor& input_tokens, const at::Tensor& sampled_token_ids,
                                at::Tensor& input_positions, at::Tensor& seq_lens, at::Tensor& slot_mapping,
                                const at::Tensor& block_tables, int64_t num_seqs, int64_t num_queries,
                                int64_t block_size, const std::optional<at::Tensor>& spec_token,
                                const std::optional<at::Tensor>& accepted_num) {
  checkAdvanceStep(input_tokens, sampled_token_ids, input_positions, seq_lens, slot_mapping, block_tables, num_seqs,
                   num_queries, block_size, spec_token, accepted_num);
  if (spec_token.has_value() && spec_token->defined()) {
    EXEC_NPU_CMD(aclnnAdvanceStepV2, input_tokens, sampled_token_ids, input_positions, seq_lens, slot_mapping,
                 block_tables, spec_token, accepted_num, num_seqs, num_queries, block_size);
  } else {
    EXEC_NPU_CMD(aclnnAdvanceStep, input_tokens, sampled_token_ids, input_positions, seq_lens, slot_mapping,
                 block_tables, num_seqs, num_queries, block_size);
  }
}

void npu_advance_step_flashattn_meta(at::Tensor& input_tokens, const at::Tensor& sampled_token_ids,
                                     at::Tensor& input_positions, at::Tensor& seq_lens, at::Tensor& slot_mapping,
                                     const at::Tensor& block_tables, int64_t num_seqs, int64_t num_queries,
                                     int64_t block_size, const std::optional<at::Tensor>& spec_token,
                                     const std::optional<at::Tensor>& accepted_num) {
  checkAdvanceStep(input_tokens, sampled_token_ids, input_positions, seq_lens, slot_mapping, block_tables, num_seqs,
                   num_queries, block_size, spec_token, accepted_num);
}

}  // namespace at_npu::native
