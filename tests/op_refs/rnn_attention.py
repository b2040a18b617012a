"""CPU references for the whole-sequence RNN ops (npu_lstm, npu_lstm_data, npu_gru) and the classic fused attention
ops of the rnn_attention family, written from their documented definitions in plain float32 torch."""
import torch


def _step_order(steps, direction):
    return range(steps - 1, -1, -1) if direction else range(steps)


def lstm(x, weight, bias, h, c, seq_mask=None, direction=False):
    """Single-layer LSTM over a time-major x [T, B, I] with torch_npu's layout: weight = cat(w_ih, w_hh, 1).t()
    [I + H, 4H], bias [4H] (b_ih + b_hh), gate columns input, forget, cell candidate (j), output; h, c hold [1, B, H].
    direction=True runs from the last step to the first (results stay at their own time index).
    seq_mask ([T, B, H] or [T, B], non-zero = valid): a finished sequence keeps its state and emits y = 0.
    Returns (y, h, c, i, j, f, o, tanh(c)), each [T, B, H] float32, differentiable in x, weight, bias, h, c."""
    x, weight, bias = x.float(), weight.float(), bias.float()
    steps, batch, input_size = x.shape
    hidden = bias.shape[0] // 4
    w_x, w_h = weight[:input_size], weight[input_size:]
    hs, cs = h.float().reshape(batch, hidden), c.float().reshape(batch, hidden)
    valid = None
    if seq_mask is not None:
        valid = (seq_mask.reshape(steps, batch, -1)[..., :1] != 0).float()
    outs = [[None] * steps for _ in range(8)]
    for t in _step_order(steps, direction):
        gi, gf, gj, go = (x[t] @ w_x + hs @ w_h + bias).chunk(4, dim=-1)
        i, f, j, o = torch.sigmoid(gi), torch.sigmoid(gf), torch.tanh(gj), torch.sigmoid(go)
        c_new = f * cs + i * j
        tanhc = torch.tanh(c_new)
        h_new = o * tanhc
        y = h_new
        if valid is not None:
            m = valid[t]
            y = h_new * m
            h_new = y + hs * (1 - m)
            c_new = c_new * m + cs * (1 - m)
        hs, cs = h_new, c_new
        for n, value in enumerate((y, hs, cs, i, j, f, o, tanhc)):
            outs[n][t] = value
    return tuple(torch.stack(o) for o in outs)


def lstm_mask_from_batch_sizes(batch_sizes, batch, hidden):
    """torch_npu's packed-sequence mask [T, B, H]: sequence b is valid at step t when batch_sizes[t] > b."""
    valid = batch_sizes.reshape(-1, 1).long() > torch.arange(batch).reshape(1, -1)
    return valid.unsqueeze(-1).expand(-1, -1, hidden).float()


def lstm_weights_from_module(module, suffix=""):
    """(weight, bias) of an nn.LSTM layer in torch_npu's layout."""
    w_ih, w_hh = getattr(module, "weight_ih_l0" + suffix), getattr(module, "weight_hh_l0" + suffix)
    weight = torch.cat([w_ih, w_hh], 1).t()
    bias = getattr(module, "bias_ih_l0" + suffix) + getattr(module, "bias_hh_l0" + suffix)
    return weight, bias


def gru(x, hx, weight_input, weight_hidden, bias_input, bias_hidden):
    """Single-layer forward GRU (torch.nn.GRU semantics, reset applied after the hidden matmul) over time-major
    x [T, B, I] with transposed weights weight_input [I, 3H], weight_hidden [H, 3H], gate columns reset, update,
    new; hx holds [B, H]. Returns (y, h, update z, reset r, new n, hidden_new = h_prev @ W_hn + b_hn), each
    [T, B, H] float32 and differentiable."""
    x = x.float()
    w_x, w_h, b_x, b_h = (t.float() for t in (weight_input, weight_hidden, bias_input, bias_hidden))
    steps, batch, _ = x.shape
    hidden = b_x.shape[0] // 3
    hs = hx.float().reshape(batch, hidden)
    outs = [[] for _ in range(6)]
    for t in range(steps):
        xr, xz, xn = (x[t] @ w_x + b_x).chunk(3, dim=-1)
        hr, hz, hn = (hs @ w_h + b_h).chunk(3, dim=-1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        hs = (1 - z) * n + z * hs
        for k, value in enumerate((hs, hs, z, r, n, hn)):
            outs[k].append(value)
    return tuple(torch.stack(o) for o in outs)
