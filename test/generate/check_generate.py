#!/usr/bin/env python3
"""Numeric check of zcc --mode generate's front end before the runtime runs
it: @prefill and @decode, as zplan-cached-attention leaves them, interpreted
with numpy and compared with onnxruntime.

Reads the generation module in generic form (`zcc --mode generate --dump ir`,
then `zcc-opt --mlir-print-op-generic`). The nn ops run in the interpreter of
check_decode.py; this script adds the KV cache: `nn.cache_append` writes
new[b, :, s, :] into slot positions[b, s] of a cache kept across the
programs, `nn.cached_attention` lets query (b, s) see slots
0..positions[b, s]. Rows get prompts of different lengths (right-padded with
id 0), prefill fills the cache and selects each row's last-position logits,
then decode feeds each row's greedy token back at its own position.

The oracle is onnxruntime on the same ONNX file with full recompute (no
cache): per row, the logits of its last token for the prompt and every
generated prefix. The check: identical greedy tokens, and per-step logits
within 1e-4 of the largest logit.

Usage: check_generate.py MODEL.onnx GENERATE.mlir --steps M
"""
import argparse
import os
import re
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_decode  # noqa: E402  (the nn interpreter)


def split_functions(path):
    """{name: (arg nn.names, generic text of the function alone)}."""
    functions, current, name = {}, [], None
    for line in open(path).read().splitlines():
        if '"func.func"' in line:
            if name:
                functions[name] = current
            name = re.search(r'sym_name = "([^"]+)"', line).group(1)
            current = [line]
        elif name:
            current.append(line)
    if name:
        functions[name] = current
    result = {}
    for name, lines in functions.items():
        header = lines[0]
        arg_attrs = re.search(r"arg_attrs = \[(.*?)\]", header)
        names = re.findall(r'nn.name = "([^"]+)"', arg_attrs.group(1)) if arg_attrs else []
        handle = tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False)
        handle.write("\n".join(lines) + "\n")
        handle.close()
        result[name] = (names, handle.name)
    return result


class GenerateInterpreter:
    """Runs one function; KV caches live in `caches`, shared by programs."""

    def __init__(self, path, params, caches):
        self.args, self.ops, self.results = check_decode.parse_function(path)
        self.params = params
        self.caches = caches

    def one_op(self, result, name, operands, props, types, values):
        single = check_decode.Interpreter.__new__(check_decode.Interpreter)
        single.args = [(o, "") for o in operands]
        single.ops = [(result, name, operands, props, types)]
        single.results = [result]
        single.params = self.params
        single.max_length = 0
        single.caches = {}
        return single.run(values)[0]

    def run(self, inputs):
        env = {name: value for (name, _), value in zip(self.args, inputs)}
        for result, name, operands, props, types in self.ops:
            x = [env.get(o) for o in operands]
            if name == "nn.cache_append":
                symbol = props["cache"].strip('@"')
                shape, dtype = check_decode.parse_type(types)
                cache = self.caches.setdefault(symbol, np.zeros(shape, dtype))
                new, positions = x
                for b in range(new.shape[0]):
                    for s in range(new.shape[2]):
                        cache[b, :, positions[b, s], :] = new[b, :, s, :]
                out = cache.copy()
            elif name == "nn.cached_attention":
                q, k, v, positions = x
                scale = check_decode.attr_float(props["scale"])
                scores = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
                slots = np.arange(k.shape[2])
                visible = slots[None, None, :] <= positions[:, :, None]
                scores = np.where(visible[:, None, :, :], scores, -np.inf)
                out = np.matmul(check_decode.softmax(scores, -1), v).astype(np.float32)
            elif name == "nn.attention":
                raise SystemExit("check_generate.py: an nn.attention is left; "
                                 "zplan-cached-attention should have replaced it")
            else:
                out = self.one_op(result, name, operands, props, types, x)
            env[result] = out
        return [env[r] for r in self.results]


def bind(names, values):
    missing = [n for n in names if n not in values]
    if missing:
        raise SystemExit(f"check_generate.py: no value for inputs {missing}")
    return [values[n] for n in names]


def reference_logits(session, model, ids):
    """onnxruntime on one row's tokens, full recompute: [len, V]."""
    feeds = {"input_ids": ids[None, :]}
    for graph_input in model.graph.input:
        name = graph_input.name
        if name == "attention_mask":
            feeds[name] = np.ones((1, len(ids)), np.int64)
        elif name == "position_ids":
            feeds[name] = np.arange(len(ids), dtype=np.int64)[None, :]
        elif name.startswith("past_key_values."):
            dims = graph_input.type.tensor_type.shape.dim
            feeds[name] = np.zeros((1, dims[1].dim_value, 0, dims[3].dim_value), np.float32)
    return session.run(["logits"], feeds)[0][0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("generate_mlir")
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()

    model = onnx.load(args.model)
    params = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    functions = split_functions(args.generate_mlir)
    caches = {}
    prefill_names, prefill_path = functions["prefill"]
    decode_names, decode_path = functions["decode"]
    prefill = GenerateInterpreter(prefill_path, params, caches)
    decode = GenerateInterpreter(decode_path, params, caches)
    (batch, prompt), _ = check_decode.parse_type(prefill.args[0][1])
    length = check_decode.parse_type(
        next(t for r, n, o, p, t in decode.ops if n == "nn.cache_append"))[0][2]
    if prompt + args.steps > length:
        raise SystemExit("check_generate.py: --steps too many for the cache")

    vocab = check_decode.parse_type(prefill.results and
                                    [t for r, n, o, p, t in prefill.ops
                                     if r == prefill.results[0]][0])[0][1]
    rng = np.random.default_rng(1)
    lengths = np.array([max(1, prompt - 3 * b) for b in range(batch)], np.int64)
    ids = np.zeros((batch, prompt), np.int64)
    for b in range(batch):
        ids[b, :lengths[b]] = rng.integers(1, vocab, size=lengths[b])

    session = onnxruntime.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    rows = [list(ids[b, :lengths[b]]) for b in range(batch)]
    worst = 0.0
    tokens = None
    for step in range(args.steps):
        if step == 0:
            values = {"input_ids": ids,
                      "positions": np.tile(np.arange(prompt, dtype=np.int64), (batch, 1)),
                      "last_index": lengths - 1}
            (logits,) = prefill.run(bind(prefill_names, values))
        else:
            values = {"input_ids": tokens[:, None],
                      "positions": (lengths + step - 1)[:, None]}
            (logits,) = decode.run(bind(decode_names, values))
        tokens = logits.argmax(axis=-1).astype(np.int64)
        for b in range(batch):
            expected = reference_logits(session, model, np.array(rows[b], np.int64))[-1]
            error = np.abs(logits[b] - expected).max() / np.abs(expected).max()
            worst = max(worst, error)
            if error > 1e-4 or tokens[b] != expected.argmax():
                raise SystemExit(f"check_generate.py: step {step}, row {b} (prompt length "
                                 f"{lengths[b]}): logits differ by {error:.2e}, token "
                                 f"{tokens[b]} vs onnxruntime's {expected.argmax()}")
            rows[b].append(int(tokens[b]))
    name = os.path.basename(args.model)
    print(f"ok {name} B={batch} prompt lengths {[int(n) for n in lengths]} steps {args.steps}: "
          f"greedy tokens identical to onnxruntime, worst logit error {worst:.2e}")


if __name__ == "__main__":
    main()
