// OutVariants.cpp - out= overload lookup over the dispatcher's operator table (indexed once).
#include "csrc/framework/OutVariants.h"

#include <mutex>
#include <unordered_map>
#include <vector>

namespace at_npu::native {
namespace {

bool isOutArgument(const c10::Argument& a) {
  return a.alias_info() != nullptr && a.alias_info()->isWrite() && a.kwarg_only();
}

bool matches(const c10::FunctionSchema& functional, const c10::FunctionSchema& candidate) {
  std::vector<const c10::Argument*> inputs, outs;
  for (const auto& a : candidate.arguments()) (isOutArgument(a) ? outs : inputs).push_back(&a);
  if (outs.empty() || outs.size() != functional.returns().size()) return false;
  if (inputs.size() != functional.arguments().size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& f = functional.arguments()[i];
    if (inputs[i]->name() != f.name() || *inputs[i]->type() != *f.type()) return false;
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i]->type()->kind() != functional.returns()[i].type()->kind()) return false;
  }
  return true;
}

}  // namespace

std::optional<c10::OperatorHandle> findOutVariant(const c10::OperatorHandle& op) {
  static std::mutex mutex;
  static std::unordered_map<std::string, std::vector<c10::OperatorName>>* by_name = nullptr;
  static std::unordered_map<const c10::FunctionSchema*, std::optional<c10::OperatorHandle>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto hit = cache.find(&op.schema());
  if (hit != cache.end()) return hit->second;
  if (by_name == nullptr) {
    by_name = new std::unordered_map<std::string, std::vector<c10::OperatorName>>();
    for (const auto& name : c10::Dispatcher::singleton().getAllOpNames()) {
      (*by_name)[name.name].push_back(name);
    }
  }
  std::optional<c10::OperatorHandle> found;
  const auto& schema = op.schema();
  for (const auto& name : (*by_name)[schema.name()]) {
    auto handle = c10::Dispatcher::singleton().findOp(name);
    if (handle && handle->hasSchema() && matches(schema, handle->schema())) {
      found = *handle;
      break;
    }
  }
  cache.emplace(&op.schema(), found);
  return found;
}

}  // namespace at_npu::native
