"""Write a protobuf-text ONNX model as a binary .onnx file.

    onnx_text.py MODEL.onnxtxt OUT.onnx

zcc reads .onnxtxt models itself, with the ONNX 1.12 schema it is built
against; fields newer than that schema (IR 10's metadata_props, which
torch.onnx.export(dynamo=True) writes) cannot be spelt in that text. The
onnx package's schema knows them: it parses the text and writes the
binary, in which zcc sees those fields as the exporter writes them.
Prints `ok onnx_text: OUT (N initializers)`.
"""
import sys

import onnx
from google.protobuf import text_format


def main():
    source, out = sys.argv[1:3]
    model = text_format.Parse(open(source).read(), onnx.ModelProto())
    onnx.save(model, out)
    print(f"ok onnx_text: {out} ({len(model.graph.initializer)} initializers)")


if __name__ == "__main__":
    main()
