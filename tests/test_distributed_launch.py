"""Starting hccl jobs the ways users do: env:// / tcp:// / device_id / backend=None / "cpu:gloo,npu:hccl"
/ init_device_mesh, mp.spawn, torchrun on one node, and torchrun as two nodes rendezvousing on
127.0.0.1 (the same command runs across machines with the master's address)."""

import os
import sys

from dist_launch import CASES, base_env, check_all, free_port, run_processes, run_ranks

SCRIPT = os.path.join(CASES, "launch_modes.py")


def _trained(results, world=2):
    text = "".join(r.out for r in results)
    for rank in range(world):
        assert f"ok ddp steps on rank {rank} of {world}" in text, results


def test_init_methods():
    ports = ",".join(str(free_port()) for _ in range(6))
    results = check_all(run_ranks("launch_modes", args=["env,tcp,device_id,none,mixed,mesh", ports], timeout=240))
    for mode in ("env", "tcp", "device_id", "none", "mixed", "mesh"):
        assert all(f"ok {mode}\n" in r.out for r in results), results


def test_mp_spawn():
    results = check_all(run_processes([([sys.executable, os.path.join(CASES, "spawn.py"), str(free_port())],
                                        base_env())], timeout=150))
    _trained(results)


def test_torchrun_single_node():
    """torch_npu's torchrun (torch_npu.distributed.run) with its extra flag."""
    argv = [sys.executable, "-m", "torch_npu.distributed.run", "--enable_tiered_parallel_tcpstore=true",
            "--nproc_per_node=2", "--master_addr=127.0.0.1", f"--master_port={free_port()}", SCRIPT, "env"]
    _trained(check_all(run_processes([(argv, base_env())], timeout=150)))


def test_torchrun_two_nodes_on_loopback():
    port = free_port()
    commands = []
    for node in range(2):
        argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node_rank={node}",
                "--nproc_per_node=1", "--master_addr=127.0.0.1", f"--master_port={port}", SCRIPT, "env"]
        commands.append((argv, base_env()))
    _trained(check_all(run_processes(commands, timeout=150)))
