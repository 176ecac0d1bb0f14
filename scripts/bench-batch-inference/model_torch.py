"""The benchmark's PyTorch model: batch-inference's docs/examples/fully_connected.py
BatchFCModule (one matmul, ConcatBatcher(tensor="pt")), 2048 -> 1024 (8 MiB
of weights read per call), seeded, one thread."""

import torch

from batch_inference import batching
from batch_inference.batcher import ConcatBatcher

torch.set_num_threads(1)


@batching(batcher=ConcatBatcher(tensor="pt"), max_batch_size=32)
class FC:
    def __init__(self, input_size=2048, output_size=1024, seed=0):
        torch.manual_seed(seed)
        self.weights = torch.randn(input_size, output_size)

    def predict_batch(self, input):
        return torch.matmul(input, self.weights)
