#!/usr/bin/env python3
"""Numeric check of zplan-decode-positions on a fixture, before the runtime
knows generation.

Reads two MLIR files in generic form (zcc-opt --mlir-print-op-generic): the
full-length import of a plain causal LM (@forward or @decode at input_ids
[B, L]) and the same after zplan-decode-positions (@decode at [B, 1] plus
`positions`). A small numpy interpreter of the nn ops runs both. Each
attention of the decode function reads a per-layer KV cache, as
zplan-cached-attention will make it do: the new token's key and value go to
slot positions[b], and the query sees slots 0..positions[b]. The check:

  1. the full forward matches onnxruntime on the ONNX model (so the
     interpreter is right);
  2. decoding token by token, with a different position schedule per row
     (row b starts b * 3 steps late, re-feeding its first token meanwhile),
     gives at every step row b's logits equal to the full forward's logits
     at that row's position, within 1e-4 of the largest logit.

Usage: check_decode.py MODEL.onnx FULL.mlir DECODE.mlir
"""
import re
import sys

import numpy as np
import onnx
import onnxruntime
from onnx import numpy_helper

DTYPES = {"f32": np.float32, "f16": np.float16, "i64": np.int64,
          "i32": np.int32, "i1": np.bool_, "i8": np.int8}


def parse_type(text):
    m = re.fullmatch(r"tensor<((?:\d+x)*)(\w+)>", text.strip())
    dims = [int(d) for d in m.group(1).split("x") if d]
    return dims, DTYPES[m.group(2)]


def parse_dense(text, type_text):
    shape, dtype = parse_type(type_text)
    body = text.strip()
    if body.startswith('"0x'):
        raw = bytes.fromhex(body[3:-1])
        if dtype == np.bool_:
            count = int(np.prod(shape))
            bits = np.unpackbits(np.frombuffer(raw, np.uint8), bitorder="little")
            if len(raw) == 1:  # a splat
                return np.full(shape, bool(raw[0]))
            return bits[:count].astype(np.bool_).reshape(shape)
        values = np.frombuffer(raw, dtype)
        if values.size == 1:
            return np.full(shape, values[0], dtype)
        return values.reshape(shape).copy()
    body = body.replace("true", "1").replace("false", "0")
    values = np.array(eval(body), dtype=np.float64 if dtype != np.int64 else np.int64)
    return np.broadcast_to(values.astype(dtype), shape).copy()


OP = re.compile(r'^\s*(?:(%[\w#:]+) = )?"([\w.]+)"\((.*?)\)\s*(.*)$')


def split_top(text, sep=","):
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch in "<[({":
            depth += 1
        elif ch in ">])}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current)
    return [p.strip() for p in parts]


def parse_attrs(text):
    attrs = {}
    for part in split_top(text):
        if "=" not in part:
            continue
        key, value = part.split("=", 1)
        attrs[key.strip()] = value.strip()
    return attrs


def parse_function(path):
    lines = open(path).read().splitlines()
    ops, args, results = [], [], []
    in_func = False
    for line in lines:
        if '"func.func"' in line:
            in_func = True
            continue
        if not in_func:
            continue
        if line.strip().startswith("^bb0("):
            for arg in split_top(line.strip()[5:-2]):
                name, type_text = arg.split(":", 1)
                args.append((name.strip(), type_text.strip()))
            continue
        m = OP.match(line)
        if not m:
            if line.strip().startswith("}) {"):
                in_func = False
            continue
        result, name, operands, rest = m.groups()
        operands = [o.strip() for o in operands.split(",") if o.strip()]
        props = {}
        pm = re.match(r"<\{(.*)\}>", rest)
        if pm:
            depth = 0
            for i, ch in enumerate(rest):
                depth += ch in "<{[("
                depth -= ch in ">}])"
                if depth == 0:
                    props = parse_attrs(rest[2:i - 1])
                    rest = rest[i + 1:]
                    break
        am = re.match(r"\s*\{(.*)\}\s*:", rest)
        if am:
            props.update(parse_attrs(am.group(1)))
        types = rest.rsplit("->", 1)[-1].strip()
        if name == "func.return":
            results = operands
            continue
        ops.append((result, name, operands, props, types))
    return args, ops, results


def int_list(text):
    return [int(x) for x in re.findall(r"-?\d+", text.split(":", 1)[-1])] \
        if text.startswith("array") else [int(x) for x in re.findall(r"-?\d+", text)]


def attr_int(text):
    return int(text.split(":")[0])


def attr_float(text):
    return float(text.split(":")[0])


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


class Interpreter:
    def __init__(self, path, params, max_length):
        self.args, self.ops, self.results = parse_function(path)
        self.params = params
        self.max_length = max_length
        self.caches = {}

    def run(self, inputs):
        env = {}
        for (name, _), value in zip(self.args, inputs):
            env[name] = value
        attention_index = 0
        for result, name, operands, props, types in self.ops:
            x = [env.get(o) for o in operands]
            op = name.split(".", 1)[1]
            if name == "nn.constant":
                value = props["value"]
                dm = re.match(r"dense<(.*)>\s*:\s*(tensor<.*>)$", value)
                out = parse_dense(dm.group(1), dm.group(2))
            elif name == "zero.shard":
                out = self.params[props["param"].strip("@\"")]
            elif name in ("zero.gather_start", "zero.gather_wait"):
                out = x[0]
            elif name == "zero.release":
                continue
            elif op in ("add", "sub", "mul", "div", "max", "min", "pow"):
                f = {"add": np.add, "sub": np.subtract, "mul": np.multiply,
                     "div": np.divide, "max": np.maximum, "min": np.minimum,
                     "pow": np.power}[op]
                out = f(x[0], x[1])
                if out.dtype == np.float64:
                    out = out.astype(np.float32)
            elif op in ("equal", "less", "greater"):
                out = {"equal": np.equal, "less": np.less,
                       "greater": np.greater}[op](x[0], x[1])
            elif op == "where":
                out = np.where(x[0], x[1], x[2])
            elif op in ("neg", "sqrt", "exp", "tanh", "reciprocal", "relu",
                        "sigmoid", "silu", "erf", "cos", "sin", "abs", "log"):
                v = x[0]
                out = {"neg": lambda: -v, "sqrt": lambda: np.sqrt(v),
                       "exp": lambda: np.exp(v), "tanh": lambda: np.tanh(v),
                       "reciprocal": lambda: 1 / v,
                       "relu": lambda: np.maximum(v, 0),
                       "sigmoid": lambda: 1 / (1 + np.exp(-v)),
                       "silu": lambda: v / (1 + np.exp(-v)),
                       "cos": lambda: np.cos(v), "sin": lambda: np.sin(v),
                       "abs": lambda: np.abs(v), "log": lambda: np.log(v),
                       }[op]().astype(v.dtype)
            elif op == "gelu":
                v = x[0].astype(np.float64)
                if "tanh" in props.get("approximate", ""):
                    out = 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))
                else:
                    from math import erf
                    out = 0.5 * v * (1 + np.vectorize(erf)(v / np.sqrt(2)))
                out = out.astype(np.float32)
            elif op == "cast":
                out = x[0].astype(parse_type(types)[1])
            elif op in ("reshape", "expand"):
                shape, _ = parse_type(types)
                out = (x[0].reshape(shape) if op == "reshape"
                       else np.broadcast_to(x[0], shape).copy())
            elif op == "transpose":
                out = np.transpose(x[0], int_list(props["perm"]))
            elif op == "slice":
                shape, _ = parse_type(types)
                starts, steps = int_list(props["starts"]), int_list(props["steps"])
                index = tuple(np.arange(n) * st + s0 for s0, st, n in zip(starts, steps, shape))
                out = x[0][np.ix_(*index)]
            elif op == "concat":
                out = np.concatenate(x, axis=attr_int(props["axis"]))
            elif op == "gather":
                out = np.take(x[0], x[1], axis=attr_int(props["axis"]))
            elif op == "embedding":
                out = x[0][x[1]]
            elif op in ("reduce_mean", "reduce_sum", "reduce_max"):
                f = {"reduce_mean": np.mean, "reduce_sum": np.sum,
                     "reduce_max": np.max}[op]
                out = f(x[0], axis=tuple(int_list(props["axes"])),
                        keepdims="true" in props["keepdims"]).astype(x[0].dtype)
            elif op == "softmax":
                out = softmax(x[0], attr_int(props["axis"]))
            elif op == "layer_norm":
                axis = attr_int(props["axis"])
                eps = attr_float(props["epsilon"])
                v = x[0]
                axes = tuple(range(axis, v.ndim))
                mean = v.mean(axis=axes, keepdims=True)
                var = ((v - mean) ** 2).mean(axis=axes, keepdims=True)
                out = (v - mean) / np.sqrt(var + eps)
                segments = int_list(props["operandSegmentSizes"])
                rest = x[1:]
                if segments[1]:
                    out = out * rest.pop(0)
                if segments[2]:
                    out = out + rest.pop(0)
                out = out.astype(np.float32)
            elif op == "rms_norm":
                eps = attr_float(props["epsilon"])
                v = x[0]
                out = v / np.sqrt((v * v).mean(axis=-1, keepdims=True) + eps)
                if len(x) > 1:
                    out = out * x[1]
                out = out.astype(np.float32)
            elif op == "matmul":
                rhs = x[1]
                if "true" in props.get("transpose_rhs", "false"):
                    rhs = np.swapaxes(rhs, -1, -2)
                out = np.matmul(x[0], rhs)
                if len(x) > 2:
                    out = out + x[2]
            elif op == "attention":
                q, k, v = x[0], x[1], x[2]
                scale = attr_float(props["scale"])
                if len(x) > 3:
                    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
                    mask = x[3]
                    if "select" in props.get("mask_kind", ""):
                        scores = np.where(mask, scores, attr_float(props["masked_value"]))
                    else:
                        scores = scores + mask
                    out = np.matmul(softmax(scores, -1), v)
                else:
                    out = self.cached_attention(attention_index, q, k, v,
                                                inputs[-1], scale)
                attention_index += 1
                out = out.astype(np.float32)
            else:
                raise SystemExit(f"check_decode.py: no rule for {name}")
            env[result] = out
        return [env[r] for r in self.results]

    def cached_attention(self, index, q, k, v, positions, scale):
        """What zplan-cached-attention makes of a one-position attention."""
        batch = q.shape[0]
        if index not in self.caches:
            shape = list(k.shape)
            shape[-2] = self.max_length
            self.caches[index] = (np.zeros(shape, np.float32),
                                  np.zeros(shape[:-1] + [v.shape[-1]], np.float32))
        keys, values = self.caches[index]
        out = np.zeros(q.shape[:-1] + (v.shape[-1],), np.float32)
        for b in range(batch):
            p = int(positions[b, 0])
            keys[b, ..., p, :] = k[b, ..., 0, :]
            values[b, ..., p, :] = v[b, ..., 0, :]
            scores = np.matmul(q[b], np.swapaxes(keys[b, ..., :p + 1, :], -1, -2)) * scale
            out[b] = np.matmul(softmax(scores, -1), values[b, ..., :p + 1, :])
        return out


def main():
    model_path, full_path, decode_path = sys.argv[1:4]
    model = onnx.load(model_path)
    params = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    full = Interpreter(full_path, params, 0)
    (batch, length), _ = parse_type(full.args[0][1])
    rng = np.random.default_rng(0)
    vocab = params[next(n for n in params if "emb" in n or "wte" in n)].shape[0]
    ids = rng.integers(0, vocab, size=(batch, length)).astype(np.int64)

    (logits,) = full.run([ids])
    session = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    (reference,) = session.run(["logits"], {"input_ids": ids})
    scale = np.abs(reference).max()
    error = np.abs(logits - reference).max() / scale
    print(f"full forward vs onnxruntime: {error:.2e}")
    if error > 1e-4:
        raise SystemExit("check_decode.py: the interpreter disagrees with onnxruntime")

    decode = Interpreter(decode_path, params, length)
    lag = 3
    worst = 0.0
    for step in range(length + lag * (batch - 1)):
        positions = np.array([[min(max(step - lag * b, 0), length - 1)]
                              for b in range(batch)], np.int64)
        tokens = np.take_along_axis(ids, positions, axis=1)
        (step_logits,) = decode.run([tokens, positions])
        for b in range(batch):
            p = positions[b, 0]
            error = np.abs(step_logits[b, 0] - logits[b, p]).max() / scale
            worst = max(worst, error)
            if error > 1e-4:
                raise SystemExit(f"check_decode.py: step {step}, row {b}, position {p}: "
                                 f"decode logits differ from the full forward by {error:.2e}")
    print(f"decode vs full forward, {length + lag * (batch - 1)} steps, positions per row: "
          f"worst {worst:.2e}")


if __name__ == "__main__":
    main()
