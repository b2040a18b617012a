"""Loads and validates npu_native_functions.yaml and derivatives.yaml into plain records.

Every error names the yaml file, the line and the entry, so a malformed entry fails the build with a
message the author can act on.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import yaml

import torchgen
from torchgen.model import BaseTy, BaseType, FunctionSchema, ListType, OptionalType


class CodegenError(Exception):
    """A problem in the yaml files or the adapter sources, described for the person fixing it."""


@dataclass
class AtenEntry:
    """One `supported` line: an ATen op and the npu kernel that serves it."""

    func: str  # name.overload as in native_functions.yaml
    impl: str  # C++ name in cpp_namespace ("" when routed to the generic executor)
    generic: bool
    device_op: str
    line: int
    schema: FunctionSchema | None = None
    const_mutable_refs: bool = False  # native_functions.yaml's use_const_ref_for_mutable_tensors
    # Structured groups take tensor lists as ITensorListRef in their dispatcher signature (cat.out).
    ilistref: bool = False


@dataclass
class Derivative:
    """Backward formulas of one custom_autograd op (derivatives.yaml)."""

    name: str
    formulas: list[tuple[list[str], str]]  # (inputs, C++ expression)
    output_differentiability: list[bool] | None
    line: int


# torch_npu's ops whose names do not start with npu_ (the factories it has beside torch.empty).
# torch_npu's ops without the npu_ prefix (upstream's names), by base name (an in-place op's without its `_`).
_UNPREFIXED = {"empty_with_format", "unsafe_empty_with_format", "empty_with_swapped_memory", "one", "copy_memory",
               "get_npu_format", "get_storage_size", "scatter_update", "fast_gelu", "batch_norm_reduce",
               "batch_norm_gather_stats_update", "dropout_with_byte_mask", "_dropout_with_byte_mask",
               "_dropout_with_byte_mask_backward"}


@dataclass
class CustomEntry:
    """One torch_npu op (`custom` or `custom_autograd`)."""

    schema: FunctionSchema
    variants: list[str]
    meta: str  # C++ name of the Meta kernel ("" = the adapter itself)
    autograd: bool
    line: int
    derivative: Derivative | None = None
    device_ops: list[str] = field(default_factory=list)  # the opslib ops its adapter launches (docs)

    @property
    def name(self) -> str:
        """The op's name without overload: torch_npu.<name>, torch.ops.npu.<name>."""
        return str(self.schema.name.name)

    @property
    def overload(self) -> str:
        return self.schema.name.overload_name

    @property
    def op_name(self) -> str:
        """name.overload as the dispatcher knows it (m.def / m.impl)."""
        return str(self.schema.name)

    @property
    def factory(self) -> bool:
        """No tensor arguments, a device argument: the dispatch key comes from dtype / layout / device
        (a BackendSelect kernel picks it, as ATen's factories do)."""
        args = list(self.schema.arguments.flat_all)
        return not any(a.type.is_tensor_like() for a in args) and any(a.name == "device" for a in args)

    @property
    def cpp_name(self) -> str:
        """The adapter's C++ name: name_overload (as ATen names its overloads' kernels)."""
        return f"{self.name}_{self.overload}" if self.overload else self.name


@dataclass
class Config:
    backend: str
    cpp_namespace: str
    supported: list[AtenEntry]
    autograd: list[AtenEntry]
    custom: list[CustomEntry] = field(default_factory=list)
    path: str = ""


def _entry_lines(text: str) -> dict[str, list[int]]:
    """1-based line of every item of every top-level sequence (yaml.compose keeps positions)."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    lines: dict[str, list[int]] = {}
    if isinstance(root, yaml.MappingNode):
        for key, value in root.value:
            if isinstance(value, yaml.SequenceNode):
                lines[key.value] = [item.start_mark.line + 1 for item in value.value]
    elif isinstance(root, yaml.SequenceNode):
        lines[""] = [item.start_mark.line + 1 for item in root.value]
    return lines


def _load(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        return yaml.safe_load(text), _entry_lines(text)
    except yaml.YAMLError as e:
        raise CodegenError(f"{path}: not valid yaml: {e}") from e


def load_aten_schemas() -> dict[str, dict]:
    """native_functions.yaml entries of the installed torch, keyed by name.overload."""
    path = os.path.join(os.path.dirname(torchgen.__file__), "packaged", "ATen", "native", "native_functions.yaml")
    with open(path, encoding="utf-8") as f:
        entries = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return {e["func"].split("(", 1)[0]: e for e in entries}


def default_impl_name(func: str) -> str:
    """add.out -> add_out, set_.source_Storage -> set_source_Storage, relu_ -> relu_."""
    name, _, overload = func.partition(".")
    return f"{name.rstrip('_')}_{overload}" if overload else name


_ATEN_KEYS = {"func", "impl", "generic", "device_op"}
_CUSTOM_KEYS = {"func", "variants", "meta", "device_ops"}


def _parse_aten(section: str, items, lines, path: str, aten: dict[str, dict]) -> list[AtenEntry]:
    out = []
    for i, item in enumerate(items or []):
        where = f"{path}:{lines[i]}: {section} entry"
        if isinstance(item, str):
            item = {"func": item}
        if not isinstance(item, dict) or not isinstance(item.get("func"), str):
            raise CodegenError(f"{where} {item!r}: expected `- name.overload` or `- {{func: name.overload, ...}}`")
        unknown = set(item) - _ATEN_KEYS
        if unknown:
            raise CodegenError(f"{where} '{item['func']}': unknown key(s) {sorted(unknown)}; allowed: {sorted(_ATEN_KEYS)}")
        func = item["func"].strip()
        if func not in aten:
            raise CodegenError(
                f"{where} '{func}': no such ATen op in torch's native_functions.yaml (spell it name.overload, "
                "e.g. add.out)")
        generic = bool(item.get("generic", False))
        if generic and "impl" in item:
            raise CodegenError(f"{where} '{func}': `generic: true` routes to the generic executor; drop `impl:`")
        out.append(AtenEntry(
            func=func, impl="" if generic else str(item.get("impl") or default_impl_name(func)), generic=generic,
            device_op=str(item.get("device_op", "")), line=lines[i],
            schema=FunctionSchema.parse(aten[func]["func"]),
            const_mutable_refs=bool(aten[func].get("use_const_ref_for_mutable_tensors", False)),
            ilistref=bool(aten[func].get("structured", False) or "structured_delegate" in aten[func])))
    return out


def _parse_custom(section: str, items, lines, path: str) -> list[CustomEntry]:
    out = []
    for i, item in enumerate(items or []):
        where = f"{path}:{lines[i]}: {section} entry"
        if not isinstance(item, dict) or not isinstance(item.get("func"), str):
            raise CodegenError(f"{where} {item!r}: expected `- func: npu_xxx(Tensor self, ...) -> Tensor`")
        unknown = set(item) - _CUSTOM_KEYS
        if unknown:
            raise CodegenError(f"{where} '{item['func']}': unknown key(s) {sorted(unknown)}; allowed: {sorted(_CUSTOM_KEYS)}")
        try:
            schema = FunctionSchema.parse(item["func"])
        except Exception as e:  # torchgen raises AssertionError / RuntimeError with the reason
            raise CodegenError(f"{where} '{item['func']}': malformed schema: {e}") from e
        name = str(schema.name)
        if not (name.startswith("npu_") or name.startswith("_npu_") or schema.name.name.base in _UNPREFIXED):
            raise CodegenError(f"{where} '{name}': custom op names start with npu_ (or _npu_ for internal ones); "
                               f"torch_npu's few others are listed in _UNPREFIXED")
        variants = [v.strip() for v in str(item.get("variants", "function")).split(",")]
        if not set(variants) <= {"function", "method"}:
            raise CodegenError(f"{where} '{name}': variants must be 'function', 'method' or 'function, method'")
        args = schema.arguments.flat_positional
        if "method" in variants and not (args and args[0].name == "self" and args[0].type == BaseType(BaseTy.Tensor)):
            raise CodegenError(f"{where} '{name}': `variants: method` needs `Tensor self` as first argument")
        device_ops = [d.strip() for d in str(item.get("device_ops", "")).split(",") if d.strip()]
        if any(not d.startswith("aclnn") for d in device_ops):
            raise CodegenError(f"{where} '{name}': device_ops lists opslib op names (aclnnXxx, comma-separated)")
        out.append(CustomEntry(schema=schema, variants=variants, meta=str(item.get("meta", "")),
                               autograd=section == "custom_autograd", line=lines[i], device_ops=device_ops))
    return out


def load_config(path: str) -> Config:
    data, lines = _load(path)
    if not isinstance(data, dict):
        raise CodegenError(f"{path}: expected a mapping with backend, cpp_namespace, supported, ...")
    for key in ("backend", "cpp_namespace"):
        if not isinstance(data.get(key), str):
            raise CodegenError(f"{path}: missing `{key}:`")
    allowed = {"backend", "cpp_namespace", "supported", "autograd", "custom", "custom_autograd"}
    if set(data) - allowed:
        raise CodegenError(f"{path}: unknown section(s) {sorted(set(data) - allowed)}; allowed: {sorted(allowed)}")
    aten = load_aten_schemas()
    cfg = Config(
        backend=data["backend"], cpp_namespace=data["cpp_namespace"], path=path,
        supported=_parse_aten("supported", data.get("supported"), lines.get("supported", []), path, aten),
        autograd=_parse_aten("autograd", data.get("autograd"), lines.get("autograd", []), path, aten))
    cfg.custom = (_parse_custom("custom", data.get("custom"), lines.get("custom", []), path)
                  + _parse_custom("custom_autograd", data.get("custom_autograd"), lines.get("custom_autograd", []), path))
    seen: dict[str, int] = {}
    for e in cfg.supported + cfg.autograd:
        if e.func in seen:
            raise CodegenError(f"{path}:{e.line}: '{e.func}' is listed twice (first at line {seen[e.func]})")
        seen[e.func] = e.line
    for c in cfg.custom:
        if c.op_name in seen:
            raise CodegenError(f"{path}:{c.line}: '{c.op_name}' is listed twice (first at line {seen[c.op_name]})")
        seen[c.op_name] = c.line
    if cfg.autograd:
        e = cfg.autograd[0]
        raise CodegenError(f"{path}:{e.line}: autograd entry '{e.func}': npu autograd kernels for ATen ops "
                           "are not generated yet; register it in `supported` and let PyTorch's derivative apply")
    return cfg


_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")


def load_derivatives(path: str, cfg: Config) -> None:
    """Attaches derivatives.yaml formulas to the custom_autograd ops; each such op needs one."""
    data, lines = _load(path)
    entries = lines.get("", [])
    by_name = {c.name: c for c in cfg.custom if not c.overload}
    for i, item in enumerate(data or []):
        where = f"{path}:{entries[i]}: derivative"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise CodegenError(f"{where} {item!r}: expected `- name: npu_xxx` followed by `input: formula` lines")
        name = item["name"].strip()
        op = by_name.get(name)
        if op is None or not op.autograd:
            raise CodegenError(f"{where} '{name}': not a custom_autograd op of {cfg.path}")
        if op.derivative is not None:
            raise CodegenError(f"{where} '{name}': listed twice")
        arg_names = [a.name for a in op.schema.arguments.flat_all]
        formulas = []
        covered: set[str] = set()
        for key, expr in item.items():
            if key in ("name", "output_differentiability"):
                continue
            inputs = [k.strip() for k in str(key).split(",")]
            for inp in inputs:
                if inp not in arg_names:
                    raise CodegenError(f"{where} '{name}': '{inp}' is not an argument of {op.schema}")
                if inp in covered:
                    raise CodegenError(f"{where} '{name}': two formulas for '{inp}'")
                covered.add(inp)
            if not isinstance(expr, str) or not expr.strip():
                raise CodegenError(f"{where} '{name}': empty formula for {key}")
            formulas.append((inputs, expr.strip()))
        if not formulas:
            raise CodegenError(f"{where} '{name}': no formula")
        od = item.get("output_differentiability")
        n_out = len(op.schema.returns)
        if od is not None and (not isinstance(od, list) or len(od) != n_out):
            raise CodegenError(f"{where} '{name}': output_differentiability needs {n_out} booleans")
        op.derivative = Derivative(name=name, formulas=formulas, output_differentiability=od, line=entries[i])
    for op in cfg.custom:
        if op.autograd and op.derivative is None:
            raise CodegenError(f"{cfg.path}:{op.line}: custom_autograd entry '{op.name}' has no formula in {path}")


def is_tensor_type(t) -> bool:
    return t == BaseType(BaseTy.Tensor)


def is_optional_tensor_type(t) -> bool:
    return isinstance(t, OptionalType) and is_tensor_type(t.elem)


def is_tensor_list_type(t) -> bool:
    return isinstance(t, ListType) and is_tensor_type(t.elem)


def formula_names(expr: str) -> set[str]:
    return set(_IDENT.findall(expr))
