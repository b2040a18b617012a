"""torch_npu.distributed's uneven all_gather / reduce_scatter (sync and async) against CPU references,
and their clear errors."""

import pytest
import torch
import torch.distributed as dist

import torch_npu.distributed as tdist
from common import LOCAL_RANK, RANK, WORLD, close, data, done, init

dev = init(device_id=torch.device("npu", LOCAL_RANK))
sizes = [r + 2 for r in range(WORLD)]  # rank r has r + 2 rows
inputs = [data(r, torch.float32, shape=(sizes[r], 3)) for r in range(WORLD)]

out = torch.empty(sum(sizes), 3, device=dev)
assert tdist.all_gather_into_tensor_uneven(out, inputs[RANK].to(dev), sizes) is None
close(out, torch.cat(inputs), "all_gather_into_tensor_uneven")
out2 = torch.empty(sum(sizes), 3, device=dev)
work = tdist.all_gather_into_tensor_uneven(out2, inputs[RANK].to(dev), sizes, async_op=True)
work.wait()
close(out2, torch.cat(inputs), "all_gather_into_tensor_uneven async")

# Every rank holds all rows; rank r receives the sum of everybody's rows of its share.
full = [data(10 + r, torch.float32, shape=(sum(sizes), 3)) for r in range(WORLD)]
mine = torch.empty(sizes[RANK], 3, device=dev)
tdist.reduce_scatter_tensor_uneven(mine, full[RANK].to(dev), sizes)
start = sum(sizes[:RANK])
close(mine, sum(full)[start:start + sizes[RANK]], "reduce_scatter_tensor_uneven")
mine_max = torch.empty(sizes[RANK], 3, device=dev)
tdist.reduce_scatter_tensor_uneven(mine_max, full[RANK].to(dev), sizes, op=dist.ReduceOp.MAX, async_op=True).wait()
close(mine_max, torch.stack(full).amax(0)[start:start + sizes[RANK]], "reduce_scatter_tensor_uneven max async")

with pytest.raises(ValueError, match="split sizes for a group of"):
    tdist.all_gather_into_tensor_uneven(out, inputs[RANK].to(dev), sizes[:1])
with pytest.raises(ValueError, match="this rank's split size"):
    tdist.all_gather_into_tensor_uneven(out, torch.ones(9, 3, device=dev), sizes)
done("uneven")
dist.destroy_process_group()
