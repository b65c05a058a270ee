"""Writes MODEL (a bfloat16 ONNX export) read as float: the oracle of
test/import/bf16-export.test, written with onnx and numpy alone, not zcc.

    widen_bf16.py MODEL OUT

Every BFLOAT16 initializer and Constant/ConstantOfShape value becomes FLOAT
with the same values (a bf16's 16 bits are the top half of its float32), every
BFLOAT16 graph input, output and value_info FLOAT, and every Cast to BFLOAT16
a Cast to FLOAT: the rewrite `zcc --param-dtype bf16` documents
(compiler/import/WidenBf16.h), after which onnxruntime runs the model in
float32. Prints what it changed.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper


def widen(tensor):
    bits = np.frombuffer(tensor.raw_data, dtype=np.uint16).astype(np.uint32) << 16
    values = bits.view(np.float32).reshape(tuple(tensor.dims))
    tensor.CopyFrom(numpy_helper.from_array(values, tensor.name))


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: widen_bf16.py MODEL OUT")
    model = onnx.load(sys.argv[1])
    graph = model.graph
    initializers = casts = constants = types = 0
    for tensor in graph.initializer:
        if tensor.data_type == TensorProto.BFLOAT16:
            widen(tensor)
            initializers += 1
    for value in list(graph.input) + list(graph.output) + list(graph.value_info):
        if value.type.tensor_type.elem_type == TensorProto.BFLOAT16:
            value.type.tensor_type.elem_type = TensorProto.FLOAT
            types += 1
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.name in ("to", "dtype") and attribute.type == onnx.AttributeProto.INT \
                    and attribute.i == TensorProto.BFLOAT16:
                attribute.i = TensorProto.FLOAT
                casts += 1
            elif attribute.type == onnx.AttributeProto.TENSOR \
                    and attribute.t.data_type == TensorProto.BFLOAT16:
                widen(attribute.t)
                constants += 1
    onnx.checker.check_model(model)
    onnx.save(model, sys.argv[2])
    print(f"widened {initializers} initializers, {constants} constants, "
          f"{casts} casts to bfloat16, {types} graph types")


if __name__ == "__main__":
    main()
