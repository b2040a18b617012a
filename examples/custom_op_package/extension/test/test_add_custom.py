"""myops::add_custom (custom_ops.add_custom) on npu against torch.add on the CPU: forward and backward."""

import copy

import torch
import torch_npu  # noqa: F401
from torch_npu.testing.testcase import TestCase, run_tests

import custom_ops


class TestCustomAdd(TestCase):
    def test_add_custom(self):
        x_cpu = torch.randn([8, 2048], dtype=torch.float16)
        y_cpu = torch.randn([8, 2048], dtype=torch.float16)
        x_npu, y_npu = copy.deepcopy(x_cpu).npu(), copy.deepcopy(y_cpu).npu()
        x_cpu.requires_grad = True
        y_cpu.requires_grad = True
        x_npu.requires_grad = True
        y_npu.requires_grad = True

        # calculate on npu
        output = custom_ops.add_custom(x_npu, y_npu)
        output.backward(output)

        # calculate on cpu
        cpuout = torch.add(x_cpu, y_cpu)
        cpuout.backward(cpuout)

        # compare result
        self.assertRtolEqual(output, cpuout)
        self.assertRtolEqual(x_npu.grad, x_cpu.grad)
        self.assertRtolEqual(y_npu.grad, y_cpu.grad)


if __name__ == "__main__":
    run_tests()
