"""Writes MODEL with every trainable initializer rounded to bf16 (and, with
--kv-bf16, every attention's keys and values).

The oracle of `zcc --param-dtype bf16` generation (test/generate/
bf16-generate.test): zplan computes in float32 from each parameter's bf16
value, so onnxruntime on this model (the same graph, each float initializer
of more than one element -- zcc's rule for a parameter -- rounded to the
nearest bf16, ties to even, and stored back as float32) is the reference.
The rounding is numpy's own, not zplan's: the float32 bits plus 0x7FFF plus
the lowest kept bit, truncated to the top 16 bits.

    round_weights.py MODEL OUT [--kv-bf16] [--matmul-bf16 [--elementwise-bf16]]
Prints how many initializers and elements it rounded, and how many changed.

--matmul-bf16: zplan's `--compute-dtype bf16` (the default under
--param-dtype bf16) multiplies every Linear layer's bf16 operands in f32 and
rounds the result to bf16, so every MatMul that reads a weight (an
initializer, directly or through a Transpose: torch.onnx's Linear) gets both
inputs and its result rounded to bf16 (a Cast to BFLOAT16 and back); the
result after the bias when an Add of a weight follows (zcc folds the bias
into the product). The attention's own MatMuls (fused into one op by zcc,
computed in f32) and the rotary table's (positions only) are left alone.

--elementwise-bf16 (with --matmul-bf16): zplan's elementwise rule under
`--compute-dtype bf16`: an elementwise op whose float inputs are all bf16 (a
weight MatMul's rounded result, or such an op's) returns bf16; its result is
rounded too (round_elementwise).

--kv-bf16: zplan's bf16 plans also store the KV cache in bf16, so every
attention reads its keys and values rounded. For each Softmax of the graph,
the MatMul its scores come from (back through Add, Div, Mul, Where) gets a
Cast to BFLOAT16 and back to FLOAT on its second input (the keys,
transposed), and the MatMul its probabilities go to (forward through Cast)
the same on its second input (the values). Rounding commutes with the
transposes and head repeats between the cache and those MatMuls (they only
move elements). onnxruntime's Cast to bfloat16 rounds to nearest even: the
same bits as the numpy rounding above on 10^6 normal samples (checked when
this was written, onnxruntime 1.32).
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def round_to_bf16(array):
    bits = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return rounded.view(np.float32)


def producers_and_readers(graph):
    """Each value's producing node, and each value's reading nodes."""
    producer = {output: node for node in graph.node for output in node.output}
    readers = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    return producer, readers


def round_attention_kv(graph):
    """Inserts bf16 round trips on every attention's keys and values, each
    right before the MatMul that reads them (the graph stays sorted);
    returns how many attentions it found."""
    nodes = list(graph.node)
    position = {node.output[0]: index for index, node in enumerate(nodes) if node.output}
    producer, consumers = producers_and_readers(graph)
    before = {}  # index of a MatMul -> the Casts to place before it

    def round_input(node, index):
        name = node.input[index]
        rounded, back = name + "/bf16", name + "/bf16_f32"
        before.setdefault(position[node.output[0]], []).extend([
            helper.make_node("Cast", [name], [rounded], to=TensorProto.BFLOAT16),
            helper.make_node("Cast", [rounded], [back], to=TensorProto.FLOAT)])
        node.input[index] = back

    found = 0
    for softmax in [node for node in nodes if node.op_type == "Softmax"]:
        scores = producer.get(softmax.input[0])
        while scores is not None and scores.op_type in ("Add", "Div", "Mul", "Where"):
            scores = producer.get(scores.input[0] if scores.op_type != "Where" else scores.input[1])
        after = consumers.get(softmax.output[0], [])
        while len(after) == 1 and after[0].op_type == "Cast":
            after = consumers.get(after[0].output[0], [])
        if scores is None or scores.op_type != "MatMul" or len(after) != 1 \
                or after[0].op_type != "MatMul":
            sys.exit(f"{softmax.name}: not the MatMul-Softmax-MatMul attention --kv-bf16 knows")
        round_input(scores, 1)
        round_input(after[0], 1)
        found += 1
    ordered = []
    for index, node in enumerate(nodes):
        ordered.extend(before.get(index, []))
        ordered.append(node)
    del graph.node[:]
    graph.node.extend(ordered)
    return found


def round_linears(graph):
    """Inserts bf16 round trips on both inputs of every MatMul that reads a
    weight, right before it, and on its result (after its bias), right
    after; returns how many MatMuls it changed."""
    weights = {tensor.name for tensor in graph.initializer}
    producer, readers = producers_and_readers(graph)

    def is_weight(name):
        node = producer.get(name)
        return name in weights or (node is not None and node.op_type == "Transpose"
                                   and node.input[0] in weights)

    def round_trip(source, rounded, back):
        return [helper.make_node("Cast", [source], [rounded], to=TensorProto.BFLOAT16),
                helper.make_node("Cast", [rounded], [back], to=TensorProto.FLOAT)]

    # The node whose result is rounded (the MatMul, or the bias Add after
    # it) -> the round trip that follows it; its readers keep the name.
    after = {}
    ordered, found = [], 0
    for node in graph.node:
        if node.op_type == "MatMul" and any(is_weight(name) for name in node.input):
            for index, name in enumerate(list(node.input)):
                rounded, back = f"{node.name}/in{index}/bf16", f"{node.name}/in{index}/bf16_f32"
                ordered += round_trip(name, rounded, back)
                node.input[index] = back
            last = node
            users = readers.get(node.output[0], [])
            if (len(users) == 1 and users[0].op_type == "Add"
                    and any(name in weights for name in users[0].input)):
                last = users[0]
            result = last.output[0]
            last.output[0] = f"{result}/f32"
            after[id(last)] = round_trip(last.output[0], f"{result}/bf16", result)
            found += 1
        ordered.append(node)
        ordered += after.pop(id(node), [])
    del graph.node[:]
    graph.node.extend(ordered)
    return found


# The inputs of a node that carry its data (the rest are shapes, indices,
# axes): ops that only move elements, whose output is bf16-valued when these
# inputs are.
MOVES = {"Reshape": [0], "Transpose": [0], "Slice": [0], "Squeeze": [0],
         "Unsqueeze": [0], "Expand": [0], "Split": [0], "Identity": [0], "Neg": [0],
         "Concat": None}
# Elementwise ops that compute a new value: rounded when every input is
# bf16-valued.
COMPUTES = {"Mul", "Add", "Sub", "Div", "Relu", "Tanh", "Sigmoid", "Erf", "Exp"}


def round_elementwise(graph):
    """zplan's elementwise rule under --compute-dtype bf16 (autocast's type
    promotion): an elementwise op whose float inputs are all bf16 returns
    bf16, computed in f32 and rounded once. Starting from the weight MatMuls'
    rounded results (run after round_linears), marks what only moves them
    bf16-valued, and rounds each computing op all of whose inputs are (a
    Cast to BFLOAT16 and back after it). SiLU, exported as x * Sigmoid(x), is
    one op in torch and in zcc (nn.silu), so its Sigmoid is not rounded on
    its own; the Mul is. An op with one float32 input (the residual, the
    rotary tables, a constant) stays float32. Returns how many it rounded."""
    bf16 = {node.output[0] for node in graph.node
            if node.op_type == "Cast" and node.input[0].endswith("/bf16")}
    producer, readers = producers_and_readers(graph)

    def silu_sigmoid(node):
        """The Sigmoid of a bf16 x read only by Mul(x, Sigmoid(x))."""
        users = readers.get(node.output[0], [])
        return (node.op_type == "Sigmoid" and node.input[0] in bf16 and len(users) == 1
                and users[0].op_type == "Mul" and node.input[0] in users[0].input)

    ordered, found = [], 0
    for node in graph.node:
        ordered.append(node)
        if node.op_type in MOVES:
            data = MOVES[node.op_type]
            inputs = node.input if data is None else [node.input[i] for i in data]
            if inputs and all(name in bf16 for name in inputs):
                bf16.update(node.output)
            continue
        if node.op_type == "Mul" and any(
                producer.get(name) is not None and silu_sigmoid(producer[name])
                for name in node.input):
            inputs = [name for name in node.input if producer.get(name) is None
                      or not silu_sigmoid(producer[name])]
        elif node.op_type in COMPUTES and not silu_sigmoid(node):
            inputs = list(node.input)
        else:
            continue
        if not all(name in bf16 for name in inputs):
            continue
        result = node.output[0]
        node.output[0] = f"{result}/ew_f32"
        ordered += [helper.make_node("Cast", [node.output[0]], [f"{result}/ew_bf16"],
                                     to=TensorProto.BFLOAT16),
                    helper.make_node("Cast", [f"{result}/ew_bf16"], [result],
                                     to=TensorProto.FLOAT)]
        bf16.add(result)
        found += 1
    del graph.node[:]
    graph.node.extend(ordered)
    return found


def main():
    flags = ("--kv-bf16", "--matmul-bf16", "--elementwise-bf16")
    args = [a for a in sys.argv[1:] if a not in flags]
    if len(args) != 2 or ("--elementwise-bf16" in sys.argv
                          and "--matmul-bf16" not in sys.argv):
        sys.exit("usage: round_weights.py MODEL OUT [--kv-bf16] "
                 "[--matmul-bf16 [--elementwise-bf16]]")
    model = onnx.load_model(args[0])
    count = elements = changed = 0
    for index, tensor in enumerate(model.graph.initializer):
        array = numpy_helper.to_array(tensor)
        if array.dtype != np.float32 or array.size <= 1:
            continue
        if not np.all(np.isfinite(array)):
            sys.exit(f"{tensor.name}: not finite; this rounding is for finite weights")
        rounded = round_to_bf16(array)
        count += 1
        elements += array.size
        changed += int(np.count_nonzero(rounded != array))
        model.graph.initializer[index].CopyFrom(numpy_helper.from_array(rounded, tensor.name))
    if "--kv-bf16" in sys.argv:
        print(f"rounded the keys and values of {round_attention_kv(model.graph)} attentions")
    if "--matmul-bf16" in sys.argv:
        print(f"rounded the inputs and results of {round_linears(model.graph)} weight MatMuls")
    if "--elementwise-bf16" in sys.argv:
        print(f"rounded the results of {round_elementwise(model.graph)} elementwise ops of "
              f"bf16 operands")
    onnx.save_model(model, args[1])
    print(f"rounded {count} initializers, {elements} elements, {changed} changed")


if __name__ == "__main__":
    main()
