"""The operator functional test of the adaptation guide, as users write it: add over formats 0, 3
and 29 (create_common_tensor casts the npu input), compared with the CPU through assertRtolEqual."""

import numpy as np
import torch

import torch_npu  # noqa: F401
from torch_npu.testing.common_utils import create_common_tensor
from torch_npu.testing.testcase import TestCase, run_tests


class TestAdd(TestCase):
    def cpu_op_exec(self, input1, input2):
        output = torch.add(input1, input2, alpha=1)
        return output.numpy()

    def npu_op_exec_new(self, input1, input2):
        output = torch.add(input1, input2, alpha=1)
        output = output.to("cpu")
        return output.numpy()

    def add_result(self, shape_format):
        for item in shape_format:
            cpu_input1, npu_input1 = create_common_tensor(item, 0, 100)
            cpu_input2, npu_input2 = create_common_tensor(item, 0, 100)
            self.assertEqual(torch_npu.get_npu_format(npu_input1), item[1])
            if cpu_input1.dtype == torch.float16:
                cpu_input1 = cpu_input1.to(torch.float32)
                cpu_input2 = cpu_input2.to(torch.float32)
            cpu_output = self.cpu_op_exec(cpu_input1, cpu_input2)
            npu_output = self.npu_op_exec_new(npu_input1, npu_input2)
            cpu_output = cpu_output.astype(npu_output.dtype)
            self.assertRtolEqual(cpu_output, npu_output)

    def test_add_shape_format_fp32_2d(self):
        format_list = [0, 3, 29]
        shape_format = [[np.float32, i, [5, 256]] for i in format_list]
        self.add_result(shape_format)

    def test_add_shape_format_fp16_4d(self):
        format_list = [0, 3, 4, 29]
        shape_format = [[np.float16, i, [4, 20, 5, 7]] for i in format_list]
        self.add_result(shape_format)

    def test_add_shape_format_int32_3d(self):
        format_list = [0, 3, 29]
        shape_format = [[np.int32, i, [3, 17, 33]] for i in format_list]
        self.add_result(shape_format)


if __name__ == "__main__":
    run_tests()
