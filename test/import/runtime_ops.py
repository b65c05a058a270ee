"""Run-time parity of the ops the importer lowers to other nn ops.

LessOrEqual and GreaterOrEqual (where(strict, true, equal)), Not, And, Or,
Xor (selects), ScatterND and GatherND with constant indices (gathers and a
select), IsNaN (x != x) and Gelu (opset 20, nn.gelu) have no kernel of their
own: each small model below is compiled with zcc, run with `zrun run` on one
rank, and its outputs must EQUAL onnxruntime's on the same inputs (these ops
move or compare values, they compute nothing to round), except Gelu's, which
must agree to TOLERANCE (relative to the largest output). Inputs include NaN, equal elements and
broadcasting. Prints one `ok NAME` line per model; exits 1 at the first
mismatch, naming the model and output.
"""
import argparse
import os
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
         np.dtype(np.bool_): TensorProto.BOOL}


# Models whose outputs are computed, not moved: max |diff| / max |expected|.
TOLERANCE = {"gelu": 1e-6}


def model(name, nodes, inputs, outputs, constants=(), opset=17):
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, TYPES[v.dtype], v.shape) for n, v in inputs.items()],
        [helper.make_tensor_value_info(n, TYPES[np.dtype(t)], None) for n, t in outputs])
    for cname, value in constants:
        graph.node.insert(0, helper.make_node("Constant", [], [cname],
                                              value=numpy_helper.from_array(value, cname)))
    result = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    result.ir_version = 8
    return result


def cases():
    rng = np.random.default_rng(9)
    a = np.array([[1, 5, -2], [7, 3, 3]], dtype=np.int64)
    b = np.array([3, 5, -4], dtype=np.int64)
    x = np.array([[0.5, np.nan, -1.0], [2.0, 2.0, np.inf]], dtype=np.float32)
    y = np.array([[2.0], [np.nan]], dtype=np.float32)
    yield model("compare_int", [
        helper.make_node("LessOrEqual", ["a", "b"], ["le"]),
        helper.make_node("GreaterOrEqual", ["a", "b"], ["ge"])],
        {"a": a, "b": b}, [("le", bool), ("ge", bool)]), {"a": a, "b": b}
    yield model("compare_float_nan", [
        helper.make_node("LessOrEqual", ["x", "y"], ["le"]),
        helper.make_node("GreaterOrEqual", ["y", "x"], ["ge"])],
        {"x": x, "y": y}, [("le", bool), ("ge", bool)]), {"x": x, "y": y}
    p = np.array([[True, False, True], [False, False, True]])
    q = np.array([True, False, False])
    yield model("logical", [
        helper.make_node("Not", ["p"], ["not"]),
        helper.make_node("And", ["p", "q"], ["and"]),
        helper.make_node("Or", ["q", "p"], ["or"]),
        helper.make_node("Xor", ["p", "q"], ["xor"])],
        {"p": p, "q": q}, [("not", bool), ("and", bool), ("or", bool), ("xor", bool)]), {"p": p, "q": q}

    data = rng.normal(size=(2, 3, 4)).astype(np.float32)
    rows = rng.normal(size=(2, 4)).astype(np.float32)
    # Rows (0, 2) and (1, -3) replaced; the rest of data stays.
    yield model("scatter_rows", [helper.make_node("ScatterND", ["data", "idx", "rows"], ["out"])],
                {"data": data, "rows": rows}, [("out", np.float32)],
                [("idx", np.array([[0, 2], [1, -3]], dtype=np.int64))]), \
        {"data": data, "rows": rows}
    elements = rng.normal(size=(3,)).astype(np.float32)
    yield model("scatter_elements", [helper.make_node("ScatterND", ["data", "idx", "e"], ["out"])],
                {"data": data, "e": elements}, [("out", np.float32)],
                [("idx", np.array([[1, 0, 3], [0, 2, 0], [1, 1, 1]], dtype=np.int64))]), \
        {"data": data, "e": elements}
    # Every element written (a permutation): the gather alone.
    whole = rng.normal(size=(2, 3, 4)).astype(np.float32)
    yield model("scatter_all", [helper.make_node("ScatterND", ["data", "idx", "w"], ["out"])],
                {"data": data, "w": whole}, [("out", np.float32)],
                [("idx", np.array([[1], [0]], dtype=np.int64))]), {"data": data, "w": whole}
    # Transformers' Llama padding mask: the causal mask's slice [:, :, :, :T]
    # rewritten with masked_fill(attention_mask == 0) through ScatterND, on
    # integer data; the mask comes from a run-time input.
    mask = np.array([[1, 1, 0, 1], [0, 1, 1, 1]], dtype=np.int64)
    causal = np.triu(np.full((3, 4), -100, dtype=np.int64), 2)[None, None].repeat(2, 0)
    index = np.stack(np.meshgrid(np.arange(2), np.arange(1), np.arange(3), np.arange(4),
                                 indexing="ij"), axis=-1).astype(np.int64)
    yield model("llama_padding_mask", [
        helper.make_node("Unsqueeze", ["mask", "axes"], ["m4"]),
        helper.make_node("Equal", ["m4", "zero"], ["padding"]),
        helper.make_node("Where", ["padding", "low", "causal"], ["filled"]),
        helper.make_node("ScatterND", ["causal", "idx", "filled"], ["out"])],
        {"mask": mask}, [("out", np.int64)],
        [("axes", np.array([1, 2], dtype=np.int64)), ("zero", np.array(0, dtype=np.int64)),
         ("low", np.array(-100, dtype=np.int64)), ("causal", causal), ("idx", index)]), \
        {"mask": mask}

    # torch's SDPA export: probabilities of a row that sees no key are NaN,
    # and Where(IsNaN(p), 0, p) turns them into zeros.
    yield model("isnan_guard", [
        helper.make_node("IsNaN", ["x"], ["nan"]),
        helper.make_node("Where", ["nan", "zero", "x"], ["out"])],
        {"x": x}, [("nan", bool), ("out", np.float32)],
        [("zero", np.array(0.0, dtype=np.float32))]), {"x": x}
    # GatherND with constant indices: rows of data [2, 3, 4] by (i, j)
    # pairs, negative ones included; and with batch_dims 1, one index per
    # batch row (torch's exporter writes such a GatherND for causal masks).
    yield model("gathernd_rows", [
        helper.make_node("GatherND", ["data", "idx"], ["pairs"]),
        helper.make_node("GatherND", ["data", "bidx"], ["batched"], batch_dims=1)],
        {"data": data}, [("pairs", np.float32), ("batched", np.float32)],
        [("idx", np.array([[[0, 2], [1, -3]], [[1, 1], [0, 0]]], dtype=np.int64)),
         ("bidx", np.array([[2], [-1]], dtype=np.int64))]), {"data": data}
    g = np.linspace(-6, 6, 25, dtype=np.float32).reshape(5, 5)
    yield model("gelu", [
        helper.make_node("Gelu", ["g"], ["exact"]),
        helper.make_node("Gelu", ["g"], ["tanh"], approximate="tanh")],
        {"g": g}, [("exact", np.float32), ("tanh", np.float32)], opset=20), {"g": g}


def mpirun(world):
    command = ["mpirun", "-np", str(world), "--oversubscribe"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    return command


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--zcc", required=True)
    parser.add_argument("--zrun", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    for onnx_model, feed in cases():
        name = onnx_model.graph.name
        path = out / f"{name}.onnx"
        onnx.save_model(onnx_model, path)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        names = [o.name for o in onnx_model.graph.output]
        expected = session.run(names, feed)
        plan = out / f"{name}.zplan"
        compiled = subprocess.run([args.zcc, str(path), "-o", str(plan)],
                                  capture_output=True, text=True)
        if compiled.returncode != 0:
            print(f"FAIL {name}: zcc: {compiled.stderr.strip()}")
            return 1
        command = mpirun(1) + [args.zrun, str(plan), "run"]
        for key, value in feed.items():
            np.save(out / f"{name}-{key}.npy", value)
            command += ["--input", f"{key}={out / f'{name}-{key}.npy'}"]
        for key in names:
            command += ["--output", f"{key}={out / f'{name}-out-{key}.npy'}"]
        ran = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        if ran.returncode != 0:
            print(f"FAIL {name}: zrun: {ran.stderr.strip()}")
            return 1
        for key, want in zip(names, expected):
            got = np.load(out / f"{name}-out-{key}.npy")
            tolerance = TOLERANCE.get(name)
            if tolerance is not None and got.shape == want.shape:
                same = np.abs(got - want).max() <= tolerance * np.abs(want).max()
            else:
                same = np.array_equal(got, want, equal_nan=want.dtype.kind == "f")
            if got.dtype != want.dtype or got.shape != want.shape or not same:
                print(f"FAIL {name}: output {key}: zrun {got.dtype}{list(got.shape)} {got.tolist()}, "
                      f"onnxruntime {want.dtype}{list(want.shape)} {want.tolist()}")
                return 1
        print(f"ok {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
