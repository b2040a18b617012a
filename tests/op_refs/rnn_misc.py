"""CPU references for the recurrent-net and miscellaneous-fusion custom ops (rnn_misc family)."""
import torch


def lstm_cell(x, w_ih, w_hh, h, c, b_ih=None, b_hh=None):
    """One LSTM step with torch_npu's layout: w_ih [input, 4H], w_hh [H, 4H] (transposed), gate columns in the
    order input, forget, cell candidate, output. Returns (y, h, c, i, j, f, o, tanh(c)), each [1, batch, H], float32
    and differentiable with respect to every argument."""
    x, w_ih, w_hh, h, c = (t.float() for t in (x, w_ih, w_hh, h, c))
    gates = x @ w_ih + h.reshape(x.shape[0], -1) @ w_hh
    if b_ih is not None:
        gates = gates + b_ih.float() + b_hh.float()
    gi, gf, gj, go = gates.chunk(4, dim=-1)
    i, f, j, o = torch.sigmoid(gi), torch.sigmoid(gf), torch.tanh(gj), torch.sigmoid(go)
    c_new = f * c.reshape(x.shape[0], -1) + i * j
    tanhc = torch.tanh(c_new)
    h_new = o * tanhc
    return tuple(t.unsqueeze(0) for t in (h_new, h_new, c_new, i, j, f, o, tanhc))


def dropout_with_byte_mask(x, mask, p):
    """Dropout with a uint8 mask of one byte per element (1 = kept): x * mask / (1 - p) in float32; p = 1 gives
    zeros."""
    scale = 0.0 if p >= 1 else 1.0 / (1.0 - p)
    return x.float() * mask.float() * scale


def mhc_sinkhorn(x, eps=1e-6, num_iters=20):
    """softmax(x, -1) + eps, then 2 * num_iters - 1 normalisations alternating column sums (dim -2, first) and row
    sums (dim -1), each sum plus eps. float32, differentiable."""
    y = torch.softmax(x.float(), dim=-1) + eps
    for step in range(1, 2 * num_iters):
        dim = -2 if step % 2 == 1 else -1
        y = y / (y.sum(dim=dim, keepdim=True) + eps)
    return y


def mhc_post(x, h_res, h_out, h_post):
    """mHC output mixing per token, in float32: y[j, d] = sum_i h_res[i, j] * x[i, d] + h_post[j] * h_out[d], with
    x [..., n, D], h_res [..., n, n] (None: identity), h_out [..., D], h_post [..., n]. Differentiable."""
    xf = x.float()
    mixed = xf if h_res is None else h_res.float().transpose(-1, -2) @ xf
    return mixed + h_post.float().unsqueeze(-1) * h_out.float().unsqueeze(-2)


def cross_entropy_loss_with_max_sum(logits_max, sum_exp_logits, predicted_logits, vocab_parallel_logits=None):
    """Vocabulary-parallel cross entropy's last step from the all-reduced statistics: loss = log(sum_exp) -
    predicted; softmax = exp(logits - max) / sum_exp (None without logits). float32."""
    loss = sum_exp_logits.float().log() - predicted_logits.float()
    if vocab_parallel_logits is None:
        return loss, None
    shifted = vocab_parallel_logits.float() - logits_max.float().unsqueeze(-1)
    softmax = shifted.exp() / sum_exp_logits.float().unsqueeze(-1)
    return loss, softmax


def fused_linear_online_max_sum(x, weight, target, vocab_start_index, vocab_end_index):
    """Local statistics of the vocabulary shard [start, end] (end inclusive) for logits = x @ weight^T (float32):
    (row max, sum of exp(logits - max), shifted target logit (0 outside the shard), packed target mask (row p in bit
    p % 8 of byte p // 8, 1 = outside, padding bits 1), masked target (local index, 0 outside), logits)."""
    logits = x.float() @ weight.float().t()
    row_max = logits.max(-1).values
    shifted = logits - row_max.unsqueeze(-1)
    t = target.long()
    outside = (t < vocab_start_index) | (t > vocab_end_index)
    local = (t - vocab_start_index).masked_fill(outside, 0)
    predicted = shifted.gather(1, local.unsqueeze(1)).squeeze(1).masked_fill(outside, 0)
    padded = (x.shape[0] + 7) // 8 * 8
    bits = torch.ones(padded, dtype=torch.long)
    bits[: x.shape[0]] = outside.long()
    packed = (bits.view(-1, 8) * (2 ** torch.arange(8))).sum(-1).to(torch.uint8)
    return row_max, shifted.exp().sum(-1), predicted, packed, local.to(target.dtype), logits


def ifmr(data, data_min, data_max, cumsum, min_percentile, max_percentile, search_start, search_end, search_step,
         with_offset):
    """int8 quantisation parameter search, in float32: clip range from the percentiles of the cumulative histogram
    `cumsum`, then the candidate max * step (step over arange(search_start, search_end, search_step)) with the
    smallest squared quantise-dequantise error; returns (scale, offset) as 0-d float32 tensors."""
    x = data.float().reshape(-1)
    lo, hi = float(data_min.float().reshape(-1)[0]), float(data_max.float().reshape(-1)[0])
    bins = torch.tensor(float(cumsum.numel()))
    cdf = cumsum.float() / torch.tensor(float(x.numel()))
    max_index = (cdf < torch.tensor(max_percentile, dtype=torch.float32)).sum().float()
    min_index = (cdf < torch.tensor(1 - min_percentile, dtype=torch.float32)).sum().float()
    max_init = max_index / bins * (hi - lo) + lo
    min_init = min_index / bins * (hi - lo) + lo
    steps = torch.arange(search_start, search_end, search_step, dtype=torch.float32)
    if with_offset:
        max_init, min_init = max_init.clamp(min=0), min_init.clamp(max=0)
        scales = (steps * max_init - min_init) / 255
        scales = torch.where(scales < 1.192092896e-07, torch.ones_like(scales), scales)
        offsets = -(torch.round(min_init / scales) + 128)
    else:
        max_init = torch.maximum(max_init.abs(), min_init.abs())
        scales = steps * max_init / 127
        offsets = torch.zeros_like(scales)
    s, o = scales.unsqueeze(1), offsets.unsqueeze(1)
    q = (torch.round(x / s) + o).clamp(-128, 127)
    best = ((q - o) * s - x).square().sum(1).argmin()
    return scales[best], offsets[best]
