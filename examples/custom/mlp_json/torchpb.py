"""The few bytes of EAS's PyTorch protobuf (PredictRequest, PredictResponse)
that a float model needs, written by hand so the hooks need no protobuf
package: a request of float32 tensors, and the float outputs of a response."""
import struct

DT_FLOAT = 1


def _varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num, payload):
    """A length-delimited field."""
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def encode_request(tensors):
    """tensors: a list of (shape, flat float list); PredictRequest.inputs."""
    out = b""
    for shape, data in tensors:
        dims = b"".join(_varint(d) for d in shape)
        array = (_varint(1 << 3) + _varint(DT_FLOAT)        # dtype
                 + _field(2, _field(1, dims))               # array_shape.dim (packed)
                 + _field(3, struct.pack("<%df" % len(data), *data)))  # float_val (packed)
        out += _field(1, array)
    return out


def _read_varint(b, i):
    n = shift = 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return n, i


def _fields(b):
    """Yields (number, wire type, value) of a message."""
    i = 0
    while i < len(b):
        key, i = _read_varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _read_varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 2:
            n, i = _read_varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("unsupported wire type %d" % wt)
        yield num, wt, v


def _array(b):
    shape, data = [], []
    for num, wt, v in _fields(b):
        if num == 2:
            for n2, wt2, v2 in _fields(v):
                if n2 == 1 and wt2 == 2:
                    j = 0
                    while j < len(v2):
                        d, j = _read_varint(v2, j)
                        shape.append(d)
                elif n2 == 1:
                    shape.append(v2)
        elif num == 3 and wt == 2:
            data.extend(struct.unpack("<%df" % (len(v) // 4), v))
        elif num == 3 and wt == 5:
            data.append(struct.unpack("<f", v)[0])
    return shape, data


def decode_response(b):
    """PredictResponse.outputs as a list of (shape, flat float list)."""
    return [_array(v) for num, wt, v in _fields(b) if num == 1 and wt == 2]
