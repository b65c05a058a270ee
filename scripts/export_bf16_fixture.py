#!/usr/bin/env python3
"""Write test/models/llama-opset17-bf16export.onnx: the llama-opset17 fixture
exported in bfloat16, as a user exports a model trained or loaded in bf16.

The model is export_fixtures.py's Llama with test/models/llama-opset17.onnx's
weights (export_fixtures.model_from_onnx), converted with
`model.to(torch.bfloat16)` (weights and floating buffers, such as the rotary
inv_freq, rounded to bf16) and exported by the TorchScript exporter
(torch.onnx.export, dynamo=False, opset 17) exactly as export_fixtures.py
exports the float32 fixtures: every initializer is BFLOAT16 and the graph
computes in bf16 (Casts to bfloat16 after each float32 island). It is the
input of test/import/bf16-export.test (zcc --param-dtype bf16 makes f32
master weights from it).

    bench/.venv-peers/bin/python scripts/export_bf16_fixture.py [--out PATH]

Last run with: torch 2.5.1 (CPU), transformers 4.46.3, onnx 1.17. Checks:
onnx.checker passes, every initializer is BFLOAT16 and holds the fixture's
float32 weight rounded to nearest even (numpy's rounding), and the bytes
written are the same on every run (the exporter is deterministic).
"""

import argparse
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_ROOT, "scripts"))
sys.dont_write_bytecode = True

import export_fixtures as ef  # noqa: E402  (sets HF offline before transformers)
sys.path.insert(0, os.path.join(REPO_ROOT, "test", "generate"))
from round_weights import round_to_bf16  # noqa: E402  (numpy's rounding)

SOURCE = os.path.join(REPO_ROOT, "test", "models", "llama-opset17.onnx")
DEFAULT_OUT = os.path.join(REPO_ROOT, "test", "models", "llama-opset17-bf16export.onnx")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    wrapper, _ = ef.model_from_onnx("llama", SOURCE, torch.bfloat16)
    data = ef.export_bytes(wrapper, 17)
    model = onnx.load_from_string(data)
    onnx.checker.check_model(model)
    source = {t.name: numpy_helper.to_array(t) for t in onnx.load(SOURCE).graph.initializer}
    for tensor in model.graph.initializer:
        if tensor.data_type != onnx.TensorProto.BFLOAT16:
            sys.exit(f"{tensor.name}: not bfloat16")
        if tensor.name not in source:
            sys.exit(f"{tensor.name}: no such initializer in {SOURCE}")
        bits = np.frombuffer(tensor.raw_data, dtype=np.uint16)
        rounded = round_to_bf16(source[tensor.name]).view(np.uint32) >> 16
        if not np.array_equal(bits, rounded.reshape(-1).astype(np.uint16)):
            sys.exit(f"{tensor.name}: not the fixture's weight rounded to bf16")
    if ef.export_bytes(wrapper, 17) != data:
        sys.exit("the export is not deterministic")
    with open(args.out + ".tmp", "wb") as out:
        out.write(data)
    os.replace(args.out + ".tmp", args.out)
    print(f"wrote {args.out}: {len(model.graph.initializer)} bfloat16 initializers, "
          f"{len(data)} bytes")


if __name__ == "__main__":
    main()
