"""20 init / destroy cycles release their threads and memory; a group destroyed with point-to-point work
still queued finishes that work first (no hang at exit, the data arrives)."""

import os
import time

import torch
import torch.distributed as dist

from common import LOCAL_RANK, RANK, WORLD, done

torch.npu.set_device(LOCAL_RANK)
dev = torch.device("npu", LOCAL_RANK)
store = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), WORLD, RANK == 0)


def threads():
    return len(os.listdir("/proc/self/task"))


def settled_threads():
    """The thread count once it has stopped falling (send / recv threads end after their last transfer)."""
    count, since = threads(), time.time()
    while time.time() - since < 0.5:
        time.sleep(0.05)
        if threads() != count:
            count, since = threads(), time.time()
    return count


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def cycle(i):
    dist.init_process_group("hccl", store=dist.PrefixStore(f"cycle{i}/", store), rank=RANK, world_size=WORLD)
    t = torch.ones(1 << 16, device=dev)
    dist.all_reduce(t)
    got = torch.empty(8, device=dev)
    reqs = [dist.isend(torch.full((8,), float(RANK), device=dev), (RANK + 1) % WORLD),
            dist.irecv(got, (RANK - 1) % WORLD)]
    for r in reqs:
        r.wait()
    assert t.cpu()[0].item() == WORLD and got.cpu()[0].item() == (RANK - 1) % WORLD
    dist.destroy_process_group()
    del t, got, reqs


cycle(0)
torch.npu.synchronize()
base_threads, base_rss = settled_threads(), rss_mb()
base_mem = torch.npu.memory_allocated(dev)
for i in range(1, 21):
    cycle(i)
torch.npu.synchronize()
after_threads = settled_threads()
print(f"threads {base_threads} -> {after_threads}, rss {base_rss:.0f} -> {rss_mb():.0f} MB, npu memory "
      f"{base_mem} -> {torch.npu.memory_allocated(dev)}", flush=True)
assert after_threads <= base_threads, (base_threads, after_threads)
assert torch.npu.memory_allocated(dev) == base_mem
assert rss_mb() - base_rss < 64, (base_rss, rss_mb())
done("cycles")

# destroy_process_group right after issuing work the peer serves late: the work completes first.
dist.init_process_group("hccl", store=dist.PrefixStore("late/", store), rank=RANK, world_size=WORLD)
if RANK == 0:
    late = torch.zeros(4, device=dev)
    dist.isend(torch.full((4,), 7.0, device=dev), 1)
    dist.irecv(late, 1)
    dist.destroy_process_group()
    assert late.cpu().tolist() == [3.0] * 4, late
else:
    time.sleep(1.0)
    got = torch.empty(4, device=dev)
    dist.recv(got, 0)
    dist.send(torch.full((4,), 3.0, device=dev), 0)
    assert got.cpu().tolist() == [7.0] * 4, got
    dist.destroy_process_group()
done("destroy flushes queued work")
