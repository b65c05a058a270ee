"""Write a fixture with its tied weight stored twice, as torch exports do.

    split_tie.py MODEL.onnx OUT.onnx [--name onnx::MatMul_592]

torch.onnx.export's constant folding turns a tied LM head, `Transpose(W)`
feeding `MatMul`, into a second initializer holding W^T (named like
`onnx::MatMul_592`), so the file holds W twice. The bundled GPT-2 and OPT
fixtures keep the Transpose node (one initializer); this makes the other
form from them: the Transpose of the embedding table (the initializer a
Gather reads) is dropped and its consumers
read a new initializer, appended after the others, with W^T's bytes.
Prints `ok split: COPY = W^T of NAME [R, C]`.
"""
import argparse
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("out")
    parser.add_argument("--name", default="onnx::MatMul_592")
    args = parser.parse_args()
    model = onnx.load(args.model)
    graph = model.graph
    weights = {t.name: t for t in graph.initializer}
    # The tied weight: the embedding table (a Gather reads it) that a
    # Transpose also reads (the LM head).
    gathered = {n.input[0] for n in graph.node if n.op_type == "Gather"}
    transposes = [n for n in graph.node if n.op_type == "Transpose"
                  and n.input[0] in weights and n.input[0] in gathered
                  and len(weights[n.input[0]].dims) == 2]
    if len(transposes) != 1:
        print(f"FAIL expected one Transpose of an embedding table, found {len(transposes)}")
        return 1
    node = transposes[0]
    source = node.input[0]
    value = numpy_helper.to_array(weights[source])
    copy = numpy_helper.from_array(np.ascontiguousarray(value.T), args.name)
    graph.initializer.append(copy)
    for other in graph.node:
        for i, name in enumerate(other.input):
            if name == node.output[0]:
                other.input[i] = args.name
    graph.node.remove(node)
    onnx.checker.check_model(model)
    onnx.save(model, args.out)
    print(f"ok split: {args.name} = W^T of {source} {list(value.shape)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
