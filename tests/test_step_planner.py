"""The expandable segments' step planner: a recurring training step's requests are served from the
addresses planned from an earlier step, never over a live tensor, and the training it serves computes
what it computes on CPU."""

import gc
import random

import pytest
import torch
import torch.nn.functional as F

from torch_npu.npu import memory as npu_memory


@pytest.fixture
def expandable():
    def clean():
        gc.collect()
        torch.npu.synchronize()
        torch.npu.empty_cache()
    clean()
    torch.npu.memory._set_allocator_settings("expandable_segments:True")
    yield
    clean()
    torch.npu.memory._set_allocator_settings("")


def plan_stats():
    return npu_memory._step_plan_stats()


def delta(before, after):
    return {k: after[k] - before[k] for k in before}


class TinyTransformerBlock(torch.nn.Module):
    def __init__(self, dim=32, vocab=64):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.attn = torch.nn.MultiheadAttention(dim, 4, batch_first=True)
        self.norm = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        x = x + self.attn(x, x, x, need_weights=False)[0]
        x = x + self.mlp(self.norm(x))
        return self.head(x)


class TinyCNN(torch.nn.Module):
    """Three conv-BN-ReLU stages, two of them downsampling, then global pooling and a classifier."""
    def __init__(self, width=16):
        super().__init__()
        layers, cin = [], 3
        for i, cout in enumerate((width, 2 * width, 4 * width)):
            layers += [torch.nn.Conv2d(cin, cout, 3, stride=2 if i else 1, padding=1, bias=False),
                       torch.nn.BatchNorm2d(cout), torch.nn.ReLU(inplace=True)]
            cin = cout
        self.features = torch.nn.Sequential(*layers, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
        self.head = torch.nn.Linear(cin, 64)

    def forward(self, images):
        return self.head(self.features(images)).unsqueeze(1)


def transformer_case(gen):
    model = TinyTransformerBlock()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2), torch.randint(0, 64, (4, 12), generator=gen)


def cnn_case(gen):
    model = TinyCNN()
    return (model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
            torch.randn(16, 3, 32, 32, generator=gen))


def train(settings, device, case=transformer_case, steps=10):
    """Trains a fresh copy of one model on `device` under `settings`, in a loop whose variables hold
    each step's logits and loss into the next step; returns the model, the losses and the step
    planner's statistics after each step."""
    torch.npu.memory._set_allocator_settings(settings)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    model, opt, inputs = case(gen)
    model.to(device)
    inputs = inputs.to(device)
    target = torch.randint(0, 64, (inputs.shape[0], 12 if inputs.dim() == 2 else 1), generator=gen).to(device)
    losses, after = [], []
    for _ in range(steps):
        logits = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, 64), target.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()  # the optimizer's post-hook ends the allocator's step
        losses.append(loss.item())
        after.append(dict(plan_stats(), maps=torch.npu.memory_stats()["num_device_alloc"]))
    return model, losses, after


@pytest.mark.parametrize("case", [transformer_case, cnn_case], ids=["transformer", "cnn"])
def test_training_loop_is_served_from_its_plan_and_matches_unplanned_training(expandable, deterministic, case):
    before = plan_stats()
    planned, planned_losses, after = train("expandable_segments:True", "npu", case)
    d = delta(before, after[-1])
    assert d["steps"] == 10 and d["plans"] >= 1
    # The first steps differ (the optimizer creates its state; the loop variables start holding the
    # previous step's tensors); from the fifth step on every request is served as planned.
    for prev, cur in zip(after[4:], after[5:]):
        assert cur["planned_steps"] == prev["planned_steps"] + 1
        assert cur["misses"] == prev["misses"] and cur["hits"] > prev["hits"]
    # The plan fits in what the first two steps mapped: the reserve stops growing there.
    assert all(a["maps"] == after[1]["maps"] for a in after[1:])
    # The same training with best-fit placement only computes exactly the same; CPU closely.
    reference, reference_losses, _ = train("", "npu", case)
    assert delta(before, plan_stats())["steps"] == 10  # default settings: no step ends
    for p, q in zip(planned.parameters(), reference.parameters()):
        assert torch.equal(p.cpu(), q.cpu())
    assert planned_losses == reference_losses
    _, cpu_losses, _ = train("", "cpu", case)
    torch.testing.assert_close(planned_losses, cpu_losses, rtol=1e-3, atol=1e-4)


def test_a_cpu_optimizer_does_not_end_npu_steps(expandable):
    """Only the first optimizer with npu parameters paces the steps."""
    cpu_model = torch.nn.Linear(4, 4)
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1)
    before = plan_stats()
    for _ in range(3):
        cpu_model(torch.randn(2, 4)).sum().backward()
        cpu_opt.step()
    assert delta(before, plan_stats())["steps"] == 0
    _, _, _ = train("expandable_segments:True", "npu", steps=3)
    for _ in range(3):
        cpu_opt.step()
    assert delta(before, plan_stats())["steps"] == 3


def run_program(rng, steps, recurring=True, side_stream=None, empty_cache_at=None):
    """A random step of allocations and frees, repeated: some tensors live within the step, some
    into the next step, some for good. Checks after every step that no two live tensors overlap and
    that each still holds what was written into it."""
    n = 40
    sizes = [rng.choice([512, 2048, 4096, 30000, 65536, 300000]) // 4 for _ in range(n)]
    lifetimes = [rng.choice(["step", "step", "step", "next", "forever"]) if i % 9 else "forever"
                 for i in range(n)]
    free_after = [rng.randrange(i + 1, n + 1) for i in range(n)]
    on_side = [side_stream is not None and rng.random() < 0.25 for _ in range(n)]
    live = {}  # key -> (tensor, value)
    carried = []
    value = 0.0
    for step in range(steps):
        if empty_cache_at == step:
            torch.npu.synchronize()
            torch.npu.empty_cache()
        step_sizes = list(sizes)
        if not recurring:
            step_sizes = [s + 128 * rng.randrange(1, 50) for s in step_sizes]
        pending = {}
        for i in range(n):
            if i == n // 2 and carried:  # the previous step's carried tensors die mid-step
                for key in carried:
                    del live[key]
                carried = []
            value += 1.0
            if on_side[i]:
                with torch.npu.stream(side_stream):
                    t = torch.full((step_sizes[i],), value, device="npu")
                side_stream.synchronize()
            else:
                t = torch.full((step_sizes[i],), value, device="npu")
            key = (step, i)
            live[key] = (t, value)
            if lifetimes[i] == "step":
                pending.setdefault(free_after[i], []).append(key)
            elif lifetimes[i] == "next":
                carried.append(key)
            elif step > 0:
                del live[key]  # "forever" only for the first step's; later ones are freed at once
            for key in pending.pop(i + 1, []):
                del live[key]
        for keys in pending.values():
            for key in keys:
                del live[key]
        del t
        npu_memory._end_training_step()
        spans = sorted((t.data_ptr(), t.data_ptr() + t.numel() * 4, key) for key, (t, _) in live.items())
        for (a0, a1, ka), (b0, b1, kb) in zip(spans, spans[1:]):
            assert a1 <= b0, f"step {step}: tensors {ka} and {kb} overlap"
        for key, (t, v) in live.items():  # read back on the host: no device allocation in the check
            assert torch.all(t.cpu() == v).item(), f"step {step}: tensor {key} was overwritten"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planned_addresses_never_overlap_live_tensors(expandable, seed):
    before = plan_stats()
    run_program(random.Random(seed), steps=8)
    d = delta(before, plan_stats())
    assert d["plans"] >= 1 and d["hits"] > 0
    assert d["planned_steps"] >= 4


def test_planned_addresses_with_a_side_stream(expandable):
    side = torch.npu.Stream()
    before = plan_stats()
    run_program(random.Random(7), steps=8, side_stream=side)
    d = delta(before, plan_stats())
    assert d["hits"] > 0 and d["planned_steps"] >= 4


def test_empty_cache_forgets_the_plan_and_planning_resumes(expandable):
    before = plan_stats()
    run_program(random.Random(3), steps=10, empty_cache_at=5)
    d = delta(before, plan_stats())
    assert d["plans"] >= 2  # planned again after the cache was emptied
    assert d["planned_steps"] >= 6  # steps 2-4 and 6-9: each plan's first step is recorded


def test_steps_that_never_repeat_are_planned_less_and_less(expandable):
    before = plan_stats()
    run_program(random.Random(4), steps=24, recurring=False)
    d = delta(before, plan_stats())
    assert d["planned_steps"] == 0
    # Planned after each of the first three steps, then after waits of 1, 3, 7... steps (at most 7).
    assert 2 <= d["plans"] <= 7


def test_default_settings_do_not_plan():
    gc.collect()
    torch.npu.empty_cache()
    before = plan_stats()
    model = torch.nn.Linear(8, 8).to("npu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        model(torch.randn(2, 8, device="npu")).sum().backward()
        opt.step()
    assert delta(before, plan_stats()) == {k: 0 for k in before}
