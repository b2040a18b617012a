"""Collectives whose ranks contribute different numbers of rows (torch_npu.distributed's *_uneven): the
rows travel padded to the largest share through the group's regular collective, and each rank keeps the
rows that are real."""

import torch
import torch.distributed as dist

__all__ = ["all_gather_into_tensor_uneven", "reduce_scatter_tensor_uneven"]


class _ThenWork:
    """The Work of an async uneven collective: waiting also moves the real rows into place."""

    def __init__(self, work, finish):
        self._work, self._finish, self._done = work, finish, False

    def wait(self, timeout=None):
        if not self._done:
            self._work.wait() if timeout is None else self._work.wait(timeout)
            self._finish()
            self._done = True
        return True

    def is_completed(self) -> bool:
        return self._done

    def is_success(self) -> bool:
        return self._done

    def get_future(self):
        future = torch.futures.Future()
        self.wait()
        future.set_result(None)
        return future


def _check_rows_alike(name, output, input):
    if output.shape[1:] != input.shape[1:] or output.dtype != input.dtype:
        raise ValueError(f"{name}: output {tuple(output.shape)} {output.dtype} and input {tuple(input.shape)} "
                         f"{input.dtype} must agree beyond dim 0")


def _splits(name, sizes, total, world, rank_rows, rank):
    sizes = [int(s) for s in sizes]
    if len(sizes) != world:
        raise ValueError(f"{name}: {len(sizes)} split sizes for a group of {world} ranks; give one per rank")
    if any(s < 0 for s in sizes):
        raise ValueError(f"{name}: split sizes must be >= 0, got {sizes}")
    if sum(sizes) != total:
        raise ValueError(f"{name}: split sizes add up to {sum(sizes)} but the gathered tensor has {total} rows")
    if sizes[rank] != rank_rows:
        raise ValueError(f"{name}: this rank's split size is {sizes[rank]} but its own tensor has {rank_rows} rows")
    return sizes


def all_gather_into_tensor_uneven(output, input, output_split_sizes=None, group=None, async_op=False):
    """output = the ranks' inputs stacked along dim 0; rank r contributes output_split_sizes[r] rows
    (None: equal shares, as dist.all_gather_into_tensor)."""
    if output_split_sizes is None:
        return dist.all_gather_into_tensor(output, input, group=group, async_op=async_op)
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    _check_rows_alike("all_gather_into_tensor_uneven", output, input)
    sizes = _splits("all_gather_into_tensor_uneven", output_split_sizes, output.size(0), world, input.size(0), rank)
    most = max(sizes)
    padded = input.new_zeros((most,) + tuple(input.shape[1:]))
    padded[:input.size(0)].copy_(input)
    gathered = input.new_empty((most * world,) + tuple(input.shape[1:]))
    work = dist.all_gather_into_tensor(gathered, padded, group=group, async_op=async_op)

    def finish():
        offset = 0
        for r, rows in enumerate(sizes):
            output[offset:offset + rows].copy_(gathered[r * most:r * most + rows])
            offset += rows

    if async_op:
        return _ThenWork(work, finish)
    finish()
    return None


def reduce_scatter_tensor_uneven(output, input, input_split_sizes=None, op=dist.ReduceOp.SUM, group=None,
                                 async_op=False):
    """output = the reduction over ranks of this rank's share of input's rows; rank r's share is
    input_split_sizes[r] rows (None: equal shares, as dist.reduce_scatter_tensor)."""
    if input_split_sizes is None:
        return dist.reduce_scatter_tensor(output, input, op=op, group=group, async_op=async_op)
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    _check_rows_alike("reduce_scatter_tensor_uneven", output, input)
    sizes = _splits("reduce_scatter_tensor_uneven", input_split_sizes, input.size(0), world, output.size(0), rank)
    most = max(sizes)
    padded = input.new_zeros((most * world,) + tuple(input.shape[1:]))
    offset = 0
    for r, rows in enumerate(sizes):
        padded[r * most:r * most + rows].copy_(input[offset:offset + rows])
        offset += rows
    mine = input.new_empty((most,) + tuple(input.shape[1:]))
    work = dist.reduce_scatter_tensor(mine, padded, op=op, group=group, async_op=async_op)

    def finish():
        output.copy_(mine[:output.size(0)])

    if async_op:
        return _ThenWork(work, finish)
    finish()
    return None
