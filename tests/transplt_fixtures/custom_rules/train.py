"""A CUDA script that depends on a project library with CUDA-only kernels (test fixture for the converter's
custom rules): mylib.cuda_kernels is the CUDA build, mylib.npu_kernels the npu one; rules.json maps one to the
other. Runs on the CPU when CUDA is absent; prints the per-step losses as JSON on its last line."""
import json

import torch
import torch.nn as nn

import mylib
from mylib.cuda_kernels import fused_bias_gelu_cuda


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 12)
        self.fc2 = nn.Linear(12, 3)

    def forward(self, x):
        h = fused_bias_gelu_cuda(x @ self.fc1.weight.t(), self.fc1.bias)
        return self.fc2(h)


def main():
    backend = mylib.setup("cuda" if torch.cuda.is_available() else "cpu", 2)
    torch.manual_seed(0)
    model = Mlp()
    if torch.cuda.is_available():
        model = model.cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(3)
    losses = []
    for _ in range(3):
        x, y = torch.randn(5, 6, generator=g), torch.randn(5, 3, generator=g)
        if torch.cuda.is_available():
            x, y = x.cuda(), y.cuda()
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mylib.cuda_kernels.record_step(loss.item())
        losses.append(loss.item())
    print(json.dumps({"backend": backend, "losses": losses}))


if __name__ == "__main__":
    main()
