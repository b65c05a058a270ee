"""Finite-difference tests of every backward rule, through the whole pipeline.

For each case of the table below (one ONNX op, or one chain the exporters
emit: GELU, SiLU, RMSNorm, attention, rotary), a tiny float32 graph is built
with onnx.helper: its parameters are initializers (float, more than one
element: zcc's rule for a trainable parameter), everything else is a Constant
node (so it is never mistaken for a parameter), and it ends in

    loss = ReduceSum(y * R, keepdims=0)

with R a fixed Constant of y's shape (random, so every element of y matters
with a different weight). The cases' graphs are joined into one model (names
prefixed with the case's name; the losses added), compiled once and run once:

    zcc fd_ops.onnx --mode train --loss output:loss --world-size 1
        --persistence-threshold 0 -o PLAN
    mpirun -np 1 zrun PLAN gradients --input gather_embedding.ids=IDS.npy
        --input float_input.x=X.npy --output-dir DIR

The oracle is onnxruntime: each case's graph converted to float64 (its
parameters made graph inputs) gives central differences, eps = 1e-6, of its
loss for every element of every parameter. A parameter passes when

    max |ours - fd| <= 1e-3 * max |fd| + 1e-5.

Why the floor: zcc computes in float32, so a gradient entry that sums n
products of size ~1 carries an absolute error of about n * 6e-8; the cases'
sums run over at most ~100 terms, so 1e-5 bounds float32 rounding while a
wrong rule (a missing term, a transposed or broadcast-unreduced gradient)
misses by the size of the gradient itself (>= 1e-2 in every case here). The
float64 differences themselves are accurate to ~1e-9.

onnxruntime's CPU Erf exists in float32 only: the float64 twin computes Erf by
its Taylor series (erf_series_nodes, exact to 1e-13 for |x| <= 2.5, checked).

If the joined model fails to compile or run, each case is compiled and run on
its own, so the report names every case that fails and why.

Before that (and with --oracle-only, without zcc/zrun at all) the oracle is
checked: every case's float32 graph runs in onnxruntime and its float64 twin
agrees with it to 1e-5 relative; the joined model's loss is the cases' sum;
finite differences match the analytic gradient of MatMul; and a gradient 1%
off in one entry fails the comparison for every parameter of every case.
--infer-check then compiles the joined graph with today's `zcc --mode infer`
and checks `zrun run`'s per-case losses against onnxruntime (every op of the
table imports and runs forward). Each mode runs in a few seconds.
"""
import argparse
import math
import pathlib
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.dont_write_bytecode = True
from common import CheckFailure, main_wrapper, mpirun, run_tool

OPSET = 17
FD_EPS = 1e-6
RTOL = 1e-3
ATOL = 1e-5
TWIN_RTOL = 1e-5


class Case:
    """One graph: nodes from the op's inputs to `y`; params are initializers,
    consts become Constant nodes, inputs are graph inputs (int64 ids, or a
    float32 tensor that is not a parameter)."""

    def __init__(self, name):
        self.name = name
        # Seeded by the name: a case's values do not depend on the table's order.
        self.rng = np.random.default_rng(sum(map(ord, name)) * 7919)
        self.nodes = []
        self.params = {}
        self.consts = {}
        self.inputs = {}

    def param(self, name, shape, low=-1.0, high=1.0, away_from_zero=0.0, distinct=False):
        values = self.rng.uniform(low, high, size=shape)
        if away_from_zero:
            values = np.sign(values) * (away_from_zero + np.abs(values))
        if distinct:  # ReduceMax: no ties within 0.05
            flat = np.linspace(low, high, values.size)
            values = self.rng.permutation(flat).reshape(shape)
        self.params[name] = values.astype(np.float32)
        return name

    def const(self, name, value):
        self.consts[name] = np.asarray(value)
        return name

    def input(self, name, value):
        self.inputs[name] = np.asarray(value)
        return name

    def node(self, op, inputs, output, **attrs):
        self.nodes.append(helper.make_node(op, inputs, [output], **attrs))
        return output


def f32(x):
    return np.array(x, dtype=np.float32)


def i64(x):
    return np.array(x, dtype=np.int64)


# ---------------------------------------------------------------------------
# The table: name -> builder(case) returning the name of y.
# ---------------------------------------------------------------------------

def unary(op, **param_kw):
    def build(c):
        return c.node(op, [c.param("x", [3, 4], **param_kw)], "y")
    return build


def binary(op, a_shape, b_shape, **b_kw):
    def build(c):
        return c.node(op, [c.param("a", a_shape), c.param("b", b_shape, **b_kw)], "y")
    return build


def gemm(c):
    return c.node("Gemm", [c.param("a", [3, 4]), c.param("b", [5, 4]), c.param("c", [5])],
                  "y", transB=1)


def pow_const(exponent):
    def build(c):
        return c.node("Pow", [c.param("x", [3, 4], 0.5, 1.5), c.const("e", f32(exponent))], "y")
    return build


def gelu_erf(c):
    x = c.param("x", [3, 4], -2.0, 2.0)
    c.node("Div", [x, c.const("sqrt2", f32(1.4142135381698608))], "t0")
    c.node("Erf", ["t0"], "t1")
    c.node("Add", ["t1", c.const("one", f32(1.0))], "t2")
    c.node("Mul", [x, "t2"], "t3")
    return c.node("Mul", ["t3", c.const("half", f32(0.5))], "y")


def gelu_tanh(c):
    # transformers' gelu_new as exported: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    x = c.param("x", [3, 4], -2.0, 2.0)
    c.node("Mul", [c.const("half", f32(0.5)), x], "t0")
    c.node("Pow", [x, c.const("three", f32(3.0))], "t1")
    c.node("Mul", [c.const("k", f32(0.044715)), "t1"], "t2")
    c.node("Add", [x, "t2"], "t3")
    c.node("Mul", [c.const("s", f32(0.7978845608028654)), "t3"], "t4")
    c.node("Tanh", ["t4"], "t5")
    c.node("Add", [c.const("one", f32(1.0)), "t5"], "t6")
    return c.node("Mul", ["t0", "t6"], "y")


def silu(c):
    x = c.param("x", [3, 4], -2.0, 2.0)
    c.node("Sigmoid", [x], "s")
    return c.node("Mul", [x, "s"], "y")


def softmax(axis):
    def build(c):
        return c.node("Softmax", [c.param("x", [2, 3, 4], -2.0, 2.0)], "y", axis=axis)
    return build


def layer_norm(c):
    return c.node("LayerNormalization",
                  [c.param("x", [2, 3, 8], -2.0, 2.0), c.param("scale", [8], 0.5, 1.5),
                   c.param("bias", [8])], "y", axis=-1, epsilon=1e-5)


def rms_norm(c):
    # Llama's RMSNorm as exported: x * (1 / sqrt(mean(x^2) + eps)) * weight
    x = c.param("x", [2, 3, 8], -2.0, 2.0)
    c.node("Pow", [x, c.const("two", f32(2.0))], "t0")
    c.node("ReduceMean", ["t0"], "t1", axes=[-1], keepdims=1)
    c.node("Add", ["t1", c.const("eps", f32(1e-6))], "t2")
    c.node("Sqrt", ["t2"], "t3")
    c.node("Div", [c.const("one", f32(1.0)), "t3"], "t4")
    c.node("Mul", [x, "t4"], "t5")
    return c.node("Mul", [c.param("weight", [8], 0.5, 1.5), "t5"], "y")


def gather_embedding(c):
    ids = c.input("ids", i64([[1, 4, 4, 0, 9], [4, 2, 1, 1, 7]]))  # repeats: 4 x3, 1 x3
    return c.node("Gather", [c.param("table", [10, 4]), ids], "y", axis=0)


def gather_axis1(c):
    return c.node("Gather", [c.param("x", [3, 5, 2]), c.const("idx", i64([4, 1, 4]))], "y",
                  axis=1)


def slice_steps(c):
    return c.node("Slice", [c.param("x", [5, 7]), c.const("starts", i64([0, 1])),
                            c.const("ends", i64([5, 7])), c.const("axes", i64([0, 1])),
                            c.const("steps", i64([2, 3]))], "y")


def split(c):
    # GPT-2's q, k, v = c_attn(x).split(...): Split with a sizes input.
    x = c.param("x", [2, 6])
    c.nodes.append(helper.make_node("Split", [x, c.const("sizes", i64([1, 2, 3]))],
                                    ["y0", "y1", "y2"], axis=1))
    c.node("Mul", ["y0", "y1"], "t")
    return c.node("Concat", ["y2", "t"], "y", axis=1)


def squeeze_unsqueeze(c):
    c.node("Unsqueeze", [c.param("x", [3, 4]), c.const("axes0", i64([0, 2]))], "t")
    c.node("Mul", ["t", c.param("w", [2, 3, 1, 4])], "u")  # [2, 3, 1, 4]
    return c.node("Squeeze", ["u", c.const("axes1", i64([2]))], "y")


def max_const(c):
    # OPT clamps attention scores from below: Max(scores, finfo.min); here a
    # clamp at 0 that some entries hit (no entry within 0.1 of it).
    return c.node("Max", [c.param("x", [3, 4], away_from_zero=0.1), c.const("floor", f32(0.0))],
                  "y")


def max_pair(c):
    a = c.param("a", [3, 4], -1.0, 1.0, distinct=True)
    return c.node("Max", [a, c.param("b", [4], -0.95, 0.95, distinct=True)], "y")


def float_input(c):
    # A float graph input feeding a parameter's gradient (it gets none itself).
    x = c.input("x", np.linspace(-1.5, 1.5, 12, dtype=np.float32).reshape(3, 4))
    c.node("Tanh", [x], "t")
    return c.node("Mul", [c.param("w", [3, 4]), "t"], "y")


def concat(c):
    return c.node("Concat", [c.param("a", [2, 3]), c.param("b", [2, 2])], "y", axis=1)


def transpose(c):
    return c.node("Transpose", [c.param("x", [2, 3, 4])], "y", perm=[2, 0, 1])


def reshape(c):
    return c.node("Reshape", [c.param("x", [2, 3, 4]), c.const("shape", i64([-1, 4]))], "y")


def expand(c):
    return c.node("Expand", [c.param("x", [3, 1]), c.const("shape", i64([2, 3, 4]))], "y")


def reduce_input(op, axes, keepdims):
    def build(c):
        return c.node(op, [c.param("x", [2, 3, 4]), c.const("axes", i64(axes))], "y",
                      keepdims=keepdims)
    return build


def reduce_attr(op, axes, keepdims, **param_kw):
    # ReduceMean and ReduceMax take axes as an attribute before opset 18.
    def build(c):
        return c.node(op, [c.param("x", [2, 3, 4], **param_kw)], "y", axes=axes,
                      keepdims=keepdims)
    return build


def where(c):
    condition = c.const("cond", np.array([[True, False, True, True], [False, False, True, False],
                                          [True, True, False, True]]))
    return c.node("Where", [condition, c.param("a", [3, 4]), c.param("b", [4])], "y")


def cast(c):
    return c.node("Cast", [c.param("x", [3, 4])], "y", to=TensorProto.FLOAT)


def causal_additive(s):
    mask = np.triu(np.full((s, s), np.finfo(np.float32).min, dtype=np.float32), k=1)
    return mask


def attention_additive(c):
    # Llama style: MatMul(Q, K^T) * scale + additive causal mask, Softmax, MatMul V.
    q = c.param("q", [1, 2, 4, 3])
    k = c.param("k", [1, 2, 4, 3])
    v = c.param("v", [1, 2, 4, 3])
    c.node("Transpose", [k], "kt", perm=[0, 1, 3, 2])
    c.node("MatMul", [q, "kt"], "s0")
    c.node("Mul", ["s0", c.const("scale", f32(1 / np.sqrt(3)))], "s1")
    c.node("Add", ["s1", c.const("mask", causal_additive(4))], "s2")
    c.node("Softmax", ["s2"], "p", axis=-1)
    return c.node("MatMul", ["p", v], "y")


def attention_select(c):
    # GPT-2 style: MatMul, Div by sqrt(d), Where(causal, scores, finfo.min), Softmax, MatMul.
    q = c.param("q", [1, 2, 4, 3])
    k = c.param("k", [1, 2, 4, 3])
    v = c.param("v", [1, 2, 4, 3])
    c.node("Transpose", [k], "kt", perm=[0, 1, 3, 2])
    c.node("MatMul", [q, "kt"], "s0")
    c.node("Div", ["s0", c.const("sqrtd", f32(np.sqrt(3)))], "s1")
    keep = np.tril(np.ones((4, 4), dtype=bool))[None, None]
    c.node("Where", [c.const("causal", keep), "s1",
                     c.const("low", f32(np.finfo(np.float32).min))], "s2")
    c.node("Softmax", ["s2"], "p", axis=-1)
    return c.node("MatMul", ["p", v], "y")


def rotary(c):
    # x * cos + rotate_half(x) * sin; cos/sin from Cos/Sin of a constant angle table.
    x = c.param("x", [1, 2, 4, 4])
    angles = np.outer(np.arange(4), [1.0, 0.1, 1.0, 0.1]).astype(np.float32)
    c.node("Cos", [c.const("angles", angles)], "cos")
    c.node("Sin", ["angles"], "sin")
    c.node("Slice", [x, c.const("s0", i64([0])), c.const("e0", i64([2])),
                     c.const("ax", i64([-1]))], "x1")
    c.node("Slice", [x, c.const("s1", i64([2])), c.const("e1", i64([4])), "ax"], "x2")
    c.node("Neg", ["x2"], "nx2")
    c.node("Concat", ["nx2", "x1"], "rot", axis=-1)
    c.node("Mul", [x, "cos"], "a")
    c.node("Mul", ["rot", "sin"], "b")
    return c.node("Add", ["a", "b"], "y")


CASES = [
    ("matmul", binary("MatMul", [3, 4], [4, 5])),
    ("matmul_batched", binary("MatMul", [2, 3, 4], [4, 5])),
    ("gemm_bias_transb", gemm),
    ("add_broadcast", binary("Add", [2, 3, 4], [4])),
    ("sub_broadcast", binary("Sub", [2, 3, 4], [3, 1])),
    ("mul_broadcast", binary("Mul", [2, 3, 4], [3, 4])),
    ("div_broadcast", binary("Div", [2, 3, 4], [1, 3, 1], low=0.5, high=1.5)),
    ("pow_3", pow_const(3.0)),
    ("pow_2", pow_const(2.0)),
    ("sqrt", unary("Sqrt", low=0.5, high=2.0)),
    ("exp", unary("Exp")),
    ("log", unary("Log", low=0.5, high=2.0)),
    ("tanh", unary("Tanh", low=-2.0, high=2.0)),
    ("sigmoid", unary("Sigmoid", low=-3.0, high=3.0)),
    ("relu", unary("Relu", away_from_zero=0.1)),
    ("neg", unary("Neg")),
    ("abs", unary("Abs", away_from_zero=0.1)),
    ("reciprocal", unary("Reciprocal", low=0.5, high=2.0)),
    ("erf", unary("Erf", low=-2.0, high=2.0)),
    ("gelu_erf", gelu_erf),
    ("gelu_tanh", gelu_tanh),
    ("silu", silu),
    ("softmax_last", softmax(-1)),
    ("softmax_middle", softmax(1)),
    ("layer_norm", layer_norm),
    ("rms_norm", rms_norm),
    ("gather_embedding", gather_embedding),
    ("gather_axis1", gather_axis1),
    ("slice_steps", slice_steps),
    ("concat", concat),
    ("split", split),
    ("squeeze_unsqueeze", squeeze_unsqueeze),
    ("max_const", max_const),
    ("max_pair", max_pair),
    ("float_input", float_input),
    ("transpose", transpose),
    ("reshape", reshape),
    ("expand", expand),
    ("reduce_sum_keep0", reduce_input("ReduceSum", [1], 0)),
    ("reduce_sum_keep1", reduce_input("ReduceSum", [-1], 1)),
    ("reduce_mean_keep0", reduce_attr("ReduceMean", [0, 2], 0)),
    ("reduce_mean_keep1", reduce_attr("ReduceMean", [1], 1)),
    ("reduce_max", reduce_attr("ReduceMax", [2], 0, distinct=True)),
    ("where", where),
    ("cast", cast),
    ("attention_additive", attention_additive),
    ("attention_select", attention_select),
    ("rotary", rotary),
]


# ---------------------------------------------------------------------------
# Graph assembly
# ---------------------------------------------------------------------------

def build_case(name, builder):
    case = Case(name)
    y = builder(case)
    # y's shape from onnxruntime on the case without the loss: simplest and exact.
    probe = make_model([case], loss=False, outputs=[y])
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {case.name + "." + k: v for k, v in case.inputs.items()}
    (value,) = session.run(None, feeds)
    case.y = y
    case.r = case.rng.uniform(-1.0, 1.0, size=value.shape).astype(np.float32)
    return case


def prefixed(case, name):
    return f"{case.name}.{name}" if name else name


def constant_node(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name))


ERF_TERMS = 40


def erf_series_nodes(x, y, prefix):
    """y = erf(x) in float64 ops: onnxruntime's CPU Erf is float32 only.

    erf(x) = 2/sqrt(pi) * x * sum_n (-1)^n x^(2n) / (n! (2n+1)), by Horner in
    x^2; 40 terms are exact to double rounding for |x| <= 2 (checked by
    erf_series_self_test against math.erf)."""
    coefficients = [(-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(ERF_TERMS)]
    nodes = [helper.make_node("Mul", [x, x], [f"{prefix}.x2"])]

    def const(name, value):
        nodes.append(constant_node(f"{prefix}.{name}", np.array(value, dtype=np.float64)))
        return f"{prefix}.{name}"

    acc = const(f"c{ERF_TERMS - 1}", coefficients[-1])
    for n in range(ERF_TERMS - 2, -1, -1):
        nodes.append(helper.make_node("Mul", [acc, f"{prefix}.x2"], [f"{prefix}.m{n}"]))
        nodes.append(helper.make_node("Add", [f"{prefix}.m{n}", const(f"c{n}", coefficients[n])],
                                      [f"{prefix}.a{n}"]))
        acc = f"{prefix}.a{n}"
    nodes.append(helper.make_node("Mul", [acc, x], [f"{prefix}.ax"]))
    nodes.append(helper.make_node("Mul", [f"{prefix}.ax", const("k", 2 / math.sqrt(math.pi))],
                                  [y]))
    return nodes


def erf_series_self_test():
    x = np.linspace(-2.5, 2.5, 101)
    graph = helper.make_graph(
        erf_series_nodes("x", "y", "erf"), "erf",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [101])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [101])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"x": x})
    error = float(np.max(np.abs(y - np.array([math.erf(v) for v in x]))))
    if not error <= 1e-13:
        raise CheckFailure(f"oracle: the float64 erf series is off by {error:.2e}")
    return error


def case_nodes(case, float_type):
    """The case's nodes with prefixed names; floats as `float_type`."""
    nodes = []
    for name, value in case.consts.items():
        if value.dtype == np.float32:
            value = value.astype(float_type)
        nodes.append(constant_node(prefixed(case, name), value))
    for node in case.nodes:
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copy.input[:] = [prefixed(case, n) for n in node.input]
        copy.output[:] = [prefixed(case, n) for n in node.output]
        copy.name = prefixed(case, f"{node.op_type}_{len(nodes)}")
        for attribute in copy.attribute:
            if attribute.name == "to" and attribute.i == TensorProto.FLOAT and float_type == np.float64:
                attribute.i = TensorProto.DOUBLE
        if float_type == np.float64 and copy.op_type == "Erf":
            nodes += erf_series_nodes(copy.input[0], copy.output[0], copy.name)
            continue
        nodes.append(copy)
    return nodes


def make_model(cases, loss=True, outputs=(), float_type=np.float32, params_as_inputs=False,
               case_losses=False):
    elem = TensorProto.FLOAT if float_type == np.float32 else TensorProto.DOUBLE
    nodes, initializers, inputs, graph_outputs, losses = [], [], [], [], []
    for case in cases:
        nodes += case_nodes(case, float_type)
        for name, value in case.params.items():
            full = prefixed(case, name)
            if params_as_inputs:
                inputs.append(helper.make_tensor_value_info(full, elem, value.shape))
            else:
                initializers.append(numpy_helper.from_array(value.astype(float_type), full))
        for name, value in case.inputs.items():
            kind = elem if value.dtype.kind == "f" else TensorProto.INT64
            inputs.append(helper.make_tensor_value_info(prefixed(case, name), kind, value.shape))
        for name in outputs:
            graph_outputs.append(helper.make_tensor_value_info(prefixed(case, name), elem, None))
        if loss:
            r = prefixed(case, "R")
            nodes.append(constant_node(r, case.r.astype(float_type)))
            nodes.append(helper.make_node("Mul", [prefixed(case, case.y), r],
                                          [prefixed(case, "weighted")]))
            nodes.append(helper.make_node("ReduceSum", [prefixed(case, "weighted")],
                                          [prefixed(case, "loss")], keepdims=0))
            losses.append(prefixed(case, "loss"))
    if loss:
        total = losses[0]
        for i, term in enumerate(losses[1:]):
            total_next = f"loss_sum_{i}" if i + 2 < len(losses) else "loss"
            nodes.append(helper.make_node("Add", [total, term], [total_next]))
            total = total_next
        if len(losses) == 1:
            nodes.append(helper.make_node("Identity", [losses[0]], ["loss"]))
        graph_outputs.append(helper.make_tensor_value_info("loss", elem, []))
        if case_losses:
            graph_outputs += [helper.make_tensor_value_info(name, elem, []) for name in losses]
    graph = helper.make_graph(nodes, "fd_ops", inputs, graph_outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="zplan test/train/fd_ops.py")
    model.ir_version = 8
    if loss:  # the probe's outputs have no declared shape
        onnx.checker.check_model(model, full_check=True)
    return model


# ---------------------------------------------------------------------------
# Oracle
# ---------------------------------------------------------------------------

class Oracle:
    """A case's loss in float32 and float64 (parameters as graph inputs)."""

    def __init__(self, case):
        self.case = case
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        self.sessions = {}
        for float_type in (np.float32, np.float64):
            model = make_model([case], float_type=float_type, params_as_inputs=True)
            self.sessions[float_type] = ort.InferenceSession(
                model.SerializeToString(), options, providers=["CPUExecutionProvider"])

    def loss(self, params, float_type):
        feeds = {prefixed(self.case, k): v.astype(float_type) for k, v in params.items()}
        feeds.update({prefixed(self.case, k): v.astype(float_type) if v.dtype.kind == "f" else v
                      for k, v in self.case.inputs.items()})
        (value,) = self.sessions[float_type].run(["loss"], feeds)
        return float(value)

    def check_twin(self):
        base = {k: v.astype(np.float64) for k, v in self.case.params.items()}
        l32 = self.loss(self.case.params, np.float32)
        l64 = self.loss(base, np.float64)
        error = abs(l32 - l64) / max(abs(l64), 1e-12)
        if not error <= TWIN_RTOL:
            raise CheckFailure(f"oracle {self.case.name}: float32 loss {l32:.9g}, float64 twin "
                               f"{l64:.9g} (relative {error:.2e} > {TWIN_RTOL})")
        return error

    def finite_differences(self):
        base = {k: v.astype(np.float64) for k, v in self.case.params.items()}
        out = {}
        for name, value in base.items():
            grad = np.zeros_like(value)
            flat = value.reshape(-1)
            for i in range(flat.size):
                saved = flat[i]
                flat[i] = saved + FD_EPS
                plus = self.loss(base, np.float64)
                flat[i] = saved - FD_EPS
                minus = self.loss(base, np.float64)
                flat[i] = saved
                grad.reshape(-1)[i] = (plus - minus) / (2 * FD_EPS)
            out[name] = grad
        return out


# ---------------------------------------------------------------------------
# The pipeline
# ---------------------------------------------------------------------------

def run_pipeline(args, cases, directory):
    """zcc + zrun gradients on the joined model of `cases`; name -> gradient."""
    directory.mkdir(parents=True, exist_ok=True)
    model_path = directory / "fd_ops.onnx"
    onnx.save_model(make_model(cases), str(model_path))
    plan = directory / "fd_ops.zplan"
    run_tool("zcc --mode train", [args.zcc, str(model_path), "--mode", "train", "--loss",
                                  "output:loss", "--world-size", "1",
                                  "--persistence-threshold", "0", "-o", str(plan)])
    command = mpirun(1) + [args.zrun, str(plan), "gradients"]
    for case in cases:
        for name, value in case.inputs.items():
            path = directory / f"{prefixed(case, name)}.npy"
            np.save(path, value)
            command += ["--input", f"{prefixed(case, name)}={path}"]
    out = directory / "gradients"
    command += ["--output-dir", str(out)]
    run_tool("zrun gradients", command)
    listing = out / "gradients.txt"
    if not listing.is_file():
        raise CheckFailure(f"{listing} was not written")
    grads = {}
    for line in listing.read_text().splitlines():
        if line.strip():
            name, file = line.split("\t")
            path = pathlib.Path(file)
            grads[name] = np.load(path if path.is_absolute() else out / path, allow_pickle=False)
    return grads


def compare_case(case, fd, ours):
    """One line per case; raises CheckFailure on a wrong or missing gradient."""
    worst = (0.0, "")
    for name, reference in fd.items():
        full = prefixed(case, name)
        if full not in ours:
            raise CheckFailure(f"{case.name}: no gradient for parameter {full}")
        got = ours[full]
        if got.shape != reference.shape:
            raise CheckFailure(f"{case.name}: gradient of {full} has shape {list(got.shape)}, "
                               f"expected {list(reference.shape)}")
        error = float(np.abs(got.astype(np.float64) - reference).max())
        bound = RTOL * float(np.abs(reference).max()) + ATOL
        if not error <= bound:  # also catches NaN
            index = np.unravel_index(int(np.argmax(np.abs(got - reference))), got.shape)
            raise CheckFailure(f"{case.name}: gradient of {full}: max |ours - fd| {error:.3e} > "
                               f"{bound:.3e} (at {list(index)}: ours {got[index]:.6g}, "
                               f"fd {reference[index]:.6g})")
        worst = max(worst, (error / bound, full))
    return worst


def check_oracle(cases, oracles, fds):
    """The comparison can fail, and the oracle agrees with what is known."""
    # The joined model (what zcc gets) computes the sum of the cases' losses.
    joined = ort.InferenceSession(make_model(cases).SerializeToString(),
                                  providers=["CPUExecutionProvider"])
    feeds = {prefixed(c, k): v for c in cases for k, v in c.inputs.items()}
    (total,) = joined.run(["loss"], feeds)
    expected = sum(oracles[c.name].loss(c.params, np.float64) for c in cases)
    if not abs(float(total) - expected) <= 1e-5 * max(1.0, abs(expected)):
        raise CheckFailure(f"oracle: joined model loss {float(total)} != sum of cases {expected}")
    # An analytic gradient: loss = sum((A @ B) * R) gives dA = R @ B^T, dB = A^T @ R.
    for c in cases:
        if c.name == "matmul":
            a, b = (c.params[k].astype(np.float64) for k in ("a", "b"))
            r = c.r.astype(np.float64)
            for name, exact in (("a", r @ b.T), ("b", a.T @ r)):
                error = float(np.abs(fds["matmul"][name] - exact).max())
                if not error <= 1e-7:
                    raise CheckFailure(f"oracle: matmul d{name} by finite differences is off "
                                       f"the analytic gradient by {error:.2e}")
    # A gradient 1% off in one entry must fail the comparison.
    for c in cases:
        for name, g in fds[c.name].items():
            wrong = {prefixed(c, k): v.copy() for k, v in fds[c.name].items()}
            flat = wrong[prefixed(c, name)].reshape(-1)
            flat[int(np.argmax(np.abs(flat)))] += 0.01 * float(np.abs(g).max())
            try:
                compare_case(c, fds[c.name], wrong)
            except CheckFailure:
                continue
            raise CheckFailure(f"oracle: {c.name}: a 1% error in {name} passes the comparison")


def infer_check(args, cases, directory):
    """The joined graph (with each case's loss as an extra output) compiled by
    today's `zcc --mode infer` and run by `zrun run` gives onnxruntime's
    losses: every op of the table imports and runs forward, so a failure of
    the training check is about the backward rules."""
    directory.mkdir(parents=True, exist_ok=True)
    model = make_model(cases, case_losses=True)
    model_path = directory / "fd_ops_infer.onnx"
    onnx.save_model(model, str(model_path))
    plan = directory / "fd_ops_infer.zplan"
    run_tool("zcc --mode infer", [args.zcc, str(model_path), "--world-size", "1",
                                  "--persistence-threshold", "0", "-o", str(plan)])
    names = ["loss"] + [prefixed(c, "loss") for c in cases]
    command = mpirun(1) + [args.zrun, str(plan), "run"]
    feeds = {}
    for case in cases:
        for name, value in case.inputs.items():
            path = directory / f"{prefixed(case, name)}.npy"
            np.save(path, value)
            feeds[prefixed(case, name)] = value
            command += ["--input", f"{prefixed(case, name)}={path}"]
    for name in names:
        command += ["--output", f"{name}={directory / (name + '.npy')}"]
    run_tool("zrun run", command)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    reference = dict(zip(names, session.run(names, feeds)))
    worst = 0.0
    for name in names:
        got = float(np.load(directory / (name + ".npy")))
        want = float(reference[name])
        error = abs(got - want) / max(abs(want), 1.0)
        if not error <= TWIN_RTOL:
            raise CheckFailure(f"zrun run: {name} = {got:.9g}, onnxruntime {want:.9g} "
                               f"(error {error:.2e})")
        worst = max(worst, error)
    print(f"ok infer: {len(cases)} cases compiled by zcc --mode infer, zrun's losses within "
          f"{worst:.1e} of onnxruntime")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zcc")
    parser.add_argument("--zrun")
    parser.add_argument("--out", required=True)
    parser.add_argument("--oracle-only", action="store_true",
                        help="check the oracle (graphs, float64 twins) without zcc/zrun")
    parser.add_argument("--only", help="comma-separated case names")
    parser.add_argument("--infer-check", action="store_true",
                        help="after the oracle, check the forward graphs through "
                             "zcc --mode infer and zrun run; no training")
    args = parser.parse_args()
    if not args.oracle_only and not (args.zcc and args.zrun):
        parser.error("--zcc and --zrun are required unless --oracle-only")
    out = pathlib.Path(args.out)
    wanted = set(args.only.split(",")) if args.only else None
    cases = [build_case(name, builder) for name, builder in CASES
             if wanted is None or name in wanted]
    erf_error = erf_series_self_test()
    oracles = {c.name: Oracle(c) for c in cases}
    twin = max(o.check_twin() for o in oracles.values())
    fds = {c.name: oracles[c.name].finite_differences() for c in cases}
    smallest = min(float(np.abs(g).max()) for fd in fds.values() for g in fd.values())
    check_oracle(cases, oracles, fds)
    print(f"ok oracle: {len(cases)} cases, float32 vs float64 loss within {twin:.1e}, "
          f"float64 erf series within {erf_error:.1e}, "
          f"smallest max |fd| of a parameter {smallest:.2e}")
    if args.oracle_only:
        return
    if args.infer_check:
        infer_check(args, cases, out / "infer")
        return

    joined_failure = None
    try:
        ours = run_pipeline(args, cases, out / "all")
        failures = []
        per_case = {}
        for case in cases:
            try:
                per_case[case.name] = compare_case(case, fds[case.name], ours)
            except CheckFailure as failure:
                failures.append(str(failure))
        extra = sorted(set(ours) - {prefixed(c, n) for c in cases for n in c.params})
        if extra:
            failures.append(f"gradients for names that are not parameters: {extra}")
    except CheckFailure as joined:
        # Find out which cases the pipeline cannot take, one by one; unless
        # the simplest one fails as well (no training pipeline at all). The
        # run fails either way: the joined model must work too.
        print(f"note: the joined model failed ({joined}); running each case alone")
        failures, per_case = [], {}
        joined_failure = f"the joined model failed: {joined}"
        try:
            first = run_pipeline(args, [cases[0]], out / cases[0].name)
        except CheckFailure as failure:
            raise CheckFailure(f"even the case {cases[0].name} alone fails: {failure}")
        per_case[cases[0].name] = compare_case(cases[0], fds[cases[0].name], first)
        for case in cases[1:]:
            try:
                alone = run_pipeline(args, [case], out / case.name)
                per_case[case.name] = compare_case(case, fds[case.name], alone)
            except CheckFailure as failure:
                failures.append(f"{case.name}: {failure}")
    for case in cases:
        if case.name in per_case:
            ratio, name = per_case[case.name]
            print(f"ok {case.name} worst {name} at {ratio:.3f} of the bound")
    if failures or joined_failure:
        raise CheckFailure(" || ".join(
            ([f"{len(failures)} of {len(cases)} cases fail: "] if failures else [])
            + failures + ([joined_failure] if joined_failure else [])))


if __name__ == "__main__":
    main_wrapper(main)
