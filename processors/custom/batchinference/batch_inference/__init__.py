"""batch_inference: eas-server's stand-in for Microsoft's batch-inference
1.0 (PyPI batch-inference), written from its documented behaviour, for
model classes deployed on eas-server where the service's Python lacks the
real package (which, when present, is used instead).

    from batch_inference import batching
    from batch_inference.batcher import ConcatBatcher

    @batching(batcher=ConcatBatcher(), max_batch_size=32)
    class MyModel:
        def __init__(self, weights): ...
        def predict_batch(self, x): ...       # x: the requests' x, concatenated

    host = MyModel.host(weights)              # a ModelHost
    with host:
        y = host.predict(x)                   # one request

Under eas-server the server's scheduler forms the batches and the worker
applies the class's batcher; ModelHost here serves in-process use.
"""

import threading
import time

from .batcher import Batcher, BucketSeqBatcher, ConcatBatcher, MultiBatcher, SeqBatcher

__version__ = "1.0+eas-server"
__all__ = ["batching", "ModelHost"]

# Marks this package as eas-server's stand-in (allspark.batchhost reports it).
EAS_SERVER_STANDIN = True


def run_batch(model, batcher, requests):
    """One batch as ModelHost runs it: batch, predict_batch (once per
    batched group for a MultiBatcher), unbatch. Returns one response per
    request."""
    batched, ctx = batcher.batch(requests)
    if isinstance(batcher, MultiBatcher):
        responses = [model.predict_batch(*args) for args in batched]
    else:
        responses = model.predict_batch(*batched)
    return batcher.unbatch(responses, ctx)


class _Pending(object):
    def __init__(self, request):
        self.request = request
        self.done = threading.Event()
        self.response = None
        self.error = None


class ModelHost(object):
    """Runs predict_batch of one model object over batches of concurrent
    predict calls: up to max_batch_size requests, waiting at most wait_ms
    after the first for up to wait_n of them."""

    def __init__(self, model_cls=None, model_obj=None, batcher=None, max_batch_size=32,
                 wait_n=8, wait_ms=5, num_workers=1):
        if model_cls is None and model_obj is None:
            raise RuntimeError("Either model_cls or model_obj must be provided")
        self.model_cls = model_cls
        self.model_obj = model_obj
        self.batcher = batcher if batcher is not None else ConcatBatcher()
        self.max_batch_size = max_batch_size
        self.wait_n = min(wait_n, max_batch_size)
        self.wait_ms = wait_ms
        self.num_workers = num_workers
        self.stopped = True
        self._cond = threading.Condition()
        self._queue = []
        self._threads = []

    def __call__(self, *args, **kwargs):
        if self.model_obj is not None:
            raise RuntimeError("model_obj has already been set, you can't call __call__() to create it again")
        self.model_obj = self.model_cls(*args, **kwargs)
        return self

    def predict(self, *inputs):
        if self.stopped:
            raise RuntimeError("model host is stopped, can't predict anymore")
        p = _Pending(inputs)
        with self._cond:
            self._queue.append(p)
            self._cond.notify()
        p.done.wait()
        if p.error is not None:
            raise p.error
        return p.response

    def start(self):
        if not self.stopped:
            raise RuntimeError("model host is already started")
        self.stopped = False
        for _ in range(self.num_workers):
            t = threading.Thread(target=self._loop, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self):
        with self._cond:
            self.stopped = True
            self._cond.notify_all()
        for t in self._threads:
            t.join()
        self._threads = []

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def _take(self):
        with self._cond:
            while not self._queue and not self.stopped:
                self._cond.wait(1.0)
            if self.stopped:
                return []
            if len(self._queue) < self.wait_n and self.wait_ms > 0:
                end = time.monotonic() + self.wait_ms / 1000.0
                while len(self._queue) < self.wait_n and not self.stopped:
                    left = end - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
            batch = self._queue[:self.max_batch_size]
            del self._queue[:len(batch)]
            return batch

    def _loop(self):
        while not self.stopped:
            batch = self._take()
            if not batch:
                continue
            try:
                responses = run_batch(self.model_obj, self.batcher, [p.request for p in batch])
                for p, r in zip(batch, responses):
                    p.response = r
            except Exception as e:
                for p in batch:
                    p.error = e
            for p in batch:
                p.done.set()


def batching(*args, **kwargs):
    """@batching, @batching(), @batching(batcher, max_batch_size) or
    @batching(batcher=..., max_batch_size=...): gives the class a host(*args,
    **kwargs) that constructs the model and returns its ModelHost (not
    started)."""
    if len(args) == 1 and not kwargs and isinstance(args[0], type) and callable(getattr(args[0], "predict_batch", None)):
        return _decorate()(args[0])
    return _decorate(*args, **kwargs)


def _decorate(batcher=None, max_batch_size=32):
    if batcher is None:
        batcher = ConcatBatcher()

    def add_host(model_cls):
        def host(*args, **kwargs):
            return ModelHost(model_cls=model_cls, batcher=batcher, max_batch_size=max_batch_size)(*args, **kwargs)

        model_cls.host = host
        return model_cls

    return add_host
