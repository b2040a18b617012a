"""torch.ops.npu.my_add against torch.add on the CPU."""

import torch
from torch_npu.testing.testcase import TestCase, run_tests

import op_extension  # noqa: F401  (registers torch.ops.npu.my_add)


class TestCustomAdd(TestCase):
    def test_add_custom_ops(self):
        length = [8, 2048]
        x = torch.rand(length, device="cpu", dtype=torch.float16)
        y = torch.rand(length, device="cpu", dtype=torch.float16)
        x_npu = x.npu()
        y_npu = y.npu()
        output = torch.ops.npu.my_add(x_npu, y_npu)
        cpuout = torch.add(x, y)
        self.assertRtolEqual(output, cpuout)


if __name__ == "__main__":
    run_tests()
