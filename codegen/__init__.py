"""Code generator for torch_npu's op glue (declarations, registrations, autograd, Python bindings)."""
