"""BiLSTM: a bidirectional LSTM made of two one-directional LSTMs (the second reads the sequence
reversed), for models written when npu LSTMs took no bidirectional=True. Deprecated, as upstream:
torch.nn.LSTM(bidirectional=True) computes the same on npu."""

import warnings

import torch

__all__ = []  # deprecated: reachable as torch_npu.contrib.module.bidirectional_lstm.BiLSTM and contrib.BiLSTM


class BiLSTM(torch.nn.Module):
    """Input (seq_len, batch, input_size) -> output (seq_len, batch, 2 * hidden_size): the forward
    direction's hidden states then the backward direction's, as nn.LSTM(bidirectional=True) lays them out."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        warnings.warn("torch_npu.contrib.BiLSTM is deprecated: use torch.nn.LSTM(input_size, hidden_size, "
                      "bidirectional=True)", FutureWarning, stacklevel=2)
        self.fw_rnn = torch.nn.LSTM(input_size, hidden_size, bidirectional=False)
        self.bw_rnn = torch.nn.LSTM(input_size, hidden_size, bidirectional=False)

    def forward(self, inputs):
        forward_states, _ = self.fw_rnn(inputs)
        backward_states, _ = self.bw_rnn(torch.flip(inputs, [0]))
        return torch.cat((forward_states, torch.flip(backward_states, [0])), 2)
