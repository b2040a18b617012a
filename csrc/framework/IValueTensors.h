// IValueTensors.h - the tensors inside a boxed argument (a tensor, a tensor list or an optional
// tensor list), mapped or visited one by one; the boxed paths (generic executor, format staging,
// reduced-precision fallback) all walk arguments this way.
#pragma once

#include <ATen/core/ivalue.h>
#include <ATen/core/List.h>

#include <optional>
#include <utility>

namespace at_npu::native {

// `v` with every tensor in it replaced by f(tensor); other values unchanged. Undefined tensors in
// plain lists are passed to `f` too; absent optionals stay absent.
template <typename F>
c10::IValue mapTensors(const c10::IValue& v, F f) {
  if (v.isTensor()) return c10::IValue(f(v.toTensor()));
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(f(t));
    return c10::IValue(std::move(out));
  }
  if (v.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (const std::optional<at::Tensor>& t : v.toOptionalTensorList().vec()) {
      out.push_back(t.has_value() ? std::optional<at::Tensor>(f(*t)) : std::nullopt);
    }
    return c10::IValue(std::move(out));
  }
  return v;
}

// Calls f(tensor) for every defined tensor in `v`.
template <typename F>
void forEachTensor(const c10::IValue& v, F f) {
  mapTensors(v, [&](const at::Tensor& t) {
    if (t.defined()) f(t);
    return t;
  });
}

}  // namespace at_npu::native
