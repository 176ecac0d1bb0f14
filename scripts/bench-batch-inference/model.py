"""The benchmark's model: a two-layer numpy MLP, x [n, 512] -> [n, 512]
through a 2048-wide hidden layer, as a batch-inference model class. Each
request is one row; one row at a time reads both weight matrices (8 MiB)
per request, a batch reads them once."""

import numpy as np

from batch_inference import batching
from batch_inference.batcher import ConcatBatcher


@batching(batcher=ConcatBatcher(), max_batch_size=32)
class MLP:
    def __init__(self, seed=0):
        r = np.random.default_rng(seed)
        self.w1 = (r.standard_normal((512, 2048)) / 32).astype(np.float32)
        self.w2 = (r.standard_normal((2048, 512)) / 64).astype(np.float32)

    def predict_batch(self, x):
        return np.maximum(x @ self.w1, 0) @ self.w2
