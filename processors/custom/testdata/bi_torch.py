"""batch-inference's PyTorch example classes, as a user deploys them
(tests/test_torch_model.py's MyTorchModel; docs/examples/fully_connected.py's
BatchFCModule, with a seed for its random weights so that two processes
build the same model), decorated with the ConcatBatcher(tensor="pt") their
sources use: predict_batch gets torch tensors."""

import torch

from batch_inference import batching
from batch_inference.batcher import ConcatBatcher


@batching(batcher=ConcatBatcher(tensor="pt"), max_batch_size=32)
class MyTorchModel:
    def __init__(self):
        self.weights = torch.ones(3, 3)

    def predict_batch(self, x):
        assert isinstance(x, torch.Tensor), type(x)
        return torch.matmul(x, self.weights)


@batching(batcher=ConcatBatcher(tensor="pt"), max_batch_size=32)
class BatchFCModule:
    def __init__(self, input_size, output_size, seed=0):
        torch.manual_seed(seed)
        self.weights = torch.randn(input_size, output_size)

    def predict_batch(self, input):
        return torch.matmul(input, self.weights)
