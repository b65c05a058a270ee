"""Models as the current onnx package writes them, by IR version.

`onnx.helper.make_model` writes onnx.IR_VERSION (14 with onnx 1.23). Each
model here is a small MatMul + Relu written with that helper, saved in the
binary format (the text format cannot carry fields that Debian's older
onnx.proto lacks, such as a node's metadata_props), at IR versions 8, 10 and
the package's own. Each must compile with zcc and its `zrun run` output must
match onnxruntime's. A model with a FLOAT4E2M1 initializer must be refused
with an error naming the initializer and the type. Prints `ok NAME` per case.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def relu_model(ir_version, with_metadata):
    rng = np.random.default_rng(ir_version)
    weight = rng.standard_normal((8, 8)).astype(np.float32)
    matmul = helper.make_node("MatMul", ["x", "w"], ["h"], name="matmul")
    if with_metadata:
        # IR 10 added metadata_props to nodes; an older reader skips them.
        helper.set_metadata_props(matmul, {"pkg.torch.onnx.stack_trace": "x"})
    graph = helper.make_graph(
        [matmul, helper.make_node("Relu", ["h"], ["y"], name="relu")],
        "ir_%d" % ir_version,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        [numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = ir_version
    return model


def run(args, *cmd):
    return subprocess.run(list(cmd), capture_output=True, text=True)


def check_compiles(args, name, model):
    path = os.path.join(args.out, name + ".onnx")
    onnx.save(model, path)
    plan = os.path.join(args.out, name + ".zplan")
    result = run(args, args.zcc, path, "-o", plan)
    if result.returncode != 0:
        sys.exit("%s: zcc failed: %s" % (name, result.stderr.strip()))
    x = np.linspace(-2, 2, 16, dtype=np.float32).reshape(2, 8)
    np.save(os.path.join(args.out, name + "-x.npy"), x)
    out = os.path.join(args.out, name + "-y.npy")
    result = run(args, args.zrun, plan, "run", "--input",
                 "x=" + os.path.join(args.out, name + "-x.npy"),
                 "--output", "y=" + out)
    if result.returncode != 0:
        sys.exit("%s: zrun failed: %s" % (name, result.stderr.strip()))
    expected = ort.InferenceSession(
        path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    if not np.allclose(np.load(out), expected, rtol=1e-5, atol=1e-6):
        sys.exit("%s: zrun output differs from onnxruntime's" % name)
    print("ok", name, "ir", model.ir_version)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zcc", required=True)
    parser.add_argument("--zrun", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    check_compiles(args, "ir8", relu_model(8, False))
    check_compiles(args, "ir10", relu_model(10, True))
    check_compiles(args, "current", relu_model(onnx.IR_VERSION, True))

    # A 4-bit float initializer: the IR version is fine, the tensor is not.
    model = relu_model(onnx.IR_VERSION, False)
    w = model.graph.initializer[0]
    w.ClearField("raw_data")
    w.data_type = TensorProto.FLOAT4E2M1
    w.raw_data = bytes(32)
    path = os.path.join(args.out, "float4.onnx")
    onnx.save(model, path)
    result = run(args, args.zcc, path, "-o", os.path.join(args.out, "f4.zplan"))
    print("float4 exit", result.returncode, result.stderr.strip())


if __name__ == "__main__":
    main()
