"""torch.npu.config: process-wide switches of the npu adapter.

`allow_internal_format`: whether ops may keep tensors in a private (device-internal) storage format
instead of the plain ND layout. torch_npu scripts set it to False to make every tensor ND; on the
software NPU tensors are ND unless a private format is requested explicitly.
"""

allow_internal_format = False
