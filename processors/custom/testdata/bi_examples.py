"""batch-inference's own example model classes (its docs/batcher examples,
docs/examples and the model classes of its unit tests), as a user deploys
them on eas-server: decorated with @batching, each in the form its source
gives (re-typed here, with the decorator the docs pair them with).
model_config.class picks one; init_args are the constructor's arguments.
"""

from typing import List, Tuple

import numpy as np

from batch_inference import batching
from batch_inference.batcher import Batcher, BucketSeqBatcher, ConcatBatcher, SeqBatcher


# tests/test_model_host.py's MyModel: x [batch, m, k] times weights [k, n].
@batching(batcher=ConcatBatcher(), max_batch_size=10)
class MatMulModel:
    def __init__(self, weights):
        self.weights = np.asarray(weights, dtype="f")

    def predict_batch(self, x):
        return np.matmul(x, self.weights)


# docs/batcher/concat_batcher_example.py: two inputs, x [b, m, k], y [b, k, n].
@batching(batcher=ConcatBatcher(), max_batch_size=32)
class ConcatModel:
    def __init__(self):
        self.op = np.matmul

    def predict_batch(self, x, y):
        return self.op(x, y)


# docs/batcher/customized_batcher.py: a Batcher subclass of its own.
class MyBatcher(Batcher):
    def batch(self, requests: List[Tuple[np.ndarray]]):
        x = np.concatenate([item[0] for item in requests], axis=0)
        y = np.concatenate([item[1] for item in requests], axis=0)
        return (x, y), [item[0].shape[0] for item in requests]

    def unbatch(self, batched_response, unbatch_ctx):
        out, start = [], 0
        for n in unbatch_ctx:
            out.append(batched_response[start:start + n])
            start += n
        return out


@batching(batcher=MyBatcher(), max_batch_size=32)
class CustomBatcherModel:
    def __init__(self):
        self.op = np.matmul

    def predict_batch(self, x, y):
        return self.op(x, y)


# docs/batcher/seq_batcher_example.py: sequences padded to the longest.
@batching(batcher=SeqBatcher(padding_tokens=[0]), max_batch_size=32)
class SeqModel:
    def predict_batch(self, seq):
        return seq


# docs/batcher/bucket_seq_batcher_example.py (and tests/test_bucket_seq_batcher.py's
# buckets): sequences grouped by length, each group padded on its own.
@batching(batcher=BucketSeqBatcher(padding_tokens=[0], buckets=[3, 5]), max_batch_size=32)
class BucketSeqModel:
    def predict_batch(self, seq):
        return seq


# Several outputs: a tuple comes back as output__0, output__1.
@batching(max_batch_size=16)
class TwoOutputs:
    def __init__(self, scale=1.0):
        self.scale = scale

    def predict_batch(self, x):
        return (x * self.scale).astype(np.float32), x.sum(axis=-1).astype(np.float64)


# A class that fails: every request of its batch gets the error.
@batching
class Raises:
    def predict_batch(self, x):
        raise ValueError("no such luck")


if __name__ == "__main__":
    host = MatMulModel.host(np.eye(3).tolist())
    with host:
        print(host.predict(np.ones((1, 3, 3), dtype="f")))
