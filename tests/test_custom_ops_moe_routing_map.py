"""The rest of MoE routing (npu_moe_update_expert, npu_moe_token_permute / unpermute_with_routing_map and their
grads) against the CPU references of op_refs/cache_rope.py, with Meta
kernels, device-op counts and argument errors."""

import pytest
import torch

import torch_npu
from op_refs import cache_rope as ref


def placement_table(experts, max_copies, ranks, g):
    """eplb_table rows: [count, distinct rank ids..., unused zeros]."""
    table = torch.zeros(experts, max_copies + 1, dtype=torch.int32)
    for e in range(experts):
        count = int(torch.randint(1, max_copies + 1, (1,), generator=g))
        table[e, 0] = count
        table[e, 1:count + 1] = torch.randperm(ranks, generator=g)[:count].to(torch.int32)
    return table


@pytest.mark.parametrize("id_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("balance_mode", [0, 1])
@pytest.mark.parametrize("scale_dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_moe_update_expert(id_dtype, balance_mode, scale_dtype):
    g = torch.Generator().manual_seed(balance_mode)
    bs, k, experts, world = 12, 4, 16, 8
    table = placement_table(experts, 4, world, g)
    ids = torch.randint(0, experts, (bs, k), generator=g).to(id_dtype)
    scales = torch.rand(bs, k, generator=g).sort(-1, descending=True).values.to(scale_dtype)
    threshold = (torch.rand(1, k, generator=g) * 0.4).float()
    active = torch.arange(bs) < 9  # true before false, as documented
    for rank in (0, 5, 7):
        out_ids, out_mask = torch_npu.npu_moe_update_expert(
            ids.npu(), table.npu(), expert_scales=scales.npu(), pruning_threshold=threshold.npu(),
            active_mask=active.npu(), local_rank_id=rank, world_size=world, balance_mode=balance_mode)
        expect_ids, expect_mask = ref.moe_update_expert(ids, table, scales, threshold, active, rank, world,
                                                        balance_mode)
        assert out_ids.dtype == id_dtype and out_mask.dtype == torch.bool
        assert torch.equal(out_ids.cpu(), expect_ids)
        assert torch.equal(out_mask.cpu(), expect_mask)


def test_moe_update_expert_without_pruning():
    g = torch.Generator().manual_seed(3)
    table = placement_table(8, 3, 4, g)
    ids = torch.randint(0, 8, (5, 2), generator=g).to(torch.int32)
    out_ids, out_mask = torch_npu.npu_moe_update_expert(ids.npu(), table.npu(), local_rank_id=3, world_size=4)
    expect_ids, expect_mask = ref.moe_update_expert(ids, table, local_rank_id=3, world_size=4)
    assert torch.equal(out_ids.cpu(), expect_ids) and torch.equal(out_mask.cpu(), expect_mask)


def test_moe_update_expert_meta_device_op_and_errors():
    ids, table = torch.zeros(6, 3, dtype=torch.int64), torch.tensor([[1, 2], [1, 0]], dtype=torch.int32)
    out_ids, out_mask = torch.ops.npu.npu_moe_update_expert(ids.to("meta"), table.to("meta"), local_rank_id=0,
                                                            world_size=2)
    assert out_ids.shape == (6, 3) and out_ids.dtype == torch.int64 and out_mask.dtype == torch.bool
    before = torch.npu.op_stats().get("aclnnMoeUpdateExpert", {}).get("device_op", 0)
    torch_npu.npu_moe_update_expert(ids.npu(), table.npu(), balance_mode=1)
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnMoeUpdateExpert"]["device_op"] == before + 1
    with pytest.raises(ValueError, match="local_rank_id"):
        torch_npu.npu_moe_update_expert(ids.npu(), table.npu(), local_rank_id=2, world_size=2)
    with pytest.raises(ValueError, match="together"):
        torch_npu.npu_moe_update_expert(ids.npu(), table.npu(), expert_scales=torch.ones(6, 3).npu(), balance_mode=1)
    with pytest.raises(TypeError, match="eplb_table must be int32"):
        torch_npu.npu_moe_update_expert(ids.npu(), table.long().npu(), balance_mode=1)


def routing_case(dtype, seed=9, t=6, e=4, k=2, h=8):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randn(t, h, generator=g).to(dtype)
    top = torch.rand(t, e, generator=g).topk(k, dim=-1).indices
    routing_map = torch.zeros(t, e, dtype=torch.bool).scatter_(1, top, True)
    probs = torch.rand(t, e, generator=g).to(dtype)
    return tokens, routing_map, probs


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("drop_and_pad,num_out", [(False, 12), (True, 8), (True, 12)])
def test_moe_token_permute_with_routing_map_and_grad(dtype, drop_and_pad, num_out):
    tokens, routing_map, probs = routing_case(dtype)
    x_cpu, p_cpu = tokens.detach().float().clone().requires_grad_(), probs.detach().float().clone().requires_grad_()
    expect = ref.moe_token_permute_with_routing_map(x_cpu, routing_map, p_cpu, num_out, drop_and_pad)
    x_npu, p_npu = tokens.detach().npu().requires_grad_(), probs.detach().npu().requires_grad_()
    out = torch_npu.npu_moe_token_permute_with_routing_map(x_npu, routing_map.npu(), probs=p_npu,
                                                           num_out_tokens=num_out, drop_and_pad=drop_and_pad)
    assert out[0].dtype == dtype and out[2].dtype == torch.int32
    assert torch.equal(out[0].detach().cpu().float(), expect[0].detach().to(dtype).float())
    assert torch.equal(out[1].detach().cpu().float(), expect[1].detach().to(dtype).float())
    assert torch.equal(out[2].cpu(), expect[2])
    g = torch.Generator().manual_seed(1)
    grad_rows, grad_probs = torch.randn(out[0].shape, generator=g), torch.randn(out[1].shape, generator=g)
    (expect[0] * grad_rows).sum().add_((expect[1] * grad_probs).sum()).backward()
    ((out[0].float() * grad_rows.npu()).sum() + (out[1].float() * grad_probs.npu()).sum()).backward()
    tol = dict(rtol=1e-2, atol=1e-2) if dtype != torch.float32 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x_npu.grad.cpu().float(), x_cpu.grad, **tol)
    torch.testing.assert_close(p_npu.grad.cpu().float(), p_cpu.grad, **tol)


def test_moe_token_permute_with_routing_map_meta_device_op_and_errors():
    tokens, routing_map, _ = routing_case(torch.float32)
    out = torch.ops.npu.npu_moe_token_permute_with_routing_map(tokens.to("meta"), routing_map.to("meta"),
                                                               num_out_tokens=12)
    assert out[0].shape == (12, 8) and out[2].shape == (12,) and out[2].dtype == torch.int32
    grads = torch.ops.npu.npu_moe_token_permute_with_routing_map_grad(
        torch.empty(12, 8, device="meta"), None, torch.empty(12, dtype=torch.int32, device="meta"),
        routing_map.to("meta"), 4, 6, False)
    assert grads[0].shape == (6, 8)
    before = torch.npu.op_stats().get("aclnnMoeTokenPermuteWithRoutingMap", {}).get("device_op", 0)
    torch_npu.npu_moe_token_permute_with_routing_map(tokens.npu(), routing_map.npu(), num_out_tokens=12)
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnMoeTokenPermuteWithRoutingMap"]["device_op"] == before + 1
    with pytest.raises(ValueError, match="routing_map"):
        torch_npu.npu_moe_token_permute_with_routing_map(tokens.npu(), routing_map[:3].npu())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("drop_and_pad,num_out", [(False, 12), (True, 8)])
@pytest.mark.parametrize("with_probs", [False, True])
def test_moe_token_unpermute_with_routing_map_and_grad(dtype, drop_and_pad, num_out, with_probs):
    tokens, routing_map, probs = routing_case(dtype, seed=11)
    permuted, _, sorted_indices = ref.moe_token_permute_with_routing_map(tokens, routing_map, probs, num_out,
                                                                         drop_and_pad)
    rows_cpu = permuted.detach().float().clone().requires_grad_()
    probs_cpu = probs.detach().float().clone().requires_grad_() if with_probs else None
    expect = ref.moe_token_unpermute_with_routing_map(rows_cpu, sorted_indices, tokens.shape, probs_cpu, routing_map,
                                                      drop_and_pad)
    rows_npu = permuted.detach().npu().requires_grad_()
    probs_npu = probs.detach().npu().requires_grad_() if with_probs else None
    out = torch_npu.npu_moe_token_unpermute_with_routing_map(rows_npu, sorted_indices.npu(), list(tokens.shape),
                                                             probs=probs_npu, routing_map=routing_map.npu(),
                                                             drop_and_pad=drop_and_pad)
    tol = dict(rtol=1e-2, atol=1e-2) if dtype != torch.float32 else dict(rtol=1e-5, atol=1e-5)
    assert out.dtype == dtype and out.shape == tokens.shape
    torch.testing.assert_close(out.detach().cpu().float(), expect.detach(), **tol)
    g = torch.randn(tokens.shape, generator=torch.Generator().manual_seed(2))
    (expect * g).sum().backward()
    (out.float() * g.npu()).sum().backward()
    torch.testing.assert_close(rows_npu.grad.cpu().float(), rows_cpu.grad, **tol)
    if with_probs:
        torch.testing.assert_close(probs_npu.grad.cpu().float(), probs_cpu.grad, **tol)


def test_moe_token_unpermute_with_routing_map_meta_device_op_and_errors():
    tokens, routing_map, probs = routing_case(torch.float32)
    permuted, _, sorted_indices = ref.moe_token_permute_with_routing_map(tokens, routing_map, probs, 12, False)
    out = torch.ops.npu.npu_moe_token_unpermute_with_routing_map(permuted.to("meta"), sorted_indices.to("meta"),
                                                                 [6, 8])
    assert out.shape == (6, 8)
    grads = torch.ops.npu.npu_moe_token_unpermute_with_routing_map_grad(
        torch.empty(6, 8, device="meta"), sorted_indices.to("meta"), sorted_indices.to("meta"),
        routing_map.to("meta"), permuted.to("meta"), probs.to("meta"), False, [6, 8])
    assert grads[0].shape == (12, 8) and grads[1].shape == (6, 4)
    before = torch.npu.op_stats().get("aclnnMoeTokenUnpermuteWithRoutingMap", {}).get("device_op", 0)
    torch_npu.npu_moe_token_unpermute_with_routing_map(permuted.npu(), sorted_indices.npu(), [6, 8])
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnMoeTokenUnpermuteWithRoutingMap"]["device_op"] == before + 1
    with pytest.raises(ValueError, match="restore_shape"):
        torch_npu.npu_moe_token_unpermute_with_routing_map(permuted.npu(), sorted_indices.npu(), [6, 5])
    with pytest.raises(ValueError, match="routing_map"):
        torch_npu.npu_moe_token_unpermute_with_routing_map(permuted.npu(), sorted_indices.npu(), [6, 8],
                                                           probs=probs.npu())
