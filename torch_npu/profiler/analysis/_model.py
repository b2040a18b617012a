"""The data of one profiling run as the writers see it: host ops (with their nesting), device tasks linked to
the ops that launched them, memory events and steps, loaded from the run's raw files (FRAMEWORK/).

Times are integer nanoseconds on the Unix clock PyTorch's profiler uses; the runtime's device timestamps are
converted to it when the session stops (one offset per session)."""

from __future__ import annotations

import bisect
import json
import os
from dataclasses import dataclass, field

RAW_DIR = "FRAMEWORK"
HOST_FILE = "host_events.json"
DEVICE_FILE = "device_activities.json"

# nrtActivityKind (runtime/include/npu/activity.h)
HOST_TASK, DEVICE_OP, KERNEL, MEMCPY, MEMSET, EVENT_RECORD, EVENT_WAIT, COLLECTIVE = range(8)
KIND_NAMES = {HOST_TASK: "host_task", DEVICE_OP: "device_op", KERNEL: "kernel", MEMCPY: "memcpy",
              MEMSET: "memset", EVENT_RECORD: "event_record", EVENT_WAIT: "event_wait", COLLECTIVE: "collective"}
COMPUTE_KINDS = (HOST_TASK, DEVICE_OP, KERNEL)
MEMCPY_KINDS = {0: "HtoH", 1: "HtoD", 2: "DtoH", 3: "DtoD"}
STEP_PREFIX = "ProfilerStep#"


@dataclass
class HostOp:
    id: int  # the profiler's correlation id; device tasks carry it
    name: str
    start: int
    end: int
    tid: int
    shapes: list = field(default_factory=list)
    dtypes: list = field(default_factory=list)
    stack: list = field(default_factory=list)
    user_annotation: bool = False
    python: bool = False
    parent: "HostOp | None" = None
    children: list = field(default_factory=list)
    tasks: list = field(default_factory=list)  # device tasks this op launched itself

    @property
    def dur(self) -> int:
        return self.end - self.start

    @property
    def is_step(self) -> bool:
        return self.name.startswith(STEP_PREFIX)

    def self_host_ns(self) -> int:
        return self.dur - sum(c.dur for c in self.children)

    def all_tasks(self):
        yield from self.tasks
        for c in self.children:
            yield from c.all_tasks()


@dataclass
class DeviceTask:
    kind: int
    device: int
    stream: int
    correlation: int
    sequence: int
    api_start: int
    enqueue: int
    start: int
    end: int
    bytes: int
    memcpy_kind: int
    block_dim: int
    failed: bool
    launch_tid: int
    name: str
    op: HostOp | None = None  # the host op that launched it
    step: int | None = None

    @property
    def dur(self) -> int:
        return self.end - self.start

    @property
    def type(self) -> str:
        """The op type column of torch_npu's files: "Add" for aclnnAdd, "mul" for aten::mul.Tensor."""
        if self.kind == DEVICE_OP:
            return self.name[5:] if self.name.startswith("aclnn") else self.name
        if self.kind == HOST_TASK:
            base = self.name.split(" ", 1)[0]
            return base.split("::", 1)[-1].split(".", 1)[0]
        if self.kind == MEMCPY:
            return "MEMCPY_ASYNC" if self.stream else "MEMCPY"
        if self.kind == MEMSET:
            return "MEMSET_ASYNC"
        if self.kind in (EVENT_RECORD, EVENT_WAIT):
            return KIND_NAMES[self.kind].upper()
        return self.name

    @property
    def core(self) -> str:
        """The accelerator core column: what would run it on an Ascend NPU."""
        return {DEVICE_OP: "AI_CORE", KERNEL: "AI_CORE", HOST_TASK: "AI_CPU", COLLECTIVE: "HCCL",
                MEMCPY: "DMA", MEMSET: "DMA"}.get(self.kind, "EVENT")


@dataclass
class MemoryEvent:
    ts: int
    ptr: int
    bytes: int  # negative for a free
    total_allocated: int
    total_reserved: int
    device_type: str
    device: int
    op: str


@dataclass
class Step:
    id: int
    start: int
    end: int
    tid: int


class Run:
    """Everything the writers need, with links: op <-> device tasks, task -> step, op tree per thread."""

    def __init__(self, host: dict, device: dict):
        self.pid = host.get("pid", 0)
        self.trace_start = host.get("trace_start_ns", 0)
        self.thread_names = {int(k): v for k, v in host.get("threads", {}).items()}
        self.ops = [HostOp(**o) for o in host.get("ops", [])]
        self.memory = [MemoryEvent(**m) for m in host.get("memory", [])]
        self.tasks = sorted((DeviceTask(*r) for r in device.get("records", [])), key=lambda t: t.sequence)
        self.device_warning = device.get("warning", "")
        self.iterations = host.get("iterations", [])
        self._link()

    @classmethod
    def load(cls, run_dir: str) -> "Run":
        raw = os.path.join(run_dir, RAW_DIR)
        host_path, device_path = os.path.join(raw, HOST_FILE), os.path.join(raw, DEVICE_FILE)
        if not os.path.isfile(host_path) and not os.path.isfile(device_path):
            raise FileNotFoundError(
                f"{run_dir} is not a torch_npu profiling run: {RAW_DIR}/{HOST_FILE} and {RAW_DIR}/{DEVICE_FILE} "
                "are missing (pass the *_ascend_pt directory that tensorboard_trace_handler wrote)")
        host, device = {}, {}
        if os.path.isfile(host_path):
            with open(host_path) as f:
                host = json.load(f)
        if os.path.isfile(device_path):
            with open(device_path) as f:
                device = json.load(f)
        return cls(host, device)

    @property
    def start_ns(self) -> int:
        times = [o.start for o in self.ops] + [t.start for t in self.tasks if t.start] + [m.ts for m in self.memory]
        return min(times) if times else self.trace_start

    @property
    def devices(self) -> list[int]:
        return sorted({t.device for t in self.tasks})

    def _link(self) -> None:
        # Op tree per thread: sorted by start (outer first), a stack of open parents.
        by_thread: dict[int, list[HostOp]] = {}
        for op in self.ops:
            if not op.python:  # Python frames (with_stack) are drawn, not nested into the op tree
                by_thread.setdefault(op.tid, []).append(op)
        for ops in by_thread.values():
            ops.sort(key=lambda o: (o.start, -o.end))
            stack: list[HostOp] = []
            for op in ops:
                while stack and (op.start >= stack[-1].end or op.end > stack[-1].end):
                    stack.pop()
                if stack:
                    op.parent = stack[-1]
                    stack[-1].children.append(op)
                stack.append(op)
        by_id = {op.id: op for op in self.ops if op.id and not op.user_annotation and not op.python}
        self.os_tid: dict[int, int] = {}  # the profiler's thread ids -> OS thread ids, learnt from launches
        for task in self.tasks:
            op = by_id.get(task.correlation)
            if op is not None:
                task.op = op
                op.tasks.append(task)
                self.os_tid.setdefault(op.tid, task.launch_tid)
        # Steps: ProfilerStep#N spans on the host; a task belongs to the step it was launched in.
        self.steps = sorted((Step(int(o.name[len(STEP_PREFIX):]), o.start, o.end, o.tid)
                             for o in self.ops if o.is_step and o.name[len(STEP_PREFIX):].isdigit()),
                            key=lambda s: s.start)
        starts = [s.start for s in self.steps]
        for task in self.tasks:
            i = bisect.bisect_right(starts, task.enqueue) - 1
            if i >= 0 and task.enqueue <= self.steps[i].end:
                task.step = self.steps[i].id

    def thread_name(self, tid: int) -> str:
        os_tid = self.os_tid.get(tid, tid)
        return self.thread_names.get(os_tid) or f"Thread {os_tid}"

    def step_of_time(self, ts: int) -> int | None:
        for s in self.steps:
            if s.start <= ts <= s.end:
                return s.id
        return None


def us(ns: int) -> str:
    """Exact microseconds with three decimals, as torch_npu's CSV files write times."""
    sign = "-" if ns < 0 else ""
    ns = abs(int(ns))
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


def dur_us(ns: int) -> float:
    return round(ns / 1000.0, 3)
