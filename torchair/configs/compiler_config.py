"""CompilerConfig: settings of torchair's npu backend, validated on assignment.

    config = CompilerConfig()
    config.mode = "reduce-overhead"              # or "max-autotune" (the default)
    config.debug.graph_dump.type = "py"          # dump each captured graph: "py", "txt" (or "pbtxt")
    config.debug.graph_dump.path = "./graphs"

Leaves are OptionValues: assigning a value outside the allowed ones raises ValueError naming them.
"""

import itertools

__all__ = ["CompilerConfig"]


class OptionValue:
    """A setting with a default and (optionally) the values it may take."""

    def __init__(self, default, allowed=None):
        self.allowed = allowed
        self.value = default

    @property
    def value(self):
        return self._value

    @value.setter
    def value(self, v):
        if self.allowed is not None and v not in self.allowed:
            raise ValueError(f"{v!r} is not allowed; expected one of {self.allowed}")
        self._value = v

    def __repr__(self) -> str:
        return repr(self._value)


class NpuBaseConfig:
    """A group of settings: `config.x = v` sets the OptionValue x (assigning unknown names fails)."""

    def __setattr__(self, name, value):
        current = self.__dict__.get(name)
        if isinstance(current, OptionValue) and not isinstance(value, OptionValue):
            try:
                current.value = value
            except ValueError as e:
                raise ValueError(f"{type(self).__name__}.{name}: {e}") from None
            return
        if "_frozen" in self.__dict__ and name not in self.__dict__:
            raise AttributeError(f"{type(self).__name__} has no setting {name!r}; known: "
                                 f"{', '.join(k for k in self.__dict__ if not k.startswith('_'))}")
        super().__setattr__(name, value)

    def _freeze(self):
        object.__setattr__(self, "_frozen", True)

    def as_dict(self) -> dict:
        out = {}
        for k, v in self.__dict__.items():
            if k.startswith("_"):
                continue
            if isinstance(v, NpuBaseConfig):
                out.update({f"{k}.{kk}": vv for kk, vv in v.as_dict().items()})
            elif isinstance(v, OptionValue):
                out[k] = v.value
        return out


class _GraphDump(NpuBaseConfig):
    def __init__(self):
        self.type = OptionValue(None, [None, "txt", "pbtxt", "py"])
        self.path = OptionValue(None)
        self._freeze()


class _DebugConfig(NpuBaseConfig):
    def __init__(self):
        self.graph_dump = _GraphDump()
        self._freeze()


class _ExperimentalConfig(NpuBaseConfig):
    """Accepted for compatibility with torchair scripts; see docs/graph_mode.md for their effect."""

    def __init__(self):
        self.frozen_parameter = OptionValue(False, [True, False])
        self.keep_inference_input_mutations = OptionValue(True, [True, False])
        self.static_model_ops_lower_limit = OptionValue(None)
        self._freeze()


class CompilerConfig(NpuBaseConfig):
    """Settings of torchair.get_npu_backend."""

    def __init__(self):
        self.mode = OptionValue("max-autotune", ["max-autotune", "reduce-overhead"])
        self.debug = _DebugConfig()
        self.experimental_config = _ExperimentalConfig()
        object.__setattr__(self, "_dumps", itertools.count())
        self._freeze()

    def _next_dump_index(self) -> int:
        return next(self._dumps)

    def __eq__(self, other):
        return isinstance(other, CompilerConfig) and self.as_dict() == other.as_dict()

    def __hash__(self):
        return hash(tuple(sorted(self.as_dict().items(), key=lambda kv: kv[0])))
