"""npu random number generation: seeding, reproducibility, state round trips, generators per device."""

import pytest
import torch

RANDOM_OPS = {
    "randn": lambda g=None: torch.randn(4, 5, device="npu", generator=g),
    "rand": lambda g=None: torch.rand(4, 5, device="npu", generator=g),
    "randint": lambda g=None: torch.randint(-5, 17, (4, 5), device="npu", generator=g),
    "randperm": lambda g=None: torch.randperm(20, device="npu", generator=g),
    "dropout": lambda g=None: torch.nn.functional.dropout(torch.ones(64, device="npu"), p=0.5),
    "normal_": lambda g=None: torch.empty(4, 5, device="npu").normal_(2.0, 3.0, generator=g),
    "uniform_": lambda g=None: torch.empty(4, 5, device="npu").uniform_(-2.0, 5.0, generator=g),
    "bernoulli_": lambda g=None: torch.empty(64, device="npu").bernoulli_(0.3, generator=g),
    "multinomial": lambda g=None: torch.multinomial(torch.ones(10, device="npu"), 5, generator=g),
    "randn_like": lambda g=None: torch.randn_like(torch.empty(3, 3, device="npu")),
    "exponential_": lambda g=None: torch.empty(8, device="npu").exponential_(generator=g),
}


def _draw(name, seed, g=None):
    if g is None:
        torch.npu.manual_seed(seed)
    else:
        g.manual_seed(seed)
    out = RANDOM_OPS[name](g)
    assert out.device.type == "npu"
    return out.cpu()


@pytest.mark.parametrize("name", RANDOM_OPS)
def test_manual_seed_reproducible(name):
    a = _draw(name, 1234)
    b = _draw(name, 1234)
    assert torch.equal(a, b)
    # a different seed gives a different draw (the odds of a collision are negligible at these sizes)
    c = _draw(name, 4321)
    assert not torch.equal(a, c)


@pytest.mark.parametrize("name", [n for n in RANDOM_OPS if n not in ("dropout", "randn_like")])
def test_generator_object_reproducible(name):
    g = torch.Generator(device="npu")
    assert g.device.type == "npu"
    a = _draw(name, 99, g)
    b = _draw(name, 99, g)
    assert torch.equal(a, b)


def test_values_follow_the_requested_distribution():
    torch.npu.manual_seed(0)
    r = torch.rand(2000, device="npu").cpu()
    assert r.min() >= 0 and r.max() < 1
    u = torch.empty(2000, device="npu").uniform_(-2.0, 5.0).cpu()
    assert u.min() >= -2.0 and u.max() < 5.0
    ri = torch.randint(-5, 17, (2000,), device="npu").cpu()
    assert ri.min() >= -5 and ri.max() < 17 and ri.dtype == torch.int64
    b = torch.empty(2000, device="npu").bernoulli_(0.3).cpu()
    assert set(b.unique().tolist()) <= {0.0, 1.0}
    d = torch.nn.functional.dropout(torch.ones(2000, device="npu"), p=0.5).cpu()
    assert set(d.unique().tolist()) <= {0.0, 2.0}
    p = torch.randperm(50, device="npu").cpu()
    assert torch.equal(p.sort().values, torch.arange(50))
    n = torch.randn(20000, device="npu").cpu()
    assert abs(n.mean().item()) < 0.1 and abs(n.std().item() - 1) < 0.1


def test_seeded_draws_are_the_same_with_sync_between():
    torch.npu.manual_seed(7)
    a = torch.randn(100, device="npu")
    b = torch.randn(100, device="npu")
    torch.npu.manual_seed(7)
    a2 = torch.randn(100, device="npu")
    torch.npu.synchronize()
    b2 = torch.randn(100, device="npu")
    assert torch.equal(a.cpu(), a2.cpu()) and torch.equal(b.cpu(), b2.cpu())
    assert not torch.equal(a.cpu(), b.cpu())  # the generator advances


def test_get_set_rng_state_round_trip():
    torch.npu.manual_seed(3)
    torch.randn(10, device="npu")
    state = torch.npu.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    a = torch.rand(50, device="npu").cpu()
    b = torch.randint(0, 100, (50,), device="npu").cpu()
    torch.npu.set_rng_state(state)
    assert torch.equal(torch.rand(50, device="npu").cpu(), a)
    assert torch.equal(torch.randint(0, 100, (50,), device="npu").cpu(), b)


def test_get_set_rng_state_for_specific_device():
    state = torch.npu.get_rng_state(2)
    with torch.npu.device(2):
        a = torch.randn(10, device="npu").cpu()
    torch.npu.set_rng_state(state, "npu:2")
    assert torch.equal(torch.randn(10, device="npu:2").cpu(), a)


def test_set_rng_state_rejects_wrong_type():
    with pytest.raises(TypeError):
        torch.npu.set_rng_state(torch.zeros(10))
    with pytest.raises(TypeError):
        torch.npu.set_rng_state([1, 2, 3])


def test_get_set_rng_state_all():
    states = torch.npu.get_rng_state_all()
    assert len(states) == torch.npu.device_count()
    first = [torch.randn(5, device=f"npu:{i}").cpu() for i in range(3)]
    torch.npu.set_rng_state_all(states)
    again = [torch.randn(5, device=f"npu:{i}").cpu() for i in range(3)]
    for x, y in zip(first, again):
        assert torch.equal(x, y)


def test_manual_seed_seeds_only_current_device():
    torch.npu.manual_seed_all(11)
    ref3 = torch.randn(6, device="npu:3").cpu()
    torch.npu.manual_seed_all(11)
    torch.npu.manual_seed(12)  # current device (0) only
    assert torch.equal(torch.randn(6, device="npu:3").cpu(), ref3)
    with torch.npu.device(3):
        torch.npu.manual_seed(12)
    torch.npu.manual_seed(12)
    assert torch.equal(torch.randn(6, device="npu:3").cpu(), torch.randn(6, device="npu:0").cpu())


def test_manual_seed_all_seeds_every_device():
    torch.npu.manual_seed_all(21)
    a = [torch.rand(8, device=f"npu:{i}").cpu() for i in range(torch.npu.device_count())]
    torch.npu.manual_seed_all(21)
    b = [torch.rand(8, device=f"npu:{i}").cpu() for i in reversed(range(torch.npu.device_count()))]
    for x, y in zip(a, reversed(b)):
        assert torch.equal(x, y)


def test_devices_have_independent_generators():
    torch.npu.manual_seed_all(5)
    a0 = torch.randn(10, device="npu:0").cpu()
    a0_next = torch.randn(10, device="npu:0").cpu()
    torch.npu.manual_seed_all(5)
    torch.randn(1000, device="npu:1")  # draws on npu:1 must not advance npu:0
    b0 = torch.randn(10, device="npu:0").cpu()
    torch.randn(1000, device="npu:2")
    b0_next = torch.randn(10, device="npu:0").cpu()
    assert torch.equal(a0, b0)
    assert torch.equal(a0_next, b0_next)


def test_initial_seed_and_seed():
    torch.npu.manual_seed(123)
    assert torch.npu.initial_seed() == 123
    torch.npu.seed()
    s = torch.npu.initial_seed()
    a = torch.randn(8, device="npu").cpu()
    torch.npu.manual_seed(s)
    assert torch.equal(torch.randn(8, device="npu").cpu(), a)
    torch.npu.seed()
    assert torch.npu.initial_seed() != s  # a fresh, non-deterministic seed (64-bit: no collision)


def test_seed_all():
    torch.npu.seed_all()
    s = torch.npu.initial_seed()
    with torch.npu.device(4):
        assert torch.npu.initial_seed() == s


def test_torch_manual_seed_also_seeds_npu():
    torch.manual_seed(77)
    a = torch.randn(10, device="npu").cpu()
    a5 = torch.randn(10, device="npu:5").cpu()
    torch.manual_seed(77)
    assert torch.equal(torch.randn(10, device="npu").cpu(), a)
    assert torch.equal(torch.randn(10, device="npu:5").cpu(), a5)
    assert torch.npu.initial_seed() == 77


def test_npu_random_ops_do_not_touch_cpu_generator():
    cpu_state = torch.get_rng_state()
    torch.randn(100, device="npu")
    torch.empty(100, device="npu").uniform_()
    torch.empty(100, device="npu").bernoulli_(0.5)
    torch.randint(0, 9, (100,), device="npu")
    assert torch.equal(torch.get_rng_state(), cpu_state)


def test_npu_dropout_does_not_touch_cpu_generator():
    cpu_state = torch.get_rng_state()
    torch.nn.functional.dropout(torch.ones(100, device="npu"), 0.5)
    assert torch.equal(torch.get_rng_state(), cpu_state)


def test_cpu_random_ops_do_not_touch_npu_generator():
    npu_state = torch.npu.get_rng_state()
    torch.randn(100)
    torch.rand(10).bernoulli_()
    assert torch.equal(torch.npu.get_rng_state(), npu_state)


def test_generator_object_independent_of_default_generator():
    g = torch.Generator(device="npu")
    g.manual_seed(8)
    state = torch.npu.get_rng_state()
    a = torch.randn(16, device="npu", generator=g).cpu()
    assert torch.equal(torch.npu.get_rng_state(), state)  # the default generator did not move
    g2 = torch.Generator(device="npu").manual_seed(8)
    assert torch.equal(torch.randn(16, device="npu", generator=g2).cpu(), a)
    assert g.initial_seed() == 8


def test_generator_on_other_device_and_state():
    g = torch.Generator(device="npu:2")
    assert g.device == torch.device("npu", 2)
    g.manual_seed(1)
    st = g.get_state()
    a = torch.rand(5, device="npu:2", generator=g).cpu()
    g.set_state(st)
    assert torch.equal(torch.rand(5, device="npu:2", generator=g).cpu(), a)


def test_default_generators():
    gens = torch.npu.default_generators
    assert len(gens) == torch.npu.device_count()
    assert gens[1].device == torch.device("npu", 1)
    gens[1].manual_seed(31)
    a = torch.randn(4, device="npu:1").cpu()
    torch.npu.default_generators[1].manual_seed(31)
    assert torch.equal(torch.randn(4, device="npu:1").cpu(), a)
    with pytest.raises(IndexError):
        gens[torch.npu.device_count()]


def test_fork_rng_restores_npu_state():
    torch.npu.manual_seed(9)
    with torch.random.fork_rng(devices=[0], device_type="npu"):
        torch.npu.manual_seed(1000)
        torch.randn(100, device="npu")
    after = torch.randn(5, device="npu").cpu()
    torch.npu.manual_seed(9)
    assert torch.equal(torch.randn(5, device="npu").cpu(), after)


@pytest.mark.parametrize("fn", [
    lambda x: torch.nn.functional.dropout(x, 0.5, inplace=True),
    lambda x: torch.nn.functional.dropout2d(x.view(2, 8, 2, 2), 0.5),
    lambda x: torch.nn.functional.alpha_dropout(x, 0.5, training=True),
    lambda x: torch.nn.functional.dropout(x.half(), 0.5),
], ids=["inplace", "dropout2d", "alpha_dropout", "float16"])
def test_dropout_variants_use_npu_generator(fn):
    cpu_state = torch.get_rng_state()
    torch.npu.manual_seed(6)
    a = fn(torch.ones(64, device="npu")).cpu()
    torch.npu.manual_seed(6)
    b = fn(torch.ones(64, device="npu")).cpu()
    torch.npu.manual_seed(7)
    c = fn(torch.ones(64, device="npu")).cpu()
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    assert torch.equal(torch.get_rng_state(), cpu_state)


def test_dropout_backward_uses_the_same_mask():
    x = torch.ones(200, device="npu", requires_grad=True)
    y = torch.nn.functional.dropout(x, 0.3)
    (y * 3).sum().backward()
    kept = (y.detach().cpu() != 0).float()
    torch.testing.assert_close(x.grad.cpu(), kept * 3 / 0.7)


def test_dropout_edge_probabilities_match_cpu():
    x = torch.randn(50)
    for p in (0.0, 1.0):
        torch.testing.assert_close(torch.nn.functional.dropout(x.npu(), p).cpu(),
                                   torch.nn.functional.dropout(x, p))
    torch.testing.assert_close(torch.nn.functional.dropout(x.npu(), 0.5, training=False).cpu(), x)


def test_dropout_on_other_device_uses_that_device_generator():
    torch.npu.manual_seed_all(5)
    a = torch.nn.functional.dropout(torch.ones(64, device="npu:2"), 0.5).cpu()
    torch.npu.manual_seed_all(5)
    torch.nn.functional.dropout(torch.ones(64, device="npu:0"), 0.5)  # must not advance npu:2
    b = torch.nn.functional.dropout(torch.ones(64, device="npu:2"), 0.5).cpu()
    assert torch.equal(a, b)


def test_dropout_module_reproducible_with_npu_seed():
    x = torch.ones(200, device="npu")
    m = torch.nn.Dropout(0.25)
    torch.npu.manual_seed(4)
    a = m(x).cpu()
    torch.npu.manual_seed(4)
    assert torch.equal(m(x).cpu(), a)


def test_dropout_module_train_and_eval():
    x = torch.ones(200, device="npu")
    m = torch.nn.Dropout(0.25)
    y = m(x).cpu()
    kept = y != 0
    assert kept.any() and not kept.all()
    torch.testing.assert_close(y, kept.float() / 0.75)
    m.eval()
    assert torch.equal(m(x).cpu(), torch.ones(200))
