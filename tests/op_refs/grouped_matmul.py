"""CPU references of the grouped matmul family (MoE), written from torch_npu's documentation in plain torch:
npu_grouped_matmul (float, weight-only int8 / int4, A8W8, A4W4, A8W4), its gradients, 
npu_grouped_matmul_finalize_routing and npu_grouped_matmul_add.

To merge into tests/custom_op_refs.py: these use unpack_int4 and unpack_quant_scale defined there (the import
below is only for running this file on its own).
"""

import torch
import torch.nn.functional as F

try:  # merged into custom_op_refs.py, these are module-level names already
    unpack_int4, unpack_quant_scale  # noqa: B018
except NameError:
    from custom_op_refs import unpack_int4, unpack_quant_scale


def group_segments(group_list, group_list_type=0):
    """(group index, first row, row count) along the split axis: group_list as cumulative ends (type 0), counts
    (type 1) or [group index, count] pairs (type 2); groups follow each other from row 0."""
    values = torch.as_tensor(group_list).tolist()
    segments, start = [], 0
    for i, v in enumerate(values):
        if group_list_type == 0:
            segments.append((i, start, v - start))
            start = v
        elif group_list_type == 1:
            segments.append((i, start, v))
            start += v
        else:
            segments.append((v[0], start, v[1]))
            start += v[1]
    return segments


def _activate(v, act_type):
    if act_type == 1:
        return F.relu(v)
    if act_type == 2:
        return F.gelu(v, approximate="tanh")
    if act_type == 4:
        return v * torch.sigmoid(1.702 * v)
    if act_type == 5:
        return F.silu(v)
    return v


def _rows_of_groups(t, k):
    """A per-channel ([n], [1, n]) or per-group ([G, n]) parameter as one row per k (broadcastable to [k, n])."""
    if t.dim() == 1 or t.shape[0] == 1:
        return t.reshape(1, -1)
    return t.repeat_interleave(k // t.shape[0], dim=0)


def _int_weight(w):
    return unpack_int4(w) if w.dtype == torch.int32 else w


def _float_scale(s):
    return unpack_quant_scale(s)[0] if s.dtype == torch.int64 else s.float()


def grouped_matmul_one(x, w, bias=None, scale=None, offset=None, antiquant_scale=None, antiquant_offset=None,
                       per_token_scale=None, act_type=0, output_dtype=None):
    """One expert: x [m, k] times w [k, n], by the scenario the dtypes select (see torch_npu's formulas)."""
    out_dtype = output_dtype or x.dtype
    if x.is_floating_point() and w.is_floating_point():  # y = x @ w + b, float32 accumulation
        v = x.float() @ w.float()
        if bias is not None:
            v = v + bias.float()
        return _activate(v, act_type).to(out_dtype)
    if x.is_floating_point():  # weight-only quantization: y = x @ ((w + offset) * scale) + b
        k = x.shape[-1]
        wq = _int_weight(w).to(x.dtype)
        s = _rows_of_groups(antiquant_scale.to(x.dtype), k)
        if antiquant_offset is not None:
            wq = wq + _rows_of_groups(antiquant_offset.to(x.dtype), k)
        v = x.float() @ (wq * s).float()
        if bias is not None:
            v = v + bias.float()
        return _activate(v, act_type).to(out_dtype)
    # Integer operands: exact products, dequantized in float64.
    a8w4 = x.dtype == torch.int8 and w.dtype == torch.int32
    xi = _int_weight(x).long()
    wi = _int_weight(w).long()
    xs = xi - 8 if a8w4 else xi
    if out_dtype == torch.int32:
        acc = xs @ wi
        return (acc + bias.long() if bias is not None else acc).to(torch.int32)
    int_bias = bias is not None and bias.dtype == torch.int32
    s = _float_scale(scale).double()
    s = s.reshape(1, -1) if s.dim() == 1 else s
    groups = s.shape[0]
    step = xi.shape[1] // groups
    v = torch.zeros(xi.shape[0], wi.shape[1], dtype=torch.float64)
    for g in range(groups):
        acc = xs[:, g * step:(g + 1) * step] @ wi[g * step:(g + 1) * step]
        if int_bias and groups == 1:
            acc = acc + bias.long()
        v = v + acc.double() * s[g]
    if a8w4:
        if bias is not None:
            v = v + bias.double()
        if offset is not None:
            off = offset.double().reshape(-1, offset.shape[-1])
            for g in range(off.shape[0]):
                gstep = xi.shape[1] // off.shape[0]
                v = v + xi[:, g * gstep:(g + 1) * gstep].sum(1, keepdim=True).double() * off[g]
    if per_token_scale is not None:
        v = v * per_token_scale.double().reshape(-1, 1)
    if bias is not None and not int_bias and not a8w4:
        v = v + bias.double()
    if out_dtype == torch.int8:
        shift = offset if offset is not None else (unpack_quant_scale(scale)[1] if scale.dtype == torch.int64 else None)
        if shift is not None:
            v = v + shift.double().reshape(-1)
        return v.round().clamp(-128, 127).to(torch.int8)
    return _activate(v, act_type).float().to(out_dtype)


def _expert(params, e, experts):
    """Expert e's part of a per-expert parameter list: one tensor per expert, or one tensor whose first dimension runs
    over the experts, or one tensor for all (None when absent)."""
    if params is None:
        return None
    if len(params) > 1:
        return params[e]
    t = params[0]
    return t[e] if t.dim() >= 2 and t.shape[0] == experts else t


def grouped_matmul(x, weight, *, bias=None, scale=None, offset=None, antiquant_scale=None, antiquant_offset=None,
                   per_token_scale=None, group_list=None, split_item=0, group_type=-1, group_list_type=0, act_type=0,
                   output_dtype=None):
    """torch_npu.npu_grouped_matmul's result list: group_type -1 pairs x[i] with weight[i]; 0 splits x's rows by
    group_list over the experts; 2 splits the shared k (x [m, k], weight [k, n]) by group_list."""
    single = len(weight) == 1 and weight[0].dim() == 3
    experts = weight[0].shape[0] if single else len(weight)
    w_of = (lambda e: weight[0][e]) if single else (lambda e: weight[e])
    p_of = lambda params, e: _expert(params, e, experts)  # noqa: E731
    kw = lambda e: dict(bias=p_of(bias, e), scale=p_of(scale, e), offset=p_of(offset, e),  # noqa: E731
                        antiquant_scale=p_of(antiquant_scale, e), antiquant_offset=p_of(antiquant_offset, e),
                        act_type=act_type, output_dtype=output_dtype)
    if group_type == 2:
        segs = group_segments(group_list, group_list_type) if group_list is not None else None
        if segs is None:
            sizes = [w_of(e).shape[0] for e in range(experts)]
            starts = [sum(sizes[:i]) for i in range(experts)]
            segs = list(zip(range(experts), starts, sizes))
        outs = []
        for i, (e, start, size) in enumerate(segs):
            w = weight[0][start:start + size] if (len(weight) == 1 and weight[0].dim() == 2) else w_of(e)
            outs.append(grouped_matmul_one(x[0][:, start:start + size], w, act_type=act_type,
                                           output_dtype=output_dtype))
        return [torch.stack(outs)] if split_item in (2, 3) else outs
    if group_type == 0 and len(x) == 1 and x[0].dim() == 2 and (experts > 1 or group_list is not None):
        outs, rows = [], x[0].shape[0]
        pts = per_token_scale[0].reshape(-1) if per_token_scale is not None else None
        for e, start, size in group_segments(group_list, group_list_type):
            pt = pts[start:start + size] if pts is not None else None
            outs.append(grouped_matmul_one(x[0][start:start + size], w_of(e), per_token_scale=pt, **kw(e)))
        if split_item in (2, 3):
            y = torch.cat(outs)
            pad = torch.zeros(rows - y.shape[0], y.shape[1], dtype=y.dtype)  # rows past the groups: zeros here
            return [torch.cat([y, pad])]
        return outs
    outs = []
    for i, xi in enumerate(x):
        pt = per_token_scale[i].reshape(-1) if per_token_scale is not None else None
        y = grouped_matmul_one(xi.reshape(-1, xi.shape[-1]), w_of(i), per_token_scale=pt, **kw(i))
        outs.append(y.reshape(*xi.shape[:-1], y.shape[-1]))
    return [torch.cat(outs)] if split_item in (2, 3) else outs


def grouped_matmul_finalize_routing(x, w, group_list, *, scale=None, bias=None, offset=None, pertoken_scale=None,
                                    shared_input=None, logit=None, row_index=None, shared_input_weight=1.0,
                                    shared_input_offset=0, output_bs=0, group_list_type=1):
    """Each expert's rows of x times its weight, dequantized (x int8: scale [e, n] / per-token; int4 weights: the
    A8W4 formula with the offline bias and offset), times logit, scatter-added into row_index's rows of a float32
    [output_bs or m, n] output, plus shared_input_weight * shared_input at rows shared_input_offset..."""
    m = x.shape[0]
    n = w.shape[-1] * (8 if w.dtype == torch.int32 else 1)
    out = torch.zeros(output_bs or m, n, dtype=torch.float64)
    rows = torch.zeros(m, n, dtype=torch.float64)
    covered = 0
    for e, start, size in group_segments(group_list, 0 if group_list_type == 0 else 1):
        pt = pertoken_scale[start:start + size] if pertoken_scale is not None else None
        s = scale[e] if scale is not None else torch.ones(n)
        rows[start:start + size] = grouped_matmul_one(
            x[start:start + size], w[e], scale=s, bias=bias[e] if bias is not None else None,
            offset=offset[e] if offset is not None else None, per_token_scale=pt, output_dtype=torch.float64)
        covered = start + size
    rows = rows[:covered]
    if logit is not None:
        rows = rows * logit[:covered].double().reshape(-1, 1)
    index = row_index[:covered].long() if row_index is not None else torch.arange(covered)
    out.index_add_(0, index, rows)
    if shared_input is not None:
        r = shared_input.shape[0]
        out[shared_input_offset:shared_input_offset + r] += shared_input_weight * shared_input.double()
    return out.float()


def grouped_matmul_add(y, x, weight, group_list, transpose_x=True, transpose_weight=False, group_list_type=0):
    """y + stack_i(x_i^T @ weight_i) with k split by group_list (x [k, m] and weight [k, n] as given by default),
    accumulated in float64."""
    xt = x if transpose_x else x.t()
    wt = weight.t() if transpose_weight else weight
    parts = [xt[start:start + size].double().t() @ wt[start:start + size].double()
             for _, start, size in group_segments(group_list, group_list_type)]
    return (y.double() + torch.stack(parts).reshape(y.shape)).to(y.dtype)
