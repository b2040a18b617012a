"""torch_npu.contrib: add-ons ported from the Ascend ecosystem (apex-style amp, ...)."""
