"""Writes MODEL with every trainable initializer rounded to bf16.

The oracle of `zcc --param-dtype bf16` generation (test/generate/
bf16-generate.test): zplan computes in float32 from each parameter's bf16
value, so onnxruntime on this model (the same graph, each float initializer
of more than one element -- zcc's rule for a parameter -- rounded to the
nearest bf16, ties to even, and stored back as float32) is the reference.
The rounding is numpy's own, not zplan's: the float32 bits plus 0x7FFF plus
the lowest kept bit, truncated to the top 16 bits.

    round_weights.py MODEL OUT
Prints how many initializers and elements it rounded, and how many changed.
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def round_to_bf16(array):
    bits = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return rounded.view(np.float32)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: round_weights.py MODEL OUT")
    model = onnx.load_model(sys.argv[1])
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
    onnx.save_model(model, sys.argv[2])
    print(f"rounded {count} initializers, {elements} elements, {changed} changed")


if __name__ == "__main__":
    main()
