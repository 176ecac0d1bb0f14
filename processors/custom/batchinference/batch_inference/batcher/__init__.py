"""Batchers: how N requests (each a tuple of predict_batch's arguments)
become one call of predict_batch, and its answer N answers again.

eas-server's stand-in for batch_inference.batcher (Microsoft's
batch-inference 1.0), written from its documented behaviour; the real
package, where the interpreter has it, is used instead.
"""

__all__ = ["Batcher", "ConcatBatcher", "SeqBatcher", "BucketSeqBatcher", "MultiBatcher"]


class _NumpyOps(object):
    name = "np"

    @staticmethod
    def concat(arrays):
        import numpy
        return numpy.concatenate(arrays, axis=0)

    @staticmethod
    def slice(array, start, end):
        return array[start:end]

    @staticmethod
    def size(array, dim):
        return array.shape[dim]

    @staticmethod
    def pad(array, pad, value):
        import numpy
        widths = [(0, 0)] * (array.ndim - 1) + [tuple(pad)]
        return numpy.pad(array, widths, "constant", constant_values=value)


class _TorchOps(object):
    name = "pt"

    @staticmethod
    def concat(tensors):
        import torch
        return torch.cat(list(tensors), dim=0)

    @staticmethod
    def slice(t, start, end):
        return t[start:end]

    @staticmethod
    def size(t, dim):
        return t.size(dim)

    @staticmethod
    def pad(t, pad, value):
        import torch.nn.functional as F
        return F.pad(t, tuple(pad), "constant", value)


def _ops(tensor):
    if tensor == "np":
        return _NumpyOps
    if tensor == "pt":
        return _TorchOps
    raise NotImplementedError("unsupported tensor type %r (use 'np' or 'pt')" % (tensor,))


class Batcher(object):
    """Base class: batch(requests) -> (batched args, unbatch context);
    unbatch(batched response, context) -> one response per request."""

    def batch(self, requests):
        raise NotImplementedError()

    def unbatch(self, batched_response, unbatch_ctx):
        raise NotImplementedError()


class MultiBatcher(Batcher):
    """A batcher whose batch returns a list of batched argument tuples
    (predict_batch runs once for each) and whose unbatch takes the list of
    their responses."""


def _cut(ops, response, start, end):
    # A response is one tensor, or a tuple or list of them (several outputs).
    if type(response) is tuple:
        return tuple(ops.slice(o, start, end) for o in response)
    if type(response) is list:
        return [ops.slice(o, start, end) for o in response]
    return ops.slice(response, start, end)


class ConcatBatcher(Batcher):
    """Concatenates each argument of the requests along dimension 0 and cuts
    the response (each output) back by the requests' sizes."""

    def __init__(self, tensor="np"):
        self.tensor = tensor
        self._ops = _ops(tensor)

    def batch(self, requests):
        sizes = [self._ops.size(r[0], 0) for r in requests]
        args = tuple(self._ops.concat([r[i] for r in requests]) for i in range(len(requests[0])))
        return args, sizes

    def unbatch(self, batched_response, unbatch_ctx):
        out, start = [], 0
        for n in unbatch_ctx:
            out.append(_cut(self._ops, batched_response, start, start + n))
            start += n
        return out


class SeqBatcher(ConcatBatcher):
    """ConcatBatcher for sequences: arguments are right-padded along their
    last dimension, argument i with padding_tokens[i] (None: not padded), to
    the longest first argument of the batch, then concatenated."""

    def __init__(self, padding_tokens=None, tensor="np"):
        ConcatBatcher.__init__(self, tensor=tensor)
        self.padding_tokens = padding_tokens

    def get_seq_length(self, request):
        return self._ops.size(request[0], -1)

    def pad(self, request, seq_len):
        out = []
        for i, x in enumerate(request):
            missing = seq_len - self._ops.size(x, -1)
            if missing > 0:
                out.append(self._ops.pad(x, (0, missing), self.padding_tokens[i]))
            else:
                out.append(x)
        return out

    def batch(self, requests):
        if self.padding_tokens:
            longest = max(self.get_seq_length(r) for r in requests)
            requests = [self.pad(r, longest) for r in requests]
        return ConcatBatcher.batch(self, requests)


class BucketSeqBatcher(MultiBatcher):
    """SeqBatcher within buckets: requests are grouped by sequence length
    (the first bucket holds lengths up to buckets[0], the next up to
    buckets[1], ...; longer ones form a last group), each group padded and
    concatenated on its own and run as one predict_batch."""

    def __init__(self, padding_tokens, buckets, tensor="np"):
        self.buckets = list(buckets)
        self.seq_batcher = SeqBatcher(padding_tokens=padding_tokens, tensor=tensor)
        self.tensor = tensor

    def get_batch_size(self, request):
        return self.seq_batcher._ops.size(request[0], 0)

    def batch(self, requests):
        order = sorted(range(len(requests)), key=lambda i: self.seq_batcher.get_seq_length(requests[i]))
        groups, current, b = [], [], 0
        for i in order:
            n = self.seq_batcher.get_seq_length(requests[i])
            while b < len(self.buckets) and n > self.buckets[b]:
                b += 1
                if current:
                    groups.append(current)
                    current = []
            current.append(i)
        if current:
            groups.append(current)
        batched, ctx = [], []
        for g in groups:
            args, _ = self.seq_batcher.batch([requests[i] for i in g])
            batched.append(tuple(args))
            ctx.append([(i, self.get_batch_size(requests[i])) for i in g])
        return batched, ctx

    def unbatch(self, batched_responses, unbatch_ctx):
        out = {}
        ops = self.seq_batcher._ops
        for response, group in zip(batched_responses, unbatch_ctx):
            start = 0
            for i, n in group:
                out[i] = _cut(ops, response, start, start + n)
                start += n
        return [out[i] for i in sorted(out)]
