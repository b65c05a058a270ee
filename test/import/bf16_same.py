"""bf16_same.py ORIGINAL EXPORTED: the exported model has the original's
graph and initializers (all of them, BFLOAT16 ones included) bit for bit."""
import sys

import onnx


def main():
    original, exported = onnx.load(sys.argv[1]), onnx.load(sys.argv[2])
    a = {t.name: t for t in original.graph.initializer}
    b = {t.name: t for t in exported.graph.initializer}
    if list(a) != list(b):
        sys.exit(f"FAIL initializer names differ: {list(a)} vs {list(b)}")
    for name, tensor in a.items():
        other = b[name]
        if other.data_type != tensor.data_type or list(other.dims) != list(tensor.dims) \
                or other.raw_data != tensor.raw_data:
            sys.exit(f"FAIL {name}: type, shape or bytes differ")
    if original.graph.node != exported.graph.node:
        sys.exit("FAIL the graph's nodes differ")
    bf16 = sum(t.data_type == onnx.TensorProto.BFLOAT16 for t in a.values())
    print(f"ok {bf16} bfloat16 initializers bit for bit, graph unchanged")


if __name__ == "__main__":
    main()
