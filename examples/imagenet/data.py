"""A small synthetic image-classification dataset (class templates plus noise) that a model can learn,
standing in for ImageNet's ImageFolder so the trainer runs anywhere in seconds."""

import torch
from torch.utils.data import Dataset


class SyntheticImages(Dataset):
    """`size` images of `image_size`x`image_size`, label i % num_classes. Each class has a fixed
    random template; an image is its template plus Gaussian noise. Deterministic for a given seed."""

    def __init__(self, size, num_classes=10, image_size=32, seed=0, noise=1.0):
        g = torch.Generator().manual_seed(seed)
        templates = torch.randn(num_classes, 3, image_size, image_size, generator=g)
        self.labels = torch.arange(size) % num_classes
        self.images = templates[self.labels] + noise * torch.randn(size, 3, image_size, image_size, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return self.images[index], self.labels[index]
