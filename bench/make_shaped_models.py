#!/usr/bin/env python3
"""Build "shapes only" ONNX causal LMs for the schedule benchmark.

Each graph is written with onnx.helper directly (no torch), opset 17, with one
input `input_ids` int64 [batch, sequence] (both dimensions dynamic) and one
output `logits` [batch, sequence, vocab]. Every weight is ONNX external data
pointing into ONE sparse file per model, created with os.truncate: zcc checks
that each tensor's range lies inside that file but never reads parameter data,
so Llama-2-70B costs a few KiB of disk (`du`), not 138 GB.

Models (the op chains mirror what torch.onnx.export produces for the
Hugging Face modules, in the forms zcc's patterns recognise):

  llama2-70b  80 layers, hidden 8192, 64 heads, 8 kv heads (grouped-query
              attention, head dim 128), intermediate 28672, vocab 32000,
              untied lm_head; float16 weights and activations (Llama-2-70B
              ships in 16-bit).
              RMSNorm: Pow(x, 2), ReduceMean, Add eps, Sqrt, Div(1, .), Mul x,
              Mul weight (kept in float16: the exporter's Casts to float32 and
              back are left out).
              Attention: q/k/v = MatMul(x, Transpose(W[out, in])); Reshape to
              heads, Transpose; k and v repeated for GQA with Unsqueeze,
              Expand, Reshape (Hugging Face's repeat_kv); MatMul(q, Transpose
              (k)), Div by sqrt(128), Add a causal mask, Softmax, MatMul v,
              Transpose, Reshape, o_proj, residual Add.
              The mask is built in the graph from Shape(input_ids):
              ConstantOfShape([S, S], -65504) then Trilu(upper, k=1) and
              Unsqueeze to [1, 1, S, S]; zcc folds it once S is bound.
              Rotary position embeddings are omitted: they add no parameters
              and cost a few elementwise ops per layer, so the schedule does
              not change in any way that matters here.
              SwiGLU MLP: down(silu(gate(x)) * up(x)) with silu as
              Mul(g, Sigmoid(g)).
  gpt2-small  12 layers, hidden 768, 12 heads, vocab 50257, 1024 positions,
              float32. LayerNormalization (the opset-17 op), GPT-2's Conv1D
              as MatMul(x, W[in, out]) + bias, GELU in its tanh form
              0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * Pow(x, 3)))),
              attention with GPT-2's boolean mask: Where(tril, scores, -3.4e38)
              with tril = Trilu(ConstantOfShape([S, S], true), upper=0).
              The token embedding wte is tied: the embedding Gather and the LM
              head MatMul(x, Transpose(wte)) read the same initializer.

Built only when named (--only, or ensure_models from a bench), with sparse
weights like the two above, for bench/train_schedule_bench.py:
  llama2-7b      the llama2-70b graph at Llama-2-7B's shapes: 32 layers, hidden
              4096, 32 heads, 32 kv heads, intermediate 11008, vocab 32000.
  llama2-70b-8l  the llama2-70b graph at 8 layers (the per-layer shapes of 70B).
  llama2-7b-f32, llama2-70b-f32, llama2-70b-8l-f32
              llama2-7b, llama2-70b and llama2-70b-8l in float32 (weights,
              activations, the mask's fill value float32's minimum), for
              bench/mixed_precision_bench.py: zcc --param-dtype bf16 needs
              float32 parameters (its master shards). The float16 models are
              unchanged.

One more model has REAL weights, for bench/zrun_bench.py, which runs it:

  llama-medium  the llama2-70b graph above at 8 layers, hidden 1024, 16
              heads, 4 kv heads, intermediate 2816, vocab 32000, float32
              (155,730,944 parameters, 623 MB). Every parameter is drawn
              from numpy's default_rng with a fixed seed (RandomValues) and
              written in full. It is built only when named (--only, or
              ensure_models from the bench), never by default.

Files go to a cache directory (default: build/bench-models under the
repository; `build/` is not committed), one sub-directory per model:
MODEL/MODEL.onnx plus MODEL/MODEL.weights (the sparse file) and
MODEL/manifest.json. A model is rebuilt when any of them is missing or when
this script has changed since it was written (the manifest records the
script's SHA-256).

    python3 bench/make_shaped_models.py                  # both shaped models
    python3 bench/make_shaped_models.py --only llama-medium   # 623 MB written
    python3 bench/make_shaped_models.py --only gpt2-small --cache-dir /tmp/m
"""

import argparse
import hashlib
import json
import math
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CACHE_DIR = os.path.join(REPO_ROOT, "build", "bench-models")
OPSET = 17
# Offsets of tensors in the weights file are aligned like safetensors and
# torch's external-data writer do, so the ranges look like real ones.
ALIGNMENT = 64


class RandomValues:
    """Real parameter values, drawn from one seeded generator in the order
    the parameters are declared and written at their ranges of `handle`.

    A 1-D parameter (a norm's gain) is 1 + N(0, 0.1^2); a 2-D one [rows,
    cols] is N(0, 1/cols): torch.nn.Linear keeps [out, in], so every output
    of a Linear has about the variance of its input, and an embedding row
    has about unit norm. Values are drawn in float32 and cast to the
    parameter's type.
    """

    def __init__(self, handle, seed):
        self.handle = handle
        self.rng = np.random.default_rng(seed)

    def write(self, offset, shape, dtype):
        values = self.rng.standard_normal(shape, dtype=np.float32)
        if len(shape) == 1:
            values = 1.0 + np.float32(0.1) * values
        else:
            values *= np.float32(1.0 / math.sqrt(shape[-1]))
        values = values.astype(helper.tensor_dtype_to_np_dtype(dtype), copy=False)
        self.handle.seek(offset)
        self.handle.write(np.ascontiguousarray(values).data)


class GraphBuilder:
    """Nodes, small constants and external-data parameters of one graph.

    Parameters get consecutive, aligned ranges in a single weights file. With
    `values=None` (the shaped models) nothing is written for them: the caller
    only sets the file's size. With a RandomValues, each parameter's values
    are drawn and written at its range as it is declared.
    """

    def __init__(self, name, weights_file, values=None):
        self.name = name
        self.weights_file = weights_file
        self.values = values
        self.nodes = []
        self.initializers = []
        self.offset = 0
        self.parameter_count = 0
        self.counter = 0

    def fresh(self, hint):
        self.counter += 1
        return f"/{hint}_{self.counter}"

    def parameter(self, name, shape, dtype):
        """A weight stored as external data in the model's one weights file."""
        tensor = TensorProto()
        tensor.name = name
        tensor.data_type = dtype
        tensor.dims.extend(shape)
        tensor.data_location = TensorProto.EXTERNAL
        length = int(np.prod(shape)) * np.dtype(helper.tensor_dtype_to_np_dtype(dtype)).itemsize
        self.offset = (self.offset + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        if self.values is not None:
            self.values.write(self.offset, shape, dtype)
        for key, value in (("location", self.weights_file),
                           ("offset", str(self.offset)),
                           ("length", str(length))):
            entry = tensor.external_data.add()
            entry.key = key
            entry.value = value
        self.offset += length
        self.parameter_count += int(np.prod(shape))
        self.initializers.append(tensor)
        return name

    def constant(self, values, dtype, hint="const"):
        """A small constant as an inline initializer (shapes, axes, scalars)."""
        name = self.fresh(hint)
        array = np.asarray(values, dtype=helper.tensor_dtype_to_np_dtype(dtype))
        self.initializers.append(
            helper.make_tensor(name, dtype, array.shape, array.flatten().tolist()))
        return name

    def ints(self, values, hint="ints"):
        return self.constant(values, TensorProto.INT64, hint)

    def op(self, op_type, inputs, hint=None, outputs=1, **attributes):
        names = [self.fresh(hint or op_type) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, names,
                                           name=names[0].lstrip("/"),
                                           **attributes))
        return names[0] if outputs == 1 else names

    def model(self, output, output_dtype, vocab):
        graph = helper.make_graph(
            self.nodes, self.name,
            [helper.make_tensor_value_info("input_ids", TensorProto.INT64,
                                           ["batch", "sequence"])],
            [helper.make_tensor_value_info(output, output_dtype,
                                           ["batch", "sequence", vocab])],
            initializer=self.initializers)
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", OPSET)],
            producer_name="zplan bench/make_shaped_models.py")
        # onnxruntime and onnx.checker read IR version 8 at opset 17.
        model.ir_version = 8
        return model


def linear(g, x, weight):
    """torch.nn.Linear without bias as exported: MatMul(x, Transpose(W))."""
    transposed = g.op("Transpose", [weight], perm=[1, 0])
    return g.op("MatMul", [x, transposed])


def sequence_length(g):
    """S as a 1-element int64 tensor, from Shape(input_ids)."""
    shape = g.op("Shape", ["input_ids"])
    return g.op("Gather", [shape, g.ints([1])], axis=0)


def square_shape(g, length):
    return g.op("Concat", [length, length], axis=0)


#===------------------------------------------------------------------------===#
# Llama-2-70B
#===------------------------------------------------------------------------===#

LLAMA2_70B = dict(layers=80, hidden=8192, heads=64, kv_heads=8,
                  intermediate=28672, vocab=32000, eps=1e-5)


def rms_norm(g, x, weight, eps, dtype):
    square = g.op("Pow", [x, g.constant(2.0, dtype)])
    mean = g.op("ReduceMean", [square], axes=[-1], keepdims=1)
    shifted = g.op("Add", [mean, g.constant(eps, dtype)])
    root = g.op("Sqrt", [shifted])
    inverse = g.op("Div", [g.constant(1.0, dtype), root])
    normalised = g.op("Mul", [x, inverse])
    return g.op("Mul", [weight, normalised])


def repeat_kv(g, states, kv_heads, repeats, head_dim):
    """[B, KV, S, D] -> [B, KV * repeats, S, D] as Hugging Face's repeat_kv
    exports: a new axis, an Expand along it, and a Reshape that merges it."""
    if repeats == 1:
        return states
    unsqueezed = g.op("Unsqueeze", [states, g.ints([2])])
    expanded = g.op("Expand", [unsqueezed, g.ints([1, 1, repeats, 1, 1])])
    return g.op("Reshape",
                [expanded, g.ints([0, kv_heads * repeats, -1, head_dim])])


def build_llama(g, cfg):
    # float16 unless the configuration names another type.
    np_dtype = np.dtype(cfg.get("dtype", "float16"))
    dtype = helper.np_dtype_to_tensor_dtype(np_dtype)
    hidden, heads, kv_heads = cfg["hidden"], cfg["heads"], cfg["kv_heads"]
    head_dim = hidden // heads
    kv_dim = kv_heads * head_dim
    p = "model.layers.{}."

    embed = g.parameter("model.embed_tokens.weight", [cfg["vocab"], hidden], dtype)
    x = g.op("Gather", [embed, "input_ids"], axis=0)

    # Causal additive mask [1, 1, S, S]: 0 on and below the diagonal, the
    # type's minimum above it (-65504 in float16), as Hugging Face builds it.
    # Everything folds once S is known.
    length = sequence_length(g)
    filled = g.op("ConstantOfShape", [square_shape(g, length)],
                  value=helper.make_tensor("value", dtype, [1],
                                           [float(np.finfo(np_dtype).min)]))
    upper = g.op("Trilu", [filled, g.ints(1)], upper=1)
    mask = g.op("Unsqueeze", [upper, g.ints([0, 1])])
    scale = g.constant(math.sqrt(head_dim), dtype)

    for layer in range(cfg["layers"]):
        prefix = p.format(layer)
        normed = rms_norm(
            g, x, g.parameter(prefix + "input_layernorm.weight", [hidden], dtype),
            cfg["eps"], dtype)
        q = linear(g, normed, g.parameter(prefix + "self_attn.q_proj.weight",
                                          [hidden, hidden], dtype))
        k = linear(g, normed, g.parameter(prefix + "self_attn.k_proj.weight",
                                          [kv_dim, hidden], dtype))
        v = linear(g, normed, g.parameter(prefix + "self_attn.v_proj.weight",
                                          [kv_dim, hidden], dtype))
        q = g.op("Transpose", [g.op("Reshape", [q, g.ints([0, 0, heads, head_dim])])],
                 perm=[0, 2, 1, 3])
        k = g.op("Transpose", [g.op("Reshape", [k, g.ints([0, 0, kv_heads, head_dim])])],
                 perm=[0, 2, 1, 3])
        v = g.op("Transpose", [g.op("Reshape", [v, g.ints([0, 0, kv_heads, head_dim])])],
                 perm=[0, 2, 1, 3])
        k = repeat_kv(g, k, kv_heads, heads // kv_heads, head_dim)
        v = repeat_kv(g, v, kv_heads, heads // kv_heads, head_dim)
        scores = g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])])
        scores = g.op("Div", [scores, scale])
        scores = g.op("Add", [scores, mask])
        probabilities = g.op("Softmax", [scores], axis=-1)
        context = g.op("MatMul", [probabilities, v])
        context = g.op("Transpose", [context], perm=[0, 2, 1, 3])
        context = g.op("Reshape", [context, g.ints([0, 0, hidden])])
        attended = linear(g, context, g.parameter(
            prefix + "self_attn.o_proj.weight", [hidden, hidden], dtype))
        x = g.op("Add", [x, attended])

        normed = rms_norm(
            g, x, g.parameter(prefix + "post_attention_layernorm.weight",
                              [hidden], dtype), cfg["eps"], dtype)
        gate = linear(g, normed, g.parameter(prefix + "mlp.gate_proj.weight",
                                             [cfg["intermediate"], hidden], dtype))
        up = linear(g, normed, g.parameter(prefix + "mlp.up_proj.weight",
                                           [cfg["intermediate"], hidden], dtype))
        activated = g.op("Mul", [gate, g.op("Sigmoid", [gate])])
        down = linear(g, g.op("Mul", [activated, up]), g.parameter(
            prefix + "mlp.down_proj.weight", [hidden, cfg["intermediate"]], dtype))
        x = g.op("Add", [x, down])

    x = rms_norm(g, x, g.parameter("model.norm.weight", [hidden], dtype),
                 cfg["eps"], dtype)
    logits = linear(g, x, g.parameter("lm_head.weight", [cfg["vocab"], hidden], dtype))
    g.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="logits"))
    return g.model("logits", dtype, cfg["vocab"])


#===------------------------------------------------------------------------===#
# GPT-2 small
#===------------------------------------------------------------------------===#

GPT2_SMALL = dict(layers=12, hidden=768, heads=12, vocab=50257, positions=1024,
                  eps=1e-5)


def gpt2_linear(g, x, prefix, fan_in, fan_out, dtype):
    """GPT-2's Conv1D: weight [in, out], MatMul then Add of the bias."""
    weight = g.parameter(prefix + ".weight", [fan_in, fan_out], dtype)
    bias = g.parameter(prefix + ".bias", [fan_out], dtype)
    return g.op("Add", [g.op("MatMul", [x, weight]), bias])


def layer_norm(g, x, prefix, hidden, eps, dtype):
    return g.op("LayerNormalization",
                [x, g.parameter(prefix + ".weight", [hidden], dtype),
                 g.parameter(prefix + ".bias", [hidden], dtype)],
                axis=-1, epsilon=eps)


def gelu_tanh(g, x, dtype):
    cubed = g.op("Pow", [x, g.constant(3.0, dtype)])
    inner = g.op("Add", [x, g.op("Mul", [g.constant(0.044715, dtype), cubed])])
    scaled = g.op("Mul", [g.constant(math.sqrt(2.0 / math.pi), dtype), inner])
    bracket = g.op("Add", [g.constant(1.0, dtype), g.op("Tanh", [scaled])])
    half = g.op("Mul", [g.constant(0.5, dtype), x])
    return g.op("Mul", [half, bracket])


def build_gpt2(g, cfg):
    dtype = TensorProto.FLOAT
    hidden, heads = cfg["hidden"], cfg["heads"]
    head_dim = hidden // heads

    wte = g.parameter("transformer.wte.weight", [cfg["vocab"], hidden], dtype)
    wpe = g.parameter("transformer.wpe.weight", [cfg["positions"], hidden], dtype)
    length = sequence_length(g)
    positions = g.op("Range", [g.ints(0), g.op("Squeeze", [length, g.ints([0])]),
                               g.ints(1)])
    positions = g.op("Unsqueeze", [positions, g.ints([0])])
    x = g.op("Add", [g.op("Gather", [wte, "input_ids"], axis=0),
                     g.op("Gather", [wpe, positions], axis=0)])

    # Boolean causal mask [1, 1, S, S], true on and below the diagonal.
    filled = g.op("ConstantOfShape", [square_shape(g, length)],
                  value=helper.make_tensor("value", TensorProto.BOOL, [1], [True]))
    lower = g.op("Trilu", [filled], upper=0)
    mask = g.op("Unsqueeze", [lower, g.ints([0, 1])])
    fill = g.constant(np.finfo(np.float32).min, dtype)
    scale = g.constant(math.sqrt(head_dim), dtype)

    for layer in range(cfg["layers"]):
        prefix = f"transformer.h.{layer}."
        normed = layer_norm(g, x, prefix + "ln_1", hidden, cfg["eps"], dtype)
        qkv = gpt2_linear(g, normed, prefix + "attn.c_attn", hidden, 3 * hidden, dtype)
        q, k, v = g.op("Split", [qkv, g.ints([hidden, hidden, hidden])], outputs=3,
                       axis=2)
        q, k, v = (g.op("Transpose",
                        [g.op("Reshape", [t, g.ints([0, 0, heads, head_dim])])],
                        perm=[0, 2, 1, 3]) for t in (q, k, v))
        scores = g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])])
        scores = g.op("Div", [scores, scale])
        scores = g.op("Where", [mask, scores, fill])
        context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]),
                                   g.ints([0, 0, hidden])])
        x = g.op("Add", [x, gpt2_linear(g, context, prefix + "attn.c_proj",
                                         hidden, hidden, dtype)])
        normed = layer_norm(g, x, prefix + "ln_2", hidden, cfg["eps"], dtype)
        h = gpt2_linear(g, normed, prefix + "mlp.c_fc", hidden, 4 * hidden, dtype)
        h = gpt2_linear(g, gelu_tanh(g, h, dtype), prefix + "mlp.c_proj",
                        4 * hidden, hidden, dtype)
        x = g.op("Add", [x, h])

    x = layer_norm(g, x, "transformer.ln_f", hidden, cfg["eps"], dtype)
    # Tied LM head: the same initializer as the embedding.
    logits = g.op("MatMul", [x, g.op("Transpose", [wte], perm=[1, 0])])
    g.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="logits"))
    return g.model("logits", dtype, cfg["vocab"])


MODELS = {
    "llama2-70b": (build_llama, LLAMA2_70B),
    "gpt2-small": (build_gpt2, GPT2_SMALL),
}

#===------------------------------------------------------------------------===#
# Models with real random weights (bench/zrun_bench.py)
#===------------------------------------------------------------------------===#

# Llama's graph at a size one CPU core runs in well under a second.
LLAMA_MEDIUM = dict(layers=8, hidden=1024, heads=16, kv_heads=4,
                    intermediate=2816, vocab=32000, eps=1e-5, dtype="float32")

# name -> (builder, configuration, seed of RandomValues). Built only when
# asked for by name: their weights file is written in full.
WEIGHTED_MODELS = {
    "llama-medium": (build_llama, LLAMA_MEDIUM, 20261130),
}

# Llama-2-7B's shapes (no grouped-query attention: 32 kv heads), float16.
LLAMA2_7B = dict(layers=32, hidden=4096, heads=32, kv_heads=32,
                 intermediate=11008, vocab=32000, eps=1e-5)

# Shaped models (sparse weights) built only when named, for
# bench/train_schedule_bench.py: Llama-2-7B, and Llama-2-70B's per-layer
# shapes at fewer layers (the train benchmark's fallback if 80 layers
# compile too slowly; see bench/README.md, "Training").
ON_REQUEST_MODELS = {
    "llama2-7b": (build_llama, LLAMA2_7B),
    "llama2-70b-8l": (build_llama, dict(LLAMA2_70B, layers=8)),
    # The same graphs in float32 (weights and activations), for
    # bench/mixed_precision_bench.py: zcc --param-dtype bf16 keeps float32
    # master shards and gathers bf16 copies of them, so it needs float32
    # parameters. Sparse weights: twice the float16 files' size, no disk.
    "llama2-7b-f32": (build_llama, dict(LLAMA2_7B, dtype="float32")),
    "llama2-70b-f32": (build_llama, dict(LLAMA2_70B, dtype="float32")),
    "llama2-70b-8l-f32": (build_llama, dict(LLAMA2_70B, layers=8, dtype="float32")),
    # bench/compile_bench.py: compile time against the layer count.
    "llama2-70b-10l-f32": (build_llama, dict(LLAMA2_70B, layers=10, dtype="float32")),
    "llama2-70b-20l-f32": (build_llama, dict(LLAMA2_70B, layers=20, dtype="float32")),
    "llama2-70b-40l-f32": (build_llama, dict(LLAMA2_70B, layers=40, dtype="float32")),
}


#===------------------------------------------------------------------------===#
# Cache
#===------------------------------------------------------------------------===#

def script_digest():
    with open(os.path.abspath(__file__), "rb") as source:
        return hashlib.sha256(source.read()).hexdigest()


def model_paths(cache_dir, name):
    directory = os.path.join(cache_dir, name)
    return (directory, os.path.join(directory, name + ".onnx"),
            os.path.join(directory, name + ".weights"),
            os.path.join(directory, "manifest.json"))


def is_current(cache_dir, name):
    _, onnx_path, weights_path, manifest_path = model_paths(cache_dir, name)
    try:
        with open(manifest_path) as handle:
            manifest = json.load(handle)
        return (manifest.get("generator_sha256") == script_digest() and
                os.path.getsize(weights_path) == manifest["weights_bytes"] and
                os.path.getsize(onnx_path) == manifest["onnx_bytes"])
    except (OSError, ValueError, KeyError):
        return False


def write_model(cache_dir, name):
    """Builds `name` and writes it atomically: weights, graph, then manifest."""
    if name in MODELS:
        (build, cfg), seed = MODELS[name], None
    elif name in ON_REQUEST_MODELS:
        (build, cfg), seed = ON_REQUEST_MODELS[name], None
    else:
        build, cfg, seed = WEIGHTED_MODELS[name]
    directory, onnx_path, weights_path, manifest_path = model_paths(cache_dir, name)
    os.makedirs(directory, exist_ok=True)

    temporary = weights_path + ".partial"
    with open(temporary, "wb") as handle:
        # A shaped model's file is sparse: only its size is set, no block is
        # written. A weighted one gets every parameter's values as it is
        # declared.
        values = None if seed is None else RandomValues(handle, seed)
        g = GraphBuilder(name, os.path.basename(weights_path), values)
        model = build(g, cfg)
        handle.truncate(g.offset)
    os.replace(temporary, weights_path)

    serialized = model.SerializeToString()
    with tempfile.NamedTemporaryFile(dir=directory, suffix=".onnx",
                                     delete=False) as handle:
        handle.write(serialized)
    try:
        # By path, so the checker finds the weights file beside the graph; it
        # checks that the file exists, and reads none of it.
        onnx.checker.check_model(handle.name)
    except Exception:
        os.remove(handle.name)
        raise
    os.chmod(handle.name, 0o644)
    os.replace(handle.name, onnx_path)

    manifest = {
        "model": name,
        "config": cfg,
        "parameters": g.parameter_count,
        "weights_bytes": g.offset,
        "random_weights_seed": seed,
        "onnx_bytes": len(serialized),
        "nodes": len(model.graph.node),
        "generator_sha256": script_digest(),
    }
    with tempfile.NamedTemporaryFile("w", dir=directory, delete=False) as handle:
        json.dump(manifest, handle, indent=2)
    os.chmod(handle.name, 0o644)
    os.replace(handle.name, manifest_path)
    return manifest


def ensure_models(cache_dir, names, force=False, log=sys.stderr):
    """The .onnx path of each model in `names`, (re)built where needed."""
    paths = {}
    for name in names:
        if force or not is_current(cache_dir, name):
            manifest = write_model(cache_dir, name)
            kind = ("sparse" if manifest["random_weights_seed"] is None else
                    f"random (seed {manifest['random_weights_seed']})")
            print(f"make_shaped_models: wrote {name}: {manifest['parameters']:,} "
                  f"parameters, {manifest['weights_bytes']:,} B {kind} weights, "
                  f"{manifest['nodes']} nodes", file=log)
        paths[name] = model_paths(cache_dir, name)[1]
    return paths


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", default=DEFAULT_CACHE_DIR)
    parser.add_argument("--only", action="append",
                        choices=sorted(MODELS) + sorted(ON_REQUEST_MODELS) +
                        sorted(WEIGHTED_MODELS),
                        help="build just this model (repeatable); the models "
                             "with random weights are built only this way")
    parser.add_argument("--force", action="store_true",
                        help="rebuild even when the cached model is current")
    args = parser.parse_args()
    for name, path in ensure_models(args.cache_dir, args.only or list(MODELS),
                                    args.force, log=sys.stdout).items():
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()
