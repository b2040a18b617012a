"""CPU references of torch_npu's custom ops by family (one module per family folder of csrc/custom/), written from
the ops' documented definitions in plain torch; the family's tests import theirs as `ref`."""
