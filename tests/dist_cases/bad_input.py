"""Bad arguments raise at the call, on the issuing rank, with what to do; the group stays usable."""

import pytest
import torch
import torch.distributed as dist

from common import LOCAL_RANK, RANK, WORLD, close, data, done, init

dev = init(device_id=torch.device("npu", LOCAL_RANK))
other = torch.device("npu", (LOCAL_RANK + 2) % torch.npu.device_count())

with pytest.raises(RuntimeError, match=r"runs hccl, which takes npu tensors.*\.npu\(\).*cpu:gloo,npu:hccl"):
    dist.all_reduce(torch.ones(3))
with pytest.raises(ValueError, match=rf"on {other} but process group 0 \(default_pg\) runs on npu:{LOCAL_RANK}.*"
                                     r"set_device"):
    dist.all_reduce(torch.ones(3, device=other))
with pytest.raises(ValueError, match=r"expected npu tensors, got a tensor on cpu"):
    dist.all_gather([torch.ones(3, device=dev), torch.ones(3)], torch.ones(3, device=dev))
with pytest.raises(TypeError, match=r"cannot reduce Short tensors \(supported: float32.*\.to\(torch.int32\)"):
    dist.all_reduce(torch.ones(3, dtype=torch.int16, device=dev))
with pytest.raises(TypeError, match=r"BAND needs integer or bool tensors, got Float"):
    dist.all_reduce(torch.ones(3, device=dev), op=dist.ReduceOp.BAND)
with pytest.raises(TypeError, match=r"PREMUL_SUM needs floating-point tensors"):
    dist.all_reduce(torch.ones(3, dtype=torch.int32, device=dev), op=dist._make_nccl_premul_sum(2.0))
with pytest.raises(ValueError, match=r"needs a source rank.*pass src="):
    dist.recv(torch.ones(3, device=dev))
with pytest.raises(ValueError, match=r"output list has 1 tensors; it needs one per rank"):
    dist.all_gather([torch.ones(3, device=dev)], torch.ones(3, device=dev))
with pytest.raises(ValueError, match=r"the output has 5 elements; it needs the group size"):
    dist.all_gather_into_tensor(torch.ones(5, device=dev), torch.ones(3, device=dev))
with pytest.raises(ValueError, match=r"input_split_sizes add up to 5 but the input has 4 rows"):
    dist.all_to_all_single(torch.ones(4, device=dev), torch.ones(4, device=dev), [2, 2], [2, 3])
with pytest.raises(TypeError, match=r"takes pg_options=torch_npu\._C\._distributed_c10d\.ProcessGroupHCCL\.Options\(\), got object"):
    dist.new_group([0, 1], pg_options=object())

# Nothing above reached the wire: the group still works.
t = data(RANK, torch.float32).to(dev)
dist.all_reduce(t)
close(t, sum(data(r, torch.float32) for r in range(WORLD)), "all_reduce after bad calls")
dist.destroy_process_group()
done("bad input")
