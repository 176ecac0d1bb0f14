"""A BERT-shaped encoder written as a TF1 graph, as google-research/bert
(and EasyTransfer's modeling_bert) write it: word, position and token-type
embeddings, layers of multi-head attention with GELU feed-forward blocks
and LayerNorm, [batch*seq, H] matrix products, a tanh pooler on the first
token. Shared by gen_zoo.py and processors/easytransfer's generator.
"""
import numpy as np
import tensorflow as tf

v1 = tf.compat.v1


def encoder(ids, mask, seg, H=32, HEADS=2, LAYERS=2, FF=64, VOCAB=100, MAXPOS=16):
    """Builds the encoder in the current graph under variable scope "bert";
    returns (sequence_output [batch, seq, H], pooled_output [batch, H],
    dense), dense(x, n, name, act=None) adding a layer like the encoder's
    (for a task's head)."""
    init = v1.truncated_normal_initializer(stddev=0.2)
    batch, seq = tf.shape(ids)[0], tf.shape(ids)[1]

    def layer_norm(x, name):
        with v1.variable_scope(name):
            gamma = v1.get_variable("gamma", [H], initializer=v1.random_normal_initializer(1.0, 0.1))
            beta = v1.get_variable("beta", [H], initializer=init)
        mean, var = tf.nn.moments(x, [-1], keepdims=True)
        return (x - mean) * tf.math.rsqrt(var + 1e-12) * gamma + beta

    def dense(x, n, name, act=None):
        with v1.variable_scope(name):
            w = v1.get_variable("kernel", [x.shape[-1], n], initializer=init)
            b = v1.get_variable("bias", [n], initializer=init)
        # As google-research/bert does: a [batch*seq, H] matrix product
        # (tf.tensordot would build its Transpose permutation at run time).
        y = tf.matmul(tf.reshape(x, [-1, x.shape[-1]]), w) + b
        if x.shape.rank == 3:
            y = tf.reshape(y, [batch, seq, n])
        return act(y) if act else y

    def gelu(x):
        return 0.5 * x * (1.0 + tf.math.erf(x / np.sqrt(2.0).astype(np.float32)))

    with v1.variable_scope("bert"):
        with v1.variable_scope("embeddings"):
            word = v1.get_variable("word_embeddings", [VOCAB, H], initializer=init)
            typ = v1.get_variable("token_type_embeddings", [2, H], initializer=init)
            pos = v1.get_variable("position_embeddings", [MAXPOS, H], initializer=init)
            x = tf.gather(word, ids) + tf.gather(typ, seg) + tf.slice(pos, [0, 0], [seq, -1])[None]
            x = layer_norm(x, "LayerNorm")
        bias = (1.0 - tf.cast(mask[:, None, None, :], tf.float32)) * -10000.0
        dh = H // HEADS
        for i in range(LAYERS):
            with v1.variable_scope("layer_%d" % i):
                def heads(t):
                    return tf.transpose(tf.reshape(t, [batch, seq, HEADS, dh]), [0, 2, 1, 3])
                q, k, v = (heads(dense(x, H, n)) for n in ("query", "key", "value"))
                att = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) / np.sqrt(dh).astype(np.float32) + bias)
                ctx = tf.reshape(tf.transpose(tf.matmul(att, v), [0, 2, 1, 3]), [batch, seq, H])
                x = layer_norm(x + dense(ctx, H, "attention_output"), "attention_LayerNorm")
                x = layer_norm(x + dense(dense(x, FF, "intermediate", gelu), H, "output"), "output_LayerNorm")
        pooled = dense(x[:, 0], H, "pooler", tf.tanh)
    return x, pooled, dense
