"""C++ autograd Functions for custom_autograd ops, from derivatives.yaml, registered for AutogradPrivateUse1.

Forward runs the op below autograd (through the dispatcher, so PrivateUse1, Meta and FakeTensor all
work), saves what the formulas name, and returns the outputs; integer outputs travel as 0-dim CPU
tensors through the Function and are unpacked again. Backward evaluates the formulas.
"""

from __future__ import annotations

import re

from torchgen.model import BaseTy, BaseType, ListType, OptionalType

from codegen.gen_cpp import HEADER_NOTE, native_arguments, native_signature
from codegen.model import (CodegenError, Config, CustomEntry, formula_names, is_optional_tensor_type,
                           is_tensor_type)


def _class_name(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("_")) + "Function"


# How a non-tensor argument is kept in ctx->saved_data and read back: (store expression, restore lines).
def _save_restore(arg_type, name: str, where: str) -> tuple[str, list[str]]:
    key = f'ctx->saved_data["{name}"]'
    if arg_type == BaseType(BaseTy.float):
        return name, [f"double {name} = {key}.toDouble();"]
    if arg_type == BaseType(BaseTy.int):
        return name, [f"int64_t {name} = {key}.toInt();"]
    if arg_type == BaseType(BaseTy.bool):
        return name, [f"bool {name} = {key}.toBool();"]
    if arg_type == BaseType(BaseTy.Scalar):
        return name, [f"at::Scalar {name} = {key}.toScalar();"]
    if arg_type == BaseType(BaseTy.ScalarType):
        return name, [f"at::ScalarType {name} = {key}.toScalarType();"]
    if arg_type == BaseType(BaseTy.str):
        return f"std::string({name})", [f"std::string {name}_str = {key}.toStringRef();",
                                        f"c10::string_view {name} = {name}_str;"]
    if isinstance(arg_type, ListType) and arg_type.elem == BaseType(BaseTy.int):
        return f"{name}.vec()", [f"std::vector<int64_t> {name}_vec = {key}.toIntVector();",
                                 f"at::IntArrayRef {name} = {name}_vec;"]
    if isinstance(arg_type, OptionalType) and isinstance(arg_type.elem, ListType) \
            and arg_type.elem.elem == BaseType(BaseTy.int):
        return (f"{name}.has_value() ? c10::IValue({name}->vec()) : c10::IValue()",
                [f"std::optional<std::vector<int64_t>> {name}_vec;",
                 f"if (!{key}.isNone()) {name}_vec = {key}.toIntVector();",
                 f"at::OptionalIntArrayRef {name} = {name}_vec ? at::OptionalIntArrayRef(*{name}_vec) : std::nullopt;"])
    if isinstance(arg_type, OptionalType) and arg_type.elem == BaseType(BaseTy.float):
        return (f"{name}.has_value() ? c10::IValue(*{name}) : c10::IValue()",
                [f"std::optional<double> {name} = {key}.isNone() ? std::nullopt "
                 f": std::optional<double>({key}.toDouble());"])
    if isinstance(arg_type, OptionalType) and arg_type.elem == BaseType(BaseTy.int):
        return (f"{name}.has_value() ? c10::IValue(*{name}) : c10::IValue()",
                [f"std::optional<int64_t> {name} = {key}.isNone() ? std::nullopt "
                 f": std::optional<int64_t>({key}.toInt());"])
    raise CodegenError(f"{where}: argument '{name}' of type {arg_type} cannot be used in a formula yet")


def _gen_function(c: CustomEntry, cfg: Config, deriv_path: str) -> list[str]:
    d = c.derivative
    where = f"{deriv_path}:{d.line}: derivative '{c.name}'"
    schema = c.schema
    args = list(schema.arguments.flat_all)
    cpp_args = native_arguments(schema)
    used = set().union(*(formula_names(expr) for _, expr in d.formulas))
    n_out = len(schema.returns)
    result_names = ["result"] if n_out == 1 else [f"result{i}" for i in range(n_out)]
    if n_out > 1 and "result" in used:
        raise CodegenError(f"{where}: the op has {n_out} outputs; name them result0..result{n_out - 1}")
    out_is_tensor = [is_tensor_type(r.type) for r in schema.returns]
    for r in schema.returns:
        if not (is_tensor_type(r.type) or r.type == BaseType(BaseTy.int)):
            raise CodegenError(f"{where}: outputs must be Tensor or int, not {r.type}")
    differentiable = d.output_differentiability or [True] * n_out
    differentiable = [bool(x) and t for x, t in zip(differentiable, out_is_tensor)]

    cls = _class_name(c.cpp_name)
    params = ", ".join(f"{a.type} {a.name}" for a in cpp_args)
    call_args = ", ".join(a.name for a in cpp_args)
    # Integer outputs bypass the Function (a pointer argument): as tensors they would turn into
    # data-dependent values under FakeTensor.
    L = [f"struct {cls} : public torch::autograd::Function<{cls}> {{",
         f"  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, {params},",
         "                                                std::vector<int64_t>* int_outputs) {",
         "    at::Tensor undefined;", "    torch::autograd::variable_list outputs;", "    {",
         "      at::AutoDispatchBelowADInplaceOrView below_autograd;",
         f"      auto result = at_npu::ops::{c.cpp_name}({call_args});"]
    if n_out == 1:
        L.append("      outputs.push_back(result);")
    else:
        for i, is_t in enumerate(out_is_tensor):
            get = f"std::get<{i}>(result)"
            L.append(f"      outputs.push_back({get});" if is_t
                     else f"      int_outputs->push_back({get});")
    L.append("    }")
    # Tensors (inputs and outputs) the formulas use go through save_for_backward; the rest as IValues.
    tensor_pos = {i: sum(1 for t in out_is_tensor[:i] if t) for i in range(n_out)}
    saved_tensors: list[tuple[str, str]] = []  # (name, restore kind)
    for a in args:
        if a.name not in used:
            continue
        if is_tensor_type(a.type):
            saved_tensors.append((a.name, "tensor"))
        elif is_optional_tensor_type(a.type):
            saved_tensors.append((a.name, "optional"))
        else:
            store, _ = _save_restore(a.type, a.name, where)
            L.append(f'    ctx->saved_data["{a.name}"] = {store};')
    for i, rn in enumerate(result_names):
        if rn in used:
            if out_is_tensor[i]:
                saved_tensors.append((rn, f"output{i}"))
            else:
                L.append(f'    ctx->saved_data["{rn}"] = (*int_outputs)[{sum(1 for t in out_is_tensor[:i] if not t)}];')
    # Which arguments want a gradient, by argument position (ctx->needs_input_grad counts only the
    # tensors actually passed, which shifts with absent optional tensors).
    bits = []
    for i, a in enumerate(args):
        if is_tensor_type(a.type):
            bits.append(f"(int64_t({a.name}.requires_grad()) << {i})")
        elif is_optional_tensor_type(a.type):
            bits.append(f"(int64_t({a.name}.has_value() && {a.name}->requires_grad()) << {i})")
    L.append(f'    ctx->saved_data["needs_grad"] = int64_t({" | ".join(bits) or "0"});')
    save_exprs = []
    for name, kind in saved_tensors:
        if kind == "tensor":
            save_exprs.append(name)
        elif kind == "optional":
            save_exprs.append(f"({name}.has_value() ? *{name} : undefined)")
        else:
            save_exprs.append(f"outputs[{tensor_pos[int(kind[6:])]}]")
    if save_exprs:
        L.append(f"    ctx->save_for_backward({{{', '.join(save_exprs)}}});")
    tensor_pos = {i: sum(1 for t in out_is_tensor[:i] if t) for i in range(n_out)}
    nondiff = [f"outputs[{tensor_pos[i]}]" for i in range(n_out) if not differentiable[i] and out_is_tensor[i]]
    if nondiff:
        # Outputs an op leaves undefined (None in Python, e.g. statistics it only returns on request) are skipped.
        L += ["    torch::autograd::variable_list nondiff;",
              f"    for (const at::Tensor& t : {{{', '.join(nondiff)}}}) if (t.defined()) nondiff.push_back(t);",
              "    ctx->mark_non_differentiable(nondiff);"]
    if n_out > 1:
        # An output the op leaves undefined (None in Python) cannot pass through the Function: it leaves as an
        # empty placeholder flagged after the integer outputs, and the wrapper returns it undefined again.
        L += ["    for (auto& t : outputs) {", "      int_outputs->push_back(t.defined() ? 0 : 1);",
              "      if (!t.defined()) t = at::empty({0});", "    }"]
    L += ["    return outputs;", "  }", "",
          "  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,",
          "                                                 torch::autograd::variable_list grads) {",
          "    auto saved = ctx->get_saved_variables();",
          "    const at::Tensor& grad = grads[0];"]
    for k, (name, kind) in enumerate(saved_tensors):
        if kind == "optional":
            L.append(f"    std::optional<at::Tensor> {name} = saved[{k}].defined() ? std::optional<at::Tensor>(saved[{k}]) : std::nullopt;")
        else:
            L.append(f"    const at::Tensor& {name} = saved[{k}];")
    for a in args:
        if a.name in used and not (is_tensor_type(a.type) or is_optional_tensor_type(a.type)):
            _, restore = _save_restore(a.type, a.name, where)
            L += ["    " + line for line in restore]
    for i, rn in enumerate(result_names):
        if rn in used and not out_is_tensor[i]:
            L.append(f'    int64_t {rn} = ctx->saved_data["{rn}"].toInt();')
    L.append('    const int64_t needs_grad = ctx->saved_data["needs_grad"].toInt();')
    L.append(f"    torch::autograd::variable_list grad_inputs({len(args) + 1});  // + int_outputs")
    index = {a.name: i for i, a in enumerate(args)}
    for inputs, expr in d.formulas:
        for inp in inputs:
            t = args[index[inp]].type
            if not (is_tensor_type(t) or is_optional_tensor_type(t)):
                raise CodegenError(f"{where}: '{inp}' is not a Tensor argument; it has no gradient")
        need = " || ".join(f"(needs_grad >> {index[i]} & 1)" for i in inputs)
        L.append(f"    if ({need}) {{")
        if len(inputs) == 1:
            L.append(f"      grad_inputs[{index[inputs[0]]}] = {expr};")
        else:
            L.append(f"      auto r = {expr};")
            for j, inp in enumerate(inputs):
                # An optional input that was not given gets no gradient (the backward kernel may still
                # return an empty placeholder for it, as torch_npu's do).
                guard = f"if (needs_grad >> {index[inp]} & 1) " if is_optional_tensor_type(args[index[inp]].type) else ""
                L.append(f"      {guard}grad_inputs[{index[inp]}] = std::get<{j}>(r);")
        L.append("    }")
    L += ["    return grad_inputs;", "  }", "};", ""]

    # The AutogradPrivateUse1 kernel: same signature as the op.
    tensor_args = [a.name for a in args if is_tensor_type(a.type) or is_optional_tensor_type(a.type)]
    L.append(native_signature(schema, c.cpp_name + "_autograd") + " {")
    # Nothing to record when no input needs a gradient: run the op directly.
    needs = " || ".join(f"{n}.requires_grad()" if is_tensor_type(args[index[n]].type)
                        else f"({n}.has_value() && {n}->requires_grad())" for n in tensor_args) or "false"
    L += ["  if (!at::GradMode::is_enabled() || !(" + needs + ")) {",
          "    at::AutoDispatchBelowADInplaceOrView below_autograd;",
          f"    return at_npu::ops::{c.cpp_name}({call_args});", "  }",
          "  std::vector<int64_t> int_outputs;",
          f"  auto outputs = {cls}::apply({call_args}, &int_outputs);"]
    if n_out == 1:
        L.append("  return outputs[0];")
    else:
        parts, ti, ii = [], 0, 0
        n_int = sum(1 for t in out_is_tensor if not t)
        for t in out_is_tensor:
            if t:
                parts.append(f"(int_outputs[{n_int + ti}] ? at::Tensor() : outputs[{ti}])")
                ti += 1
            else:
                parts.append(f"int_outputs[{ii}]")
                ii += 1
        L.append(f"  return std::make_tuple({', '.join(parts)});")
    L += ["}", ""]
    return L


def gen_autograd(cfg: Config, src: str, deriv_path: str) -> str:
    ops = [c for c in cfg.custom if c.autograd]
    at_calls = {"empty"}  # the placeholders of undefined outputs
    for c in ops:
        for _, expr in c.derivative.formulas:
            at_calls |= set(re.findall(r"\bat::([a-z_]\w*)\s*\(", expr))
    out = [HEADER_NOTE.format(src=src) + "// Autograd kernels of torch_npu's differentiable ops (derivatives.yaml).",
           "#include <ATen/core/grad_mode.h>"]
    out += [f"#include <ATen/ops/{name}.h>" for name in sorted(at_calls)]
    out += ["#include <torch/csrc/autograd/custom_function.h>", "#include <torch/library.h>", "",
            '#include "csrc/custom/NpuCustomOps.h"', "", "namespace at_npu::autograd {",
            "using namespace at_npu::ops;", "namespace {", ""]
    for c in ops:
        out += _gen_function(c, cfg, deriv_path)
    out += ["}  // namespace", "", "TORCH_LIBRARY_IMPL(npu, AutogradPrivateUse1, m) {"]
    for c in ops:
        out.append(f'  m.impl("{c.op_name}", TORCH_FN({c.cpp_name}_autograd));')
    out += ["}", "", "}  // namespace at_npu::autograd", ""]
    return "\n".join(out)
