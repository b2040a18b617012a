"""mp.spawn, as seed 003 starts one process per device: MASTER_ADDR / MASTER_PORT set by the parent,
init_process_group(backend="hccl", world_size=..., rank=...) in each child."""

import os
import runpy
import sys

import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))


def worker(rank, world, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    sys.path.insert(0, HERE)
    sys.argv = [os.path.join(HERE, "launch_modes.py"), "env"]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    mp.spawn(worker, args=(2, sys.argv[1]), nprocs=2)
