"""CPU reference for npu_nsa_compress_attention_infer (NSA decode attention over a paged cache of compressed key/value
tokens, plus the top-k select blocks), written from the op's definition with plain torch, float32 math."""

import torch


def select_block_num(cmp_len, compress_block_size, compress_stride, select_block_size):
    """Select blocks covering cmp_len compressed tokens: ceil(((cmp_len - 1) * stride + compress) / select)."""
    raw = (cmp_len - 1) * compress_stride + compress_block_size
    return -(-raw // select_block_size)


def _importance(probs, cmp_len, blocks, compress_block_size, compress_stride, select_block_size):
    """probs [N2, G, cmp_len] -> importance [N2, blocks]: select block k sums the probabilities of compressed tokens
    m*(k+1) - i - j for i < m = select/stride, j < n = compress//stride (each pair counted), then over the G query heads
    of each key head."""
    m, n = select_block_size // compress_stride, compress_block_size // compress_stride
    weights = torch.zeros(cmp_len, blocks)
    for k in range(blocks):
        for i in range(m):
            for j in range(n):
                pos = m * (k + 1) - i - j
                if 0 <= pos < cmp_len:
                    weights[pos, k] += 1.0
    return (probs @ weights).sum(1)


def nsa_compress_attention_infer(query, key, value, scale_value, head_num, key_value_head_num, select_block_size,
                                 select_block_count, page_block_size, compress_block_size, compress_stride,
                                 block_table, actual_cmp_seq_kvlen, layout="TND"):
    """Returns (out float32 shaped like the op's output, topk int32 like the op's, importance list per batch
    [N2, blocks] float32). One query token per batch; key / value [blocks, page, N2 * D(v)]."""
    n1, n2 = head_num, key_value_head_num
    group = n1 // n2
    batch = query.shape[0]
    q = query.reshape(batch, n1, -1)
    d = q.shape[-1]
    k4 = key.reshape(key.shape[0], page_block_size, n2, d)
    v4 = value.reshape(value.shape[0], page_block_size, n2, -1)
    dv = v4.shape[-1]
    out = torch.zeros(batch, n1, dv)
    topk = torch.zeros(batch, n2, select_block_count, dtype=torch.int32)
    importances = []
    for b in range(batch):
        length = int(actual_cmp_seq_kvlen[b])
        # token p of the sequence lives in page block_table[b, p // page] at offset p % page
        keys = torch.stack([k4[int(block_table[b, p // page_block_size]), p % page_block_size]
                            for p in range(length)])  # [len, N2, D]
        values = torch.stack([v4[int(block_table[b, p // page_block_size]), p % page_block_size]
                              for p in range(length)])
        kb = keys.float().transpose(0, 1)    # [N2, len, D]
        vb = values.float().transpose(0, 1)  # [N2, len, Dv]
        qb = q[b].float().reshape(n2, group, d)
        probs = torch.softmax(torch.matmul(qb, kb.transpose(1, 2)) * scale_value, -1)  # [N2, G, len]
        # the attention output uses P rounded to the input dtype, as the kernel's second matmul does
        out[b] = torch.matmul(probs.to(query.dtype).float(), vb).reshape(n1, dv)
        blocks = select_block_num(length, compress_block_size, compress_stride, select_block_size)
        score = _importance(probs, length, blocks, compress_block_size, compress_stride, select_block_size)
        importances.append(score)
        for h in range(n2):
            # block 0 and the last two blocks are always kept, then the rest by falling importance (ties: lower block)
            rest = torch.sort(score[h, 1:blocks - 2], descending=True, stable=True).indices[:select_block_count - 3] + 1
            topk[b, h] = torch.cat([torch.tensor([0, blocks - 2, blocks - 1]), rest]).to(torch.int32)
    if layout == "BSND":
        return out.unsqueeze(1), topk.unsqueeze(1), importances
    return out, topk, importances
