#!/usr/bin/env python3
"""Mutation testing for zcc's ONNX importer: hunts inputs that crash it.

Takes the fixtures (test/models/*.onnx and the text models test/import/*.onnxtxt),
applies random mutations (attribute types and values, shapes, element types,
dropped / duplicated / rewired inputs and outputs, opsets, IR versions, op
types), writes each mutant as a binary model and runs zcc on it under a
timeout and a memory limit (ulimit -v). A mutant is fine when zcc exits 1
with exactly one `zcc: error:` line, or exits 0 on a model the ONNX checker
accepts (full check, with shape inference). Everything else is reported and
kept: a crash (signal), a hang, an assertion or banner, several lines, the
"importer bug" verifier message, or exit 0 on a model the checker refuses.

A tool, not a CI test:

    scripts/mutate_models.py --count 3000 --seed 1 --out /tmp/mutants

prints one line per finding and a summary of counts per outcome; each finding
is saved in --out as NNNNN-<seed>.onnx with a .txt saying which mutations made
it and what zcc printed.
"""

import argparse
import collections
import copy
import os
import pathlib
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile

import onnx
from google.protobuf import text_format

ROOT = pathlib.Path(__file__).resolve().parent.parent
INT_EXTREMES = [0, 1, -1, 2, 3, -2, 7, 1 << 31, (1 << 62), (1 << 63) - 1,
                -(1 << 63), 4000000000, -4000000000]
ATTRIBUTE_TYPES = [onnx.AttributeProto.FLOAT, onnx.AttributeProto.INT,
                   onnx.AttributeProto.STRING, onnx.AttributeProto.INTS,
                   onnx.AttributeProto.FLOATS, onnx.AttributeProto.TENSOR,
                   onnx.AttributeProto.UNDEFINED]
ELEMENT_TYPES = [1, 2, 3, 5, 6, 7, 9, 10, 11, 16, 0, 8, 12, 13, 17, 99]
OP_TYPES = ["Add", "MatMul", "Gemm", "Reshape", "Transpose", "Softmax",
            "LayerNormalization", "Gather", "Concat", "Split", "Slice",
            "Expand", "Tile", "Range", "ConstantOfShape", "Cast", "Where",
            "ReduceMean", "ReduceSum", "Squeeze", "Unsqueeze", "Identity",
            "Shape", "Pow", "Sqrt", "Erf", "Tanh", "Equal", "Trilu", "CumSum",
            "ArgMax", "Flatten", "Dropout", "Neg", "Einsum"]


def load_seeds():
    """(name, model, zcc arguments) for every fixture: the binary models take
    input_ids=2x16 (a cache export: one decode step after a past of 7); a text
    model takes the --input-shape its RUN lines give."""
    seeds = []
    for path in sorted((ROOT / "test/models").glob("*.onnx")):
        model = onnx.load(str(path), load_external_data=False)
        shapes = ["input_ids=2x16"]
        if "-kv-" in path.name:
            heads = 2 if path.name.startswith("llama") else 4
            shapes = ["input_ids=2x1", "attention_mask=2x8", "position_ids=2x1",
                      f"past_key_values.0.key=2x{heads}x7x16"]
        seeds.append((path.name, model, [a for s in shapes for a in ("--input-shape", s)]))
    for path in sorted((ROOT / "test/import").glob("*.onnxtxt")):
        text = path.read_text()
        model = onnx.ModelProto()
        try:
            text_format.Parse(text, model)
        except text_format.ParseError:
            continue  # split-file tests hold several models
        shapes = sorted(set(re.findall(r"--input-shape[= ]([^\s]+)", text)))
        arguments = []
        for shape in shapes:
            arguments += ["--input-shape", shape]
        seeds.append((path.name, model, arguments))
    return seeds + single_op_seeds()


# One-node graphs over run-time inputs: mutations of these reach the
# importer's handlers and the nn verifiers, which mutations of the big
# fixtures mostly do not (they fail earlier, in shape inference).
SINGLE_OPS = [
    ("Add", [[2, 3], [3]], {}), ("Pow", [[2, 3], [1]], {}),
    ("Equal", [[2, 3], [2, 3]], {}), ("Where", [[2, 3], [2, 3], [2, 3]], {}),
    ("Sum", [[2, 3], [3], [2, 1]], {}), ("Neg", [[2, 3]], {}),
    ("Sqrt", [[2, 3]], {}), ("Cast", [[2, 3]], {"to": 7}),
    ("MatMul", [[2, 3], [3, 4]], {}),
    ("Gemm", [[3, 2], [3, 4], [4]], {"transA": 1, "alpha": 0.5}),
    ("Transpose", [[2, 3, 4]], {"perm": [2, 0, 1]}),
    ("Softmax", [[2, 3]], {"axis": -1}), ("Concat", [[2, 3], [1, 3]], {"axis": 0}),
    ("Split", [[4, 3]], {"axis": 0}), ("Gather", [[5, 3], [2]], {"axis": 0}),
    ("ReduceMean", [[2, 3, 4]], {"axes": [1], "keepdims": 1}),
    ("ReduceSum", [[2, 3, 4]], {}), ("Flatten", [[2, 3, 4]], {"axis": 1}),
    ("LayerNormalization", [[2, 3, 4], [4], [4]], {"axis": -1, "epsilon": 1e-5}),
    ("Identity", [[2]], {}), ("Dropout", [[2, 3]], {}),
]


def single_op_seeds():
    seeds = []
    for op, shapes, attributes in SINGLE_OPS:
        inputs = []
        for index, shape in enumerate(shapes):
            element_type = onnx.TensorProto.FLOAT
            if op == "Where" and index == 0:
                element_type = onnx.TensorProto.BOOL
            if op == "Gather" and index == 1:
                element_type = onnx.TensorProto.INT64
            inputs.append(onnx.helper.make_tensor_value_info(
                "x%d" % index, element_type, shape))
        outputs = 2 if op == "Split" else 1
        node = onnx.helper.make_node(op, [i.name for i in inputs],
                                     ["y%d" % i for i in range(outputs)],
                                     name="node", **attributes)
        graph = onnx.helper.make_graph(
            [node], op.lower(), inputs,
            [onnx.helper.make_tensor_value_info("y%d" % i, 0, None)
             for i in range(outputs)])
        model = onnx.helper.make_model(
            graph, opset_imports=[onnx.helper.make_opsetid("", 17)],
            ir_version=8)
        seeds.append(("single-%s" % op, model, []))
    return seeds


def value_names(graph):
    names = [i.name for i in graph.input] + [t.name for t in graph.initializer]
    for node in graph.node:
        names.extend(o for o in node.output if o)
    return names


def random_ints(rng):
    return [rng.choice(INT_EXTREMES) for _ in range(rng.randint(0, 4))]


# Each mutation edits `model` in place and returns a short description, or
# None when it found nothing to mutate.

def flip_attribute_type(model, rng):
    nodes = [n for n in model.graph.node if n.attribute]
    if not nodes:
        return None
    node = rng.choice(nodes)
    attribute = rng.choice(node.attribute)
    new_type = rng.choice(ATTRIBUTE_TYPES)
    old = onnx.AttributeProto.AttributeType.Name(attribute.type)
    name = attribute.name
    attribute.Clear()
    attribute.name = name
    attribute.type = new_type
    if new_type == onnx.AttributeProto.FLOAT:
        attribute.f = rng.choice([0.0, 1.5, -1.0, float("nan"), 1e30])
    elif new_type == onnx.AttributeProto.INT:
        attribute.i = rng.choice(INT_EXTREMES)
    elif new_type == onnx.AttributeProto.STRING:
        attribute.s = b"1"
    elif new_type == onnx.AttributeProto.INTS:
        attribute.ints.extend(random_ints(rng))
    elif new_type == onnx.AttributeProto.FLOATS:
        attribute.floats.extend([1.0, 0.5][: rng.randint(0, 2)])
    elif new_type == onnx.AttributeProto.TENSOR:
        attribute.t.CopyFrom(onnx.helper.make_tensor("t", 7, [1], [1]))
    return "attribute %s.%s %s -> %s" % (node.op_type, name, old,
                                         onnx.AttributeProto.AttributeType.Name(new_type))


def change_attribute_value(model, rng):
    nodes = [n for n in model.graph.node if n.attribute]
    if not nodes:
        return None
    node = rng.choice(nodes)
    attribute = rng.choice(node.attribute)
    if attribute.type == onnx.AttributeProto.INT:
        attribute.i = rng.choice(INT_EXTREMES)
        return "attribute %s.%s = %d" % (node.op_type, attribute.name, attribute.i)
    if attribute.type == onnx.AttributeProto.INTS:
        del attribute.ints[:]
        attribute.ints.extend(random_ints(rng))
        return "attribute %s.%s = %s" % (node.op_type, attribute.name, list(attribute.ints))
    if attribute.type == onnx.AttributeProto.FLOAT:
        attribute.f = rng.choice([0.0, -1.0, float("inf"), float("nan"), 1e-30])
        return "attribute %s.%s = %r" % (node.op_type, attribute.name, attribute.f)
    if attribute.type == onnx.AttributeProto.TENSOR:
        tensor = attribute.t
        if tensor.dims:
            index = rng.randrange(len(tensor.dims))
            tensor.dims[index] = rng.choice(INT_EXTREMES)
        else:
            tensor.dims.append(rng.choice(INT_EXTREMES))
        return "attribute %s.%s tensor dims %s" % (node.op_type, attribute.name, list(tensor.dims))
    return None


def change_constant_contents(model, rng):
    """Changes the values of an integer Constant or initializer (shape data)."""
    tensors = [t for t in model.graph.initializer if t.data_type in (6, 7)]
    for node in model.graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.TENSOR and attribute.t.data_type in (6, 7):
                tensors.append(attribute.t)
    if not tensors:
        return None
    tensor = rng.choice(tensors)
    array = onnx.numpy_helper.to_array(tensor).copy()
    if array.size == 0:
        return None
    flat = array.reshape(-1)
    flat[rng.randrange(flat.size)] = rng.choice(
        [v for v in INT_EXTREMES if -(1 << 31) <= v < (1 << 31)]
        if tensor.data_type == 6 else INT_EXTREMES)
    new = onnx.numpy_helper.from_array(array, tensor.name)
    tensor.CopyFrom(new)
    return "tensor %s contents %s" % (tensor.name, flat.tolist()[:8])


def change_shape(model, rng):
    graph = model.graph
    choices = [("input", i) for i in graph.input if i.type.tensor_type.shape.dim]
    choices += [("initializer", t) for t in graph.initializer]
    if not choices:
        return None
    kind, target = rng.choice(choices)
    value = rng.choice(INT_EXTREMES)
    if kind == "input":
        dims = target.type.tensor_type.shape.dim
        dim = rng.choice(dims)
        dim.Clear()
        dim.dim_value = value
        return "input %s dim = %d" % (target.name, value)
    if target.dims and rng.random() < 0.8:
        target.dims[rng.randrange(len(target.dims))] = value
    else:
        target.dims.append(value)
    return "initializer %s dims %s" % (target.name, list(target.dims))


def change_element_type(model, rng):
    graph = model.graph
    new_type = rng.choice(ELEMENT_TYPES)
    if rng.random() < 0.5 and graph.input:
        target = rng.choice(graph.input)
        target.type.tensor_type.elem_type = new_type
        return "input %s elem_type = %d" % (target.name, new_type)
    if not graph.initializer:
        return None
    target = rng.choice(graph.initializer)
    target.data_type = new_type
    return "initializer %s data_type = %d" % (target.name, new_type)


def drop_node_input(model, rng):
    nodes = [n for n in model.graph.node if n.input]
    if not nodes:
        return None
    node = rng.choice(nodes)
    index = rng.randrange(len(node.input))
    if rng.random() < 0.5:
        node.input[index] = ""
    else:
        del node.input[index]
    return "node %s drops input %d" % (node.op_type, index)


def duplicate_node_input(model, rng):
    nodes = [n for n in model.graph.node if n.input]
    if not nodes:
        return None
    node = rng.choice(nodes)
    node.input.append(rng.choice(node.input))
    return "node %s gets an extra input" % node.op_type


def rewire_edge(model, rng):
    nodes = [n for n in model.graph.node if n.input]
    names = value_names(model.graph)
    if not nodes or not names:
        return None
    node = rng.choice(nodes)
    index = rng.randrange(len(node.input))
    node.input[index] = rng.choice(names)
    return "node %s input %d <- %s" % (node.op_type, index, node.input[index])


def rename_output(model, rng):
    """Makes a node redefine an existing value (a graph input or an output)."""
    nodes = list(model.graph.node)
    names = value_names(model.graph)
    if not nodes or not names:
        return None
    node = rng.choice(nodes)
    if not node.output:
        return None
    node.output[0] = rng.choice(names)
    return "node %s output 0 -> %s" % (node.op_type, node.output[0])


def change_op_type(model, rng):
    if not model.graph.node:
        return None
    node = rng.choice(model.graph.node)
    old = node.op_type
    node.op_type = rng.choice(OP_TYPES)
    return "node %s op_type -> %s" % (old, node.op_type)


def duplicate_graph_io(model, rng):
    graph = model.graph
    choice = rng.randrange(4)
    if choice == 0 and graph.input:
        graph.input.append(copy.deepcopy(rng.choice(graph.input)))
        return "graph input listed twice"
    if choice == 1 and graph.output:
        graph.output.append(copy.deepcopy(rng.choice(graph.output)))
        return "graph output listed twice"
    if choice == 2:
        del graph.output[:]
        return "no graph outputs"
    if graph.initializer:
        tensor = rng.choice(graph.initializer)
        graph.input.append(onnx.helper.make_tensor_value_info(
            tensor.name, tensor.data_type, list(tensor.dims)))
        return "initializer %s also a graph input" % tensor.name
    return None


def change_versions(model, rng):
    if rng.random() < 0.5:
        model.ir_version = rng.choice([0, 1, 3, 6, 7, 8, 9, 10, 11, 12, -1])
        return "ir_version = %d" % model.ir_version
    if rng.random() < 0.2:
        del model.opset_import[:]
        return "no opset import"
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            opset.version = rng.choice([0, 1, 10, 11, 12, 13, 14, 16, 17, 18, 21, 22, 100])
            return "opset = %d" % opset.version
    return None


def drop_node(model, rng):
    if not model.graph.node:
        return None
    index = rng.randrange(len(model.graph.node))
    op = model.graph.node[index].op_type
    del model.graph.node[index]
    return "node %d (%s) removed" % (index, op)


MUTATIONS = [flip_attribute_type, change_attribute_value, change_constant_contents,
             change_shape, change_element_type, drop_node_input,
             duplicate_node_input, rewire_edge, rename_output, change_op_type,
             duplicate_graph_io, change_versions, drop_node]


def mutate(model, rng):
    applied = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        try:
            description = rng.choice(MUTATIONS)(model, rng)
        except (ValueError, TypeError, IndexError):
            # An earlier mutation left something this one cannot read (a
            # tensor whose data no longer fits its dims): skip it.
            description = None
        if description:
            applied.append(description)
    return applied


def checker_accepts(path):
    try:
        onnx.checker.check_model(str(path), full_check=True)
        return True
    except Exception:  # the checker raises several kinds
        return False


def limit_memory(megabytes):
    def apply():
        limit = megabytes * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def run_zcc(zcc, path, arguments, workdir, timeout, memory_mb):
    command = [str(zcc), str(path), "-o", str(workdir / "out.zplan")] + arguments
    try:
        result = subprocess.run(command, capture_output=True, text=True,
                                errors="replace", timeout=timeout,
                                preexec_fn=limit_memory(memory_mb))
    except subprocess.TimeoutExpired:
        return "hang", None, ""
    output = result.stdout + result.stderr
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    if result.returncode < 0:
        return "crash (signal %d)" % -result.returncode, result.returncode, output
    if "importer bug" in output:
        return "verifier failure", result.returncode, output
    if result.returncode == 1 and len(lines) == 1 and lines[0].startswith("zcc: error: "):
        return "error", 1, output
    if result.returncode == 0:
        return "accepted", 0, output
    return "malformed diagnostic (exit %d, %d lines)" % (result.returncode, len(lines)), \
        result.returncode, output


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--zcc", default=str(ROOT / "build/bin/zcc"))
    parser.add_argument("--out", default="mutants", help="where findings are kept")
    parser.add_argument("--timeout", type=float, default=20)
    parser.add_argument("--memory-mb", type=int, default=4096)
    parser.add_argument("--no-checker", action="store_true",
                        help="do not ask the ONNX checker about accepted mutants")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    seeds = load_seeds()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    counts = collections.Counter()
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="zplan-mutants-"))
    # A private copy, so that rebuilding zcc meanwhile does not fail runs.
    zcc = workdir / "zcc"
    shutil.copy(args.zcc, zcc)
    # "Accepted a model the checker refuses" means something only for seeds
    # the checker accepts as they are (some lit models are not).
    checker_clean = {}
    for name, model, _ in seeds:
        path = workdir / "seed.onnx"
        path.write_bytes(model.SerializeToString())
        checker_clean[name] = args.no_checker or checker_accepts(path)
    # The external-data fixture resolves its .data file next to the model.
    for data in (ROOT / "test/models").glob("*.data"):
        shutil.copy(data, workdir / data.name)
    try:
        for index in range(args.count):
            name, seed_model, arguments = rng.choice(seeds)
            model = copy.deepcopy(seed_model)
            applied = mutate(model, rng)
            stem = name.rsplit(".", 1)[0]
            path = workdir / ("%s.onnx" % stem)
            try:
                path.write_bytes(model.SerializeToString())
            except Exception:  # a mutation the protobuf refuses
                counts["unserializable"] += 1
                continue
            outcome, _, output = run_zcc(zcc, path, arguments, workdir,
                                         args.timeout, args.memory_mb)
            if outcome == "accepted" and checker_clean[name] and not args.no_checker:
                if not checker_accepts(path):
                    outcome = "accepted a model the checker refuses"
            counts[outcome] += 1
            if outcome not in ("error", "accepted"):
                keep = out / ("%05d-%s.onnx" % (index, stem))
                shutil.copy(path, keep)
                keep.with_suffix(".txt").write_text(
                    "seed model: %s\nmutations: %s\noutcome: %s\n\n%s" %
                    (name, "; ".join(applied), outcome, output))
                print("%05d %-40s %s: %s" % (index, outcome, name, "; ".join(applied)),
                      flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print("\nmutants: %d" % args.count)
    for outcome, count in counts.most_common():
        print("  %6d  %s" % (count, outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main())
