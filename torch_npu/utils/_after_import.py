"""after_import(name, callback): run torch_npu's registrations for an optional PyTorch module (Dynamo's
device interface, DTensor's op rules) when that module is first imported, not at torch_npu's import,
so `import torch` stays as fast as the user's program needs."""

import importlib.abc
import importlib.util
import sys

_pending = {}  # module name -> callbacks to run once it has executed


class _AfterImport(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in _pending:
            return None
        callbacks = _pending.pop(fullname)
        if not _pending:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)  # the other finders' spec (this one is out of the way)
        if spec is None or spec.loader is None:
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            for callback in callbacks:
                callback()

        spec.loader.exec_module = exec_module
        return spec


_finder = _AfterImport()


def after_import(name: str, callback) -> None:
    """Calls `callback()` right after module `name` has been imported (now, if it already is)."""
    if name in sys.modules:
        callback()
        return
    _pending.setdefault(name, []).append(callback)
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
