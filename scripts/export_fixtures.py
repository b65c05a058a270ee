#!/usr/bin/env python3
"""Export the tiny causal-LM ONNX fixtures under test/models/.

Builds GPT-2, Llama and OPT causal language models from `transformers` configs
with random, seeded weights (nothing is downloaded: HF_HUB_OFFLINE=1), exports
them with the TorchScript ONNX exporter (torch.onnx.export, dynamo=False), checks
each graph with onnx.checker, and verifies it against the torch model with
onnxruntime (CPU) before atomically replacing the committed file.

Run from anywhere (CPU only, a few seconds):

    python3 scripts/export_fixtures.py                 # all fixtures -> test/models/
    python3 scripts/export_fixtures.py --only llama-opset17 --out-dir /tmp/x
    python3 scripts/export_fixtures.py --train-goldens # test/models/goldens/*.npz
    python3 scripts/export_fixtures.py --row-goldens   # goldens/sft-*.npy, *-rows.npz

--train-goldens leaves the ONNX files alone and writes the training oracles of
test/train/ instead (see train_goldens() below for what each .npz holds);
--row-goldens writes the rows, labels and loss curves of training on rows
(see row_goldens()).

Last run with: python 3.11.7, torch 2.5.1 (+cu124 wheel, run on CPU),
transformers 4.46.3, onnx 1.23.2, onnxruntime 1.32.0.
The script pins nothing; it prints the versions it runs with and warns when they
differ from the ones above (other versions may produce different graphs/bytes).

Fixtures (all: 2 layers, hidden 64, 4 heads, vocab 256, max positions 64):
  gpt2-opset{14,17}.onnx   GPT2LMHeadModel, tied wte / lm_head, gelu_new, Conv1D (Gemm)
  llama-opset{14,17}.onnx  LlamaForCausalLM, RMSNorm, rotary, SwiGLU, GQA (2 kv heads),
                           untied lm_head
  opt-opset{14,17}.onnx    OPTForCausalLM, learned positions (offset 2), ReLU, tied lm_head
  llama-opset17-external.onnx (+ .onnx.data)  the llama-opset17 graph with its large
                           initializers stored as ONNX external data

Graph interface: input "input_ids" int64 [batch, sequence]; output "logits"
float32 [batch, sequence, 256]; both axes dynamic. Standard ONNX domain only.

Cache exports (generation; the same seeded models, the same initializers):
  gpt2-kv-opset17.onnx, llama-kv-opset17.onnx, opt-kv-opset17.onnx
  inputs  input_ids int64 [batch, seq], attention_mask int64 [batch, past + seq],
          position_ids int64 [batch, seq], then per layer i = 0, 1:
          past_key_values.{i}.key, past_key_values.{i}.value float32
          [batch, Hkv, past, 16] (Hkv: 4; Llama 2)
  outputs logits float32 [batch, seq, 256], present.{i}.key, present.{i}.value
          float32 [batch, Hkv, past + seq, 16] = concat(past, new) on axis 2
  batch, seq and past are dynamic (GPT-2 and OPT: past + seq <= 64, the position
  tables' length). The legacy tuple cache goes in (Llama converts it to a
  DynamicCache and back). Checked against torch with onnxruntime at (past, seq) =
  (0, 3), (0, 1), (5, 1), (5, 3), every output; and against the plain fixture of
  the same architecture: a 9-token sequence fed as 6 + 3 tokens through the
  cache gives the plain fixture's 9-token logits.

Weights: the library's own init (normal(0, 0.02), zero biases, unit norm gains)
followed by a seeded perturbation of every parameter (+ normal(0, 0.02)) so that
no bias is zero and no norm gain is exactly one; a compiler that drops, swaps or
mis-shards such a tensor then produces different logits.

Verification: ORT logits vs torch logits for input_ids of shape 2x16 and 1x7,
max |diff| / max |torch logit| must be <= 1e-4, else the script fails and leaves
the existing fixture untouched. It also prints each graph's op inventory, its
initializers that are not parameters under their own name (renamed/transposed
copies made by constant folding), its Constant nodes of more than 4 elements
(folded buffers: rotary inv_freq, the GPT-2 causal-mask buffer), and the SHA-256
of each written file.
"""

import os

# Must be set before transformers is imported: never touch the network.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import argparse
import collections
import contextlib
import hashlib
import inspect
import io
import shutil
import sys
import tempfile
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
import transformers

TESTED_VERSIONS = {
    "torch": "2.5.1",
    "transformers": "4.46.3",
    "onnx": "1.23.2",
    "onnxruntime": "1.32.0",
}

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT_DIR = os.path.join(REPO_ROOT, "test", "models")

SEED = 1234
VOCAB = 256
HIDDEN = 64
LAYERS = 2
HEADS = 4
KV_HEADS = 2  # llama only
INTERMEDIATE = 128
MAX_POS = 64
TOLERANCE = 1e-4  # max |ort - torch| / max |torch|
CHECK_SHAPES = [(2, 16), (1, 7)]
EXTERNAL_SIZE_THRESHOLD = 1024


def gpt2_model():
    cfg = transformers.GPT2Config(
        vocab_size=VOCAB,
        n_positions=MAX_POS,
        n_embd=HIDDEN,
        n_layer=LAYERS,
        n_head=HEADS,
        n_inner=INTERMEDIATE,
        activation_function="gelu_new",
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        use_cache=False,
        attn_implementation="eager",
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=0,
    )
    return transformers.GPT2LMHeadModel(cfg)


def llama_model():
    cfg = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=MAX_POS,
        hidden_act="silu",
        rms_norm_eps=1e-6,
        rope_theta=10000.0,
        attention_bias=False,
        mlp_bias=False,
        attention_dropout=0.0,
        use_cache=False,
        attn_implementation="eager",
        tie_word_embeddings=False,
        pad_token_id=None,
        bos_token_id=0,
        eos_token_id=0,
    )
    return transformers.LlamaForCausalLM(cfg)


def opt_model():
    cfg = transformers.OPTConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        ffn_dim=INTERMEDIATE,
        num_attention_heads=HEADS,
        max_position_embeddings=MAX_POS,
        word_embed_proj_dim=HIDDEN,
        do_layer_norm_before=True,
        activation_function="relu",
        enable_bias=True,
        dropout=0.0,
        attention_dropout=0.0,
        layerdrop=0.0,
        use_cache=False,
        attn_implementation="eager",
        tie_word_embeddings=True,
        pad_token_id=1,
        bos_token_id=2,
        eos_token_id=2,
    )
    return transformers.OPTForCausalLM(cfg)


ARCHS = {"gpt2": gpt2_model, "llama": llama_model, "opt": opt_model}

# name -> (arch, opset, external data)
FIXTURES = [
    ("gpt2-opset14", "gpt2", 14, False),
    ("gpt2-opset17", "gpt2", 17, False),
    ("llama-opset14", "llama", 14, False),
    ("llama-opset17", "llama", 17, False),
    ("opt-opset14", "opt", 14, False),
    ("opt-opset17", "opt", 17, False),
    ("llama-opset17-external", "llama", 17, True),
]

# Cache exports (generation, docs/generation.md section 3): the same seeded models as the
# plain fixtures above, with past_key_values inputs and present outputs.
# name -> (arch, opset)
KV_FIXTURES = [
    ("gpt2-kv-opset17", "gpt2", 17),
    ("llama-kv-opset17", "llama", 17),
    ("opt-kv-opset17", "opt", 17),
]
# (past, seq) pairs the cache exports are checked at against torch.
KV_CHECK_SHAPES = [(0, 3), (0, 1), (5, 1), (5, 3)]
KV_EXPORT_SHAPE = (2, 3, 4)  # batch, seq, past of the traced example


class LogitsOnly(torch.nn.Module):
    """input_ids -> logits; no cache, no attention mask, tuple outputs."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False, return_dict=False)[0]


class LogitsAndCache(torch.nn.Module):
    """The torch/optimum cache interface, flat:

    (input_ids [batch, seq], attention_mask [batch, past + seq],
     position_ids [batch, seq], past_key_values.{i}.key, .value [batch, Hkv, past, D]
     for each layer i in order) -> (logits, present.{i}.key, present.{i}.value ...).

    The past goes in as the legacy tuple cache (Llama converts it to a
    DynamicCache inside and back), so `present` is concat(past, new) on axis 2.
    The model is the attribute `model`, as in LogitsOnly, so the initializers
    carry the same names as the plain fixtures'."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.layers = model.config.num_hidden_layers

    def forward(self, input_ids, attention_mask, position_ids, *past):
        pairs = tuple((past[2 * i], past[2 * i + 1]) for i in range(self.layers))
        logits, present = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                     position_ids=position_ids, past_key_values=pairs,
                                     use_cache=True, return_dict=False)[:2]
        flat = [t for pair in present for t in pair]
        return (logits, *flat)


def kv_names(layers):
    """The cache interface's input and output names, in argument order."""
    past = [f"past_key_values.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    present = [f"present.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    return ["input_ids", "attention_mask", "position_ids"] + past, ["logits"] + present


def kv_heads(arch):
    return KV_HEADS if arch == "llama" else HEADS


def kv_feed(arch, batch, seq, past, gen):
    """Random ids, an all-ones mask, positions past..past+seq-1 and a random
    past (normal, like real keys and values), as numpy arrays by input name."""
    head_dim = HIDDEN // HEADS
    ids = torch.randint(0, VOCAB, (batch, seq), generator=gen, dtype=torch.int64)
    feed = {
        "input_ids": ids,
        "attention_mask": torch.ones((batch, past + seq), dtype=torch.int64),
        "position_ids": torch.arange(past, past + seq, dtype=torch.int64).expand(batch, seq)
        .contiguous(),
    }
    for i in range(LAYERS):
        for kind in ("key", "value"):
            feed[f"past_key_values.{i}.{kind}"] = torch.randn(
                (batch, kv_heads(arch), past, head_dim), generator=gen)
    return feed


def build_model(arch):
    """The transformers model for `arch` with the fixtures' weights (seeded)."""
    return build(arch).model


def build(arch):
    """The model for `arch`, identical on every call (seeded)."""
    torch.manual_seed(SEED)
    model = ARCHS[arch]()
    # The attention class is chosen at construction from the config (default:
    # SDPA); setting config._attn_implementation afterwards would be too late.
    attn = {type(m).__name__ for m in model.modules() if type(m).__name__.endswith("Attention")}
    if model.config._attn_implementation != "eager" or any(
            "Sdpa" in c or "Flash" in c for c in attn):
        raise SystemExit(f"{arch}: attention is not eager: {sorted(attn)}")
    gen = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        # named_parameters() yields a tied tensor once, so ties are preserved.
        for _, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.02)
    model.eval()
    return LogitsOnly(model).eval()


def export_bytes(wrapper, opset):
    example = torch.zeros((2, 16), dtype=torch.int64)
    kwargs = dict(
        input_names=["input_ids"],
        output_names=["logits"],
        dynamic_axes={
            "input_ids": {0: "batch", 1: "sequence"},
            "logits": {0: "batch", 1: "sequence"},
        },
        opset_version=opset,
        # Without the exporter's folding, parameters keep their names and a
        # tied weight stays one initializer (GPT-2's wte feeds both the
        # embedding Gather and, through a Transpose, the LM head MatMul).
        # Folding every shape computation is zcc's job.
        do_constant_folding=False,
        export_params=True,
    )
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarnings from transformers
        with torch.no_grad():
            torch.onnx.export(wrapper, (example,), buf, **kwargs)
    return buf.getvalue()


def check_domains(model, name):
    bad_nodes = sorted({n.domain for n in model.graph.node if n.domain not in ("", "ai.onnx")})
    bad_opsets = sorted(o.domain for o in model.opset_import if o.domain not in ("", "ai.onnx"))
    if model.graph.sparse_initializer or model.functions or bad_nodes or bad_opsets:
        raise SystemExit(f"{name}: non-standard content: node domains {bad_nodes}, "
                         f"opset imports {bad_opsets}, functions {len(model.functions)}, "
                         f"sparse initializers {len(model.graph.sparse_initializer)}")
    for n in model.graph.node:
        for a in n.attribute:
            if a.g.node or a.graphs:
                raise SystemExit(f"{name}: node {n.name} ({n.op_type}) has a subgraph")


def op_inventory(model):
    return collections.Counter(n.op_type for n in model.graph.node)


def describe_initializers(model, wrapper):
    """Lines for initializers that are not a parameter under its own name."""
    params = {k: v.detach().numpy() for k, v in wrapper.named_parameters(remove_duplicate=False)}
    buffers = {k: v.detach().numpy() for k, v in wrapper.named_buffers(remove_duplicate=False)}
    lines = []
    n_param = 0
    total_bytes = 0
    for init in model.graph.initializer:
        arr = onnx.numpy_helper.to_array(init)
        total_bytes += arr.nbytes
        if init.name in params:
            n_param += 1
            continue
        what = "derived constant"
        for pool, kind in ((params, "parameter"), (buffers, "buffer")):
            for k, v in pool.items():
                if v.shape == arr.shape and np.array_equal(v, arr):
                    what = f"{kind} {k}"
                    break
                if v.ndim == 2 and v.T.shape == arr.shape and np.array_equal(v.T, arr):
                    what = f"transpose of {kind} {k}"
                    break
            if what != "derived constant":
                break
        lines.append(f"    initializer {init.name}: {arr.dtype}{list(arr.shape)} = {what}")
    # Constant nodes holding more than a few elements (folded buffers, masks).
    for node in model.graph.node:
        if node.op_type != "Constant":
            continue
        for a in node.attribute:
            if a.name != "value":
                continue
            arr = onnx.numpy_helper.to_array(a.t)
            if arr.size <= 4:
                continue
            what = "derived constant"
            for k, v in sorted(buffers.items(), key=lambda kv: (len(kv[0]), kv[0])):
                if v.size == arr.size and np.array_equal(v.ravel(), arr.ravel()):
                    what = f"buffer {k}" + ("" if v.shape == arr.shape else f" reshaped from {list(v.shape)}")
                    break
            lines.append(f"    Constant node {node.output[0]}: {arr.dtype}{list(arr.shape)} = {what}")
    return n_param, total_bytes, lines


def verify(path, wrapper, name):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    gen = torch.Generator().manual_seed(SEED + 2)
    worst = 0.0
    for shape in CHECK_SHAPES:
        ids = torch.randint(0, VOCAB, shape, generator=gen, dtype=torch.int64)
        with torch.no_grad():
            ref = wrapper(ids).numpy()
        (got,) = sess.run(["logits"], {"input_ids": ids.numpy()})
        if got.shape != ref.shape:
            raise SystemExit(f"{name}: shape {got.shape} != torch {ref.shape} for input {shape}")
        err = float(np.max(np.abs(got - ref)))
        scale = float(np.max(np.abs(ref)))
        rel = err / scale
        worst = max(worst, rel)
        print(f"  ORT vs torch {shape[0]}x{shape[1]}: max|diff| {err:.3e}, "
              f"max|logit| {scale:.3e}, relative {rel:.3e}")
        if not rel <= TOLERANCE:
            raise SystemExit(f"{name}: ORT mismatch {rel:.3e} > {TOLERANCE} for input {shape}")
    return worst


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def produce(name, arch, opset, external, out_dir, cache):
    print(f"== {name}  ({arch}, opset {opset}{', external data' if external else ''})")
    key = (arch, opset)
    wrapper = build(arch)
    if key not in cache:
        cache[key] = export_bytes(wrapper, opset)
    model = onnx.load_model_from_string(cache[key])
    check_domains(model, name)

    tmp_dir = tempfile.mkdtemp(prefix=f".{name}.", dir=out_dir)
    try:
        final_onnx = os.path.join(out_dir, f"{name}.onnx")
        tmp_onnx = os.path.join(tmp_dir, f"{name}.onnx")
        moves = [(tmp_onnx, final_onnx)]
        if external:
            data_name = f"{name}.onnx.data"
            # A fresh directory: onnx appends to an existing data file.
            onnx.save_model(model, tmp_onnx, save_as_external_data=True,
                            all_tensors_to_one_file=True, location=data_name,
                            size_threshold=EXTERNAL_SIZE_THRESHOLD)
            moves.insert(0, (os.path.join(tmp_dir, data_name), os.path.join(out_dir, data_name)))
        else:
            onnx.save_model(model, tmp_onnx)
        onnx.checker.check_model(tmp_onnx, full_check=True)
        loaded = onnx.load_model(tmp_onnx)  # with external data resolved
        verify(tmp_onnx, wrapper, name)

        counts = op_inventory(loaded)
        print(f"  nodes {sum(counts.values())}, op types {len(counts)}: "
              + ", ".join(f"{op} {c}" for op, c in sorted(counts.items())))
        print("  opset imports: " + ", ".join(f"'{o.domain}' {o.version}" for o in loaded.opset_import)
              + f"; ir_version {loaded.ir_version}")
        n_param, nbytes, lines = describe_initializers(loaded, wrapper)
        print(f"  initializers: {len(loaded.graph.initializer)} ({nbytes} bytes), "
              f"{n_param} named as parameters; other initializers and large constants:")
        for line in lines:
            print(line)
        if external:
            n_ext = sum(1 for t in model.graph.initializer
                        if t.data_location == onnx.TensorProto.EXTERNAL)
            print(f"  external tensors: {n_ext} of {len(model.graph.initializer)}")

        umask = os.umask(0)
        os.umask(umask)
        for src, dst in moves:
            os.chmod(src, 0o666 & ~umask)
            os.replace(src, dst)
        for _, dst in moves:
            shown = os.path.relpath(dst, REPO_ROOT)
            shown = dst if shown.startswith("..") else shown
            print(f"  wrote {shown}: {os.path.getsize(dst)} bytes, "
                  f"sha256 {sha256(dst)[:16]}")
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


# ===========================================================================
# Cache exports (generation): past_key_values in, present out.
# ===========================================================================


def export_kv_bytes(wrapper, opset):
    """The TorchScript export of LogitsAndCache with batch, seq and past
    dynamic. The example has past > 0 and seq > 1 so that neither is traced as
    a constant (a past of 0 would let the tracer drop the concat)."""
    batch, seq, past = KV_EXPORT_SHAPE
    arch = {"GPT2LMHeadModel": "gpt2", "LlamaForCausalLM": "llama",
            "OPTForCausalLM": "opt"}[type(wrapper.model).__name__]
    feed = kv_feed(arch, batch, seq, past, torch.Generator().manual_seed(SEED + 3))
    inputs, outputs = kv_names(wrapper.layers)
    dynamic = {"input_ids": {0: "batch", 1: "sequence"},
               "attention_mask": {0: "batch", 1: "past_sequence + sequence"},
               "position_ids": {0: "batch", 1: "sequence"},
               "logits": {0: "batch", 1: "sequence"}}
    for name in inputs[3:]:
        dynamic[name] = {0: "batch", 2: "past_sequence"}
    for name in outputs[1:]:
        dynamic[name] = {0: "batch", 2: "past_sequence + sequence"}
    kwargs = dict(input_names=inputs, output_names=outputs, dynamic_axes=dynamic,
                  opset_version=opset, do_constant_folding=False, export_params=True)
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarnings, the legacy-cache deprecation
        with torch.no_grad():
            torch.onnx.export(wrapper, tuple(feed[n] for n in inputs), buf, **kwargs)
    return buf.getvalue()


def ort_session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def relative_error(got, ref):
    return float(np.max(np.abs(got - ref))) / float(np.max(np.abs(ref)))


def verify_kv(path, wrapper, arch, plain_path, name):
    """ORT vs torch at every (past, seq) of KV_CHECK_SHAPES, every output;
    then the plain fixture's logits from the cache export fed its own
    present (same weights, same function): a 9-token sequence as 6 + 3."""
    sess = ort_session(path)
    inputs, outputs = kv_names(wrapper.layers)
    gen = torch.Generator().manual_seed(SEED + 4)
    worst = 0.0
    for past, seq in KV_CHECK_SHAPES:
        feed = kv_feed(arch, 2, seq, past, gen)
        with torch.no_grad():
            ref = [t.numpy() for t in wrapper(*(feed[n] for n in inputs))]
        got = sess.run(outputs, {n: feed[n].numpy() for n in inputs})
        errs = []
        for out, g, r in zip(outputs, got, ref):
            if g.shape != r.shape:
                raise SystemExit(f"{name}: {out} shape {g.shape} != torch {r.shape} "
                                 f"at past {past}, seq {seq}")
            errs.append(relative_error(g, r))
        rel = max(errs)
        worst = max(worst, rel)
        print(f"  ORT vs torch past {past} seq {seq}: logits relative {errs[0]:.3e}, "
              f"worst output relative {rel:.3e}")
        if not rel <= TOLERANCE:
            raise SystemExit(f"{name}: ORT mismatch {rel:.3e} > {TOLERANCE} "
                             f"at past {past}, seq {seq}")

    plain = ort_session(plain_path)
    ids = np.random.default_rng(SEED + 5).integers(0, VOCAB, size=(2, 9), dtype=np.int64)
    (full,) = plain.run(["logits"], {"input_ids": ids})
    head_dim = HIDDEN // HEADS
    past = {f"past_key_values.{i}.{kind}": np.zeros((2, kv_heads(arch), 0, head_dim), np.float32)
            for i in range(LAYERS) for kind in ("key", "value")}
    pieces = []
    for start, stop in ((0, 6), (6, 9)):
        feed = {"input_ids": ids[:, start:stop],
                "attention_mask": np.ones((2, stop), np.int64),
                "position_ids": np.tile(np.arange(start, stop, dtype=np.int64), (2, 1))}
        feed.update(past)
        got = sess.run(outputs, feed)
        pieces.append(got[0])
        past = {i: g for i, g in zip(inputs[3:], got[1:])}
    rel = relative_error(np.concatenate(pieces, axis=1), full)
    print(f"  cache export (6 + 3 tokens) vs {os.path.basename(plain_path)} (9 tokens): "
          f"relative {rel:.3e}")
    if not rel <= TOLERANCE:
        raise SystemExit(f"{name}: differs from {plain_path} by {rel:.3e}")
    return worst


def produce_kv(name, arch, opset, out_dir):
    print(f"== {name}  ({arch}, opset {opset}, cache export)")
    plain_path = os.path.join(out_dir, f"{arch}-opset{opset}.onnx")
    if not os.path.exists(plain_path):
        raise SystemExit(f"{name}: needs {plain_path} (export {arch}-opset{opset} first)")
    wrapper = LogitsAndCache(build_model(arch)).eval()
    model = onnx.load_model_from_string(export_kv_bytes(wrapper, opset))
    check_domains(model, name)
    mine = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    for key, value in onnx_parameters(plain_path).items():
        if key not in mine or not np.array_equal(mine[key], value):
            raise SystemExit(f"{name}: parameter {key} differs from {plain_path}")

    tmp_dir = tempfile.mkdtemp(prefix=f".{name}.", dir=out_dir)
    try:
        final_onnx = os.path.join(out_dir, f"{name}.onnx")
        tmp_onnx = os.path.join(tmp_dir, f"{name}.onnx")
        onnx.save_model(model, tmp_onnx)
        onnx.checker.check_model(tmp_onnx, full_check=True)
        verify_kv(tmp_onnx, wrapper, arch, plain_path, name)
        counts = op_inventory(model)
        print(f"  nodes {sum(counts.values())}, op types {len(counts)}: "
              + ", ".join(f"{op} {c}" for op, c in sorted(counts.items())))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_onnx, 0o666 & ~umask)
        os.replace(tmp_onnx, final_onnx)
        shown = os.path.relpath(final_onnx, REPO_ROOT)
        shown = final_onnx if shown.startswith("..") else shown
        print(f"  wrote {shown}: {os.path.getsize(final_onnx)} bytes, "
              f"sha256 {sha256(final_onnx)[:16]}")
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


# ===========================================================================
# Training goldens (--train-goldens): the oracles of test/train/.
# ===========================================================================
#
# For every distinct fixture graph, test/models/goldens/<fixture>.npz holds
# (all arrays; strings as numpy unicode scalars, so np.load needs no pickle):
#
#   input_ids            int64 [2, 8], numpy default_rng(7) integers in [0, 256),
#                        the model's pad token (OPT: 1) replaced by the next id
#   loss                 float64 [], the causal-LM loss of the model on input_ids
#                        with labels = input_ids: mean over the 2*7 shifted
#                        targets of logsumexp(logits) - logit[target] (equal to
#                        model(input_ids, labels=input_ids).loss: checked below)
#   grad:<initializer>   float32, d loss / d parameter for every parameter under
#                        its ONNX initializer name ("model." + HF name); a tied
#                        weight's is the sum over its uses, as autograd gives
#   param_names          the initializer names, in the ONNX file's order
#   labels, labels_loss, labels_grad:<initializer>
#                        (GPT-2 only) the same with an explicit labels input
#                        int64 [2, 8]: input_ids with 4 entries set to -100;
#                        targets = labels[:, 1:], -100 ignored, the mean over
#                        the 10 counted targets
#   train_*              the 3-step training setup: data file (relative to the
#                        repository), its token count and SHA-256, seed, steps,
#                        T (train_seq_len), rows per optimizer step R = K*N*B,
#                        the reference split B/K/N (4/1/1), and train_offsets
#                        int64 [steps, R], the rows' token offsets (BatchSampler.h)
#   curve:<name>         float64 [steps], the loss logged at each optimizer step
#   curve_lr:<name>      float64 [steps], the lr used at each step
#   curve_optimizer:<name>  "sgd" or "adamw"
#   curve_hyper:<name>   float64 [lr, beta1 or momentum, beta2, eps,
#                        weight_decay, warmup, clip] (clip: the max global
#                        gradient norm, 0 for none)
#   f32_grad_bound_ratio, f32_loss_rel, f32_curve_worst
#                        how far torch itself in float32 is from these values
#                        (gradients: the largest ratio of max |g32 - g| to
#                        check_gradients.py's bound; relative loss and curve
#                        errors): what float32 arithmetic costs
#   versions             the versions this ran with
#
# Values are computed in float64 (the model converted with .double(), the
# float32 islands of the Llama code made float64: see float64_exact), so the
# oracle's own rounding is negligible next to the float32 pipeline under test.
#
# Training, per optimizer step s (0-based), exactly as zrun's contract:
#   lr_s = lr * min(1, (s + 1) / W) with warmup W (lr when W == 0);
#   for micro-step k < K, rank r < N: rows (k*N + r)*B ..; loss_kr = the mean
#   over its B*(T-1) targets; gradients of the K*N loss_kr are SUMMED into
#   p.grad, then p.grad *= 1 / (K*N) (zrun's grad_scale), then one
#   torch.optim step (foreach=False); the logged loss of step s is the mean
#   of the K*N loss_kr, computed with the parameters before step s's update
#   (all micro-batches have the same target count, so the curve does not
#   depend on how R rows are split into B, K, N: checked below).
#   sgd:           SGD(lr=0.1), no momentum, no weight decay
#   sgd_momentum:  SGD(lr=0.1, momentum=0.9, weight_decay=0.1)
#   adamw:         AdamW(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
#   adamw_warmup2: the same with warmup W = 2 (lr 5e-3, then 1e-2)
#   adamw_clip:    adamw with the gradients clipped to a global L2 norm of
#                  0.25 (torch.nn.utils.clip_grad_norm_ after the 1/(K*N)
#                  scaling; zrun train --clip-grad-norm 0.25)
#
# Checked before a file is written (the script stops otherwise): the loss
# equals transformers' own model(..., labels=...).loss in float32 (1e-6); the
# float64 gradients match float64 central differences of the loss at six
# entries (1e-6 of the tensor's max |g|); the curve is the same (1e-12) for
# the splits (B, K, N) = (2, 1, 2), (1, 2, 2), (2, 2, 1); batches.py passes
# its known answers. The llama-opset17-external golden is llama-opset17's
# (checked: same initializers, same values).

CORPUS = os.path.join(REPO_ROOT, "data", "gpl-3.0.bin")
GOLDEN_IDS_SEED = 7
GOLDEN_IDS_SHAPE = (2, 8)
TRAIN_SEED = 0
TRAIN_STEPS = 3
TRAIN_SEQ_LEN = 16
TRAIN_REFERENCE_SPLIT = (4, 1, 1)  # B, K, N: R = 4 rows per optimizer step
TRAIN_OTHER_SPLITS = [(2, 1, 2), (1, 2, 2), (2, 2, 1)]  # must give the same curve
CURVES = [
    # name, optimizer, lr, beta1 (momentum for sgd), beta2, eps, weight decay, warmup,
    # clip (max global gradient norm; 0: none)
    ("sgd", "sgd", 0.1, 0.0, 0.0, 0.0, 0.0, 0, 0.0),
    ("sgd_momentum", "sgd", 0.1, 0.9, 0.0, 0.0, 0.1, 0, 0.0),
    ("adamw", "adamw", 1e-2, 0.9, 0.999, 1e-8, 0.1, 0, 0.0),
    ("adamw_warmup2", "adamw", 1e-2, 0.9, 0.999, 1e-8, 0.1, 2, 0.0),
    ("adamw_clip", "adamw", 1e-2, 0.9, 0.999, 1e-8, 0.1, 0, 0.25),
]
# A fixture whose graph (and weights) another one already has.
GOLDEN_SHARED = {"llama-opset17-external": "llama-opset17"}
FD_EPS = 1e-6  # float64 central differences of the torch loss
# A second gradient golden with an explicit `labels` input holding -100
# (ignored) targets, for one architecture (the loss path is the same for all).
LABELS_GOLDEN_ARCHS = ("gpt2",)
LABELS_IGNORED = (np.array([0, 0, 1, 1]), np.array([3, 4, 1, 7]))  # 4 of 14 targets


@contextlib.contextmanager
def float64_exact():
    """Lets a .double() Llama compute in float64 throughout.

    LlamaRMSNorm casts its input to float32 and the eager attention takes its
    softmax in float32; for a float64 input both keep float64 here (the same
    formulas). Rotary cos/sin stay float32-computed: constants, which the ONNX
    graph computes in float32 too."""
    from transformers.models.llama import modeling_llama
    softmax = torch.nn.functional.softmax
    rms_forward = modeling_llama.LlamaRMSNorm.forward

    def softmax64(x, dim=None, _stacklevel=3, dtype=None):
        if x.dtype == torch.float64:
            dtype = None
        return softmax(x, dim=dim, _stacklevel=_stacklevel, dtype=dtype)

    def rms_forward64(self, hidden):
        if hidden.dtype != torch.float64:
            return rms_forward(self, hidden)
        variance = hidden.pow(2).mean(-1, keepdim=True)
        return self.weight * (hidden * torch.rsqrt(variance + self.variance_epsilon))

    torch.nn.functional.softmax = softmax64
    modeling_llama.LlamaRMSNorm.forward = rms_forward64
    try:
        yield
    finally:
        torch.nn.functional.softmax = softmax
        modeling_llama.LlamaRMSNorm.forward = rms_forward


@contextlib.contextmanager
def default_dtype(dtype):
    """Tensors the model code creates without a dtype (OPT's causal mask,
    filled with finfo(dtype).min) take the model's dtype."""
    saved = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(saved)


def onnx_parameters(path):
    """The ONNX file's trainable initializers (float, more than one element:
    zcc's rule), name -> array, in file order; external data resolved."""
    model = onnx.load_model(path)
    out = {}
    for tensor in model.graph.initializer:
        array = onnx.numpy_helper.to_array(tensor)
        if array.dtype.kind == "f" and array.size > 1:
            out[tensor.name] = array
    return out


def model_from_onnx(arch, path, dtype):
    """The transformers model for `arch`, its weights read from the ONNX file
    (not from torch's RNG), converted to `dtype`."""
    torch.manual_seed(SEED)
    wrapper = LogitsOnly(ARCHS[arch]()).eval()
    weights = onnx_parameters(path)
    params = dict(wrapper.named_parameters())  # a tied weight once
    missing = sorted(set(params) - set(weights))
    extra = sorted(set(weights) - set(params))
    if missing or extra:
        raise SystemExit(f"{path}: torch parameters without an initializer {missing}, "
                         f"initializers without a torch parameter {extra}")
    with torch.no_grad():
        for name, param in params.items():
            if tuple(param.shape) != weights[name].shape:
                raise SystemExit(f"{path}: {name} is {list(weights[name].shape)} in ONNX, "
                                 f"{list(param.shape)} in torch")
            param.copy_(torch.from_numpy(weights[name].copy()))
    return wrapper.to(dtype), list(weights)


def causal_lm_loss(logits, labels):
    """Hugging Face's causal-LM loss: targets are labels shifted left by one."""
    vocab = logits.shape[-1]
    return torch.nn.functional.cross_entropy(
        logits[:, :-1, :].reshape(-1, vocab), labels[:, 1:].reshape(-1))


def loss_and_gradients(wrapper, ids, labels=None):
    wrapper.zero_grad(set_to_none=True)
    ids = torch.from_numpy(ids)
    labels = ids if labels is None else torch.from_numpy(labels)
    with default_dtype(next(wrapper.parameters()).dtype):
        loss = causal_lm_loss(wrapper(ids), labels)
        loss.backward()
    grads = {}
    for name, param in wrapper.named_parameters():
        grads[name] = (param.grad.detach().numpy().copy() if param.grad is not None
                       else np.zeros(tuple(param.shape), dtype=np.float64))
    return float(loss.item()), grads


def finite_differences(wrapper, names, closure, grads, what=""):
    """Central differences of the float64 loss `closure()` at the largest |g|
    and one fixed other entry of the first, middle and last parameter;
    returns the worst |fd - g| / max |g| of the tensor (exits when it is
    over 1e-6, naming `what`)."""
    params = dict(wrapper.named_parameters())
    worst = 0.0
    rng = np.random.default_rng(11)
    for name in (names[0], names[len(names) // 2], names[-1]):
        g = grads[name]
        flat = params[name].data.view(-1)
        for index in (int(np.argmax(np.abs(g))), int(rng.integers(0, g.size))):
            saved = float(flat[index])
            values = []
            for delta in (FD_EPS, -FD_EPS):
                flat[index] = saved + delta
                with torch.no_grad():
                    values.append(float(closure()))
            flat[index] = saved
            fd = (values[0] - values[1]) / (2 * FD_EPS)
            worst = max(worst, abs(fd - g.reshape(-1)[index]) / float(np.abs(g).max()))
    if not worst <= 1e-6:
        prefix = f"{what}: " if what else ""
        raise SystemExit(f"{prefix}finite differences disagree with autograd: {worst:.3e}")
    return worst


def finite_difference_check(wrapper, ids, grads, names):
    """finite_differences() of the causal-LM loss on `ids`, in float64."""
    ids_t = torch.from_numpy(ids)

    def loss():
        with default_dtype(torch.float64):
            return causal_lm_loss(wrapper(ids_t), ids_t)

    return finite_differences(wrapper, names, loss, grads)


def train_curve(arch, path, tokens, curve, split, dtype):
    """Per-step losses, lrs and row offsets of TRAIN_STEPS optimizer steps of
    a fresh model (see above)."""
    with default_dtype(dtype):
        return train_steps(model_from_onnx(arch, path, dtype)[0], tokens, curve, split)


def train_steps(wrapper, tokens, curve, split):
    import batches
    _, optimizer_name, lr, beta1, beta2, eps, weight_decay, warmup, clip = curve
    batch, k_steps, world = split
    wrapper.train()  # every dropout probability is 0: same as eval
    params = [p for _, p in wrapper.named_parameters()]
    if optimizer_name == "sgd":
        optimizer = torch.optim.SGD(params, lr=lr, momentum=beta1,
                                    weight_decay=weight_decay, foreach=False)
    else:
        optimizer = torch.optim.AdamW(params, lr=lr, betas=(beta1, beta2), eps=eps,
                                      weight_decay=weight_decay, foreach=False)
    losses, lrs, offsets = [], [], []
    for step in range(TRAIN_STEPS):
        step_lr = lr * min(1.0, (step + 1) / warmup) if warmup > 0 else lr
        for group in optimizer.param_groups:
            group["lr"] = step_lr
        rows = batches.step_offsets(TRAIN_SEED, step, batch * k_steps * world,
                                    len(tokens), TRAIN_SEQ_LEN)
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for micro in range(k_steps):
            for rank in range(world):
                picked = [rows[q] for q in batches.micro_batch_rows(micro, rank, world, batch)]
                x = torch.from_numpy(np.stack(
                    [tokens[o:o + TRAIN_SEQ_LEN] for o in picked]).astype(np.int64))
                loss = causal_lm_loss(wrapper(x), x)
                loss.backward()
                total += float(loss.item())
        with torch.no_grad():
            for p in params:
                p.grad.mul_(1.0 / (k_steps * world))
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip, foreach=False)
        optimizer.step()
        losses.append(total / (k_steps * world))
        lrs.append(step_lr)
        offsets.append(rows)
    return np.array(losses), np.array(lrs), np.array(offsets, dtype=np.int64)


def golden_versions():
    """The versions line a golden records (python, torch, transformers,
    numpy), printed; a warning on stderr when torch or transformers is not
    the fixtures' (TESTED_VERSIONS)."""
    import transformers
    versions = (f"python {sys.version.split()[0]}, torch {torch.__version__}, "
                f"transformers {transformers.__version__}, numpy {np.__version__}")
    print(versions)
    for k, v in (("torch", torch.__version__), ("transformers", transformers.__version__)):
        if v.split("+")[0] != TESTED_VERSIONS[k]:
            print(f"WARNING: {k} {v} differs from the fixtures' {TESTED_VERSIONS[k]}",
                  file=sys.stderr)
    return versions


def save_npz_deterministic(path, arrays):
    """np.savez, but with fixed zip timestamps so reruns give identical bytes."""
    import zipfile
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for key, value in arrays.items():
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.asanyarray(value), allow_pickle=False)
            z.writestr(info, buffer.getvalue(), compresslevel=9)
    os.replace(tmp, path)


def gradient_bound_ratio(approx, exact):
    """max over tensors of max |approx - exact| / bound, with test/train/
    check_gradients.py's bound: 1e-4 * max |exact| of the tensor + 1e-6 * the
    largest |exact| of any tensor (the floor is for gradients that are zero
    analytically, as attention's key bias: float32 leaves ~1e-10 there)."""
    largest = max(float(np.abs(g).max()) for g in exact.values())
    return max(float(np.abs(approx[k] - exact[k]).max())
               / (1e-4 * float(np.abs(exact[k]).max()) + 1e-6 * largest) for k in exact)


def produce_golden(name, arch, models_dir, out_dir, tokens, versions):
    path = os.path.join(models_dir, f"{name}.onnx")
    if name in GOLDEN_SHARED:
        other = GOLDEN_SHARED[name]
        mine = onnx_parameters(path)
        theirs = onnx_parameters(os.path.join(models_dir, f"{other}.onnx"))
        if list(mine) != list(theirs) or any(
                not np.array_equal(mine[k], theirs[k]) for k in mine):
            raise SystemExit(f"{name}: weights differ from {other}; it needs its own golden")
        print(f"== {name}: same parameters as {other}; shares goldens/{other}.npz")
        return
    print(f"== {name} ({arch})")
    ids = np.random.default_rng(GOLDEN_IDS_SEED).integers(
        0, VOCAB, size=GOLDEN_IDS_SHAPE, dtype=np.int64)
    model32, names = model_from_onnx(arch, path, torch.float32)
    # nn.Embedding(padding_idx=p) gives row p no gradient from its lookups;
    # the exported Gather has no such notion (ONNX carries no padding_idx),
    # so the ONNX graph's true gradient differs from torch's in that row
    # whenever p occurs in the input. Goldens avoid the pad token (OPT's is
    # 1): both then agree on what the gradient of this graph is.
    pad = model32.model.config.pad_token_id
    if pad is not None:
        ids[ids == pad] = (pad + 1) % VOCAB

    # float32, exactly as transformers runs it: our loss is HF's loss.
    with torch.no_grad():
        hf = float(model32.model(input_ids=torch.from_numpy(ids), labels=torch.from_numpy(ids),
                                 use_cache=False).loss)
    loss32, grads32 = loss_and_gradients(model32, ids)
    if not abs(hf - loss32) <= 1e-6 * abs(hf):
        raise SystemExit(f"{name}: causal_lm_loss {loss32} != transformers' loss {hf}")

    model64, _ = model_from_onnx(arch, path, torch.float64)
    loss64, grads64 = loss_and_gradients(model64, ids)
    fd_worst = finite_difference_check(model64, ids, grads64, names)
    f32_grad = gradient_bound_ratio(grads32, grads64)
    f32_loss = abs(loss32 - loss64) / abs(loss64)
    print(f"  loss {loss64:.9f} (transformers float32 {hf:.9f}); float32 torch vs float64: "
          f"loss {f32_loss:.2e}, gradients at {f32_grad:.2e} of the test's bound; "
          f"finite differences vs autograd {fd_worst:.2e}")

    arrays = {"input_ids": ids, "loss": np.float64(loss64),
              "param_names": np.array(names)}
    for k in names:
        arrays["grad:" + k] = grads64[k].astype(np.float32)
    if arch in LABELS_GOLDEN_ARCHS:
        labels = ids.copy()
        labels[LABELS_IGNORED] = -100
        with torch.no_grad():
            hf_labels = float(model32.model(input_ids=torch.from_numpy(ids),
                                            labels=torch.from_numpy(labels),
                                            use_cache=False).loss)
        loss_l, grads_l = loss_and_gradients(model64, ids, labels)
        if not abs(hf_labels - loss_l) <= 1e-5 * abs(loss_l):
            raise SystemExit(f"{name}: loss with labels {loss_l} != transformers' {hf_labels}")
        print(f"  with labels ({int((labels[:, 1:] != -100).sum())} of 14 targets counted): "
              f"loss {loss_l:.9f} (transformers float32 {hf_labels:.9f})")
        arrays["labels"] = labels
        arrays["labels_loss"] = np.float64(loss_l)
        for k in names:
            arrays["labels_grad:" + k] = grads_l[k].astype(np.float32)
    arrays.update({
        "train_data": np.array(os.path.relpath(CORPUS, REPO_ROOT)),
        "train_data_tokens": np.int64(len(tokens)),
        "train_data_sha256": np.array(sha256(CORPUS)),
        "train_seed": np.int64(TRAIN_SEED),
        "train_steps": np.int64(TRAIN_STEPS),
        "train_seq_len": np.int64(TRAIN_SEQ_LEN),
        "train_rows_per_step": np.int64(int(np.prod(TRAIN_REFERENCE_SPLIT))),
        "train_batch": np.int64(TRAIN_REFERENCE_SPLIT[0]),
        "train_grad_accum": np.int64(TRAIN_REFERENCE_SPLIT[1]),
        "train_world": np.int64(TRAIN_REFERENCE_SPLIT[2]),
    })
    f32_curve = 0.0
    for curve in CURVES:
        cname = curve[0]
        losses, lrs, offsets = train_curve(arch, path, tokens, curve, TRAIN_REFERENCE_SPLIT,
                                           torch.float64)
        for split in TRAIN_OTHER_SPLITS:
            other, _, other_offsets = train_curve(arch, path, tokens, curve, split, torch.float64)
            if not (np.array_equal(other_offsets, offsets)
                    and np.allclose(other, losses, rtol=1e-12, atol=0)):
                raise SystemExit(f"{name} {cname}: split B,K,N={split} gives {other}, "
                                 f"not {losses}")
        losses32, _, _ = train_curve(arch, path, tokens, curve, TRAIN_REFERENCE_SPLIT,
                                     torch.float32)
        worst = float(np.max(np.abs(losses32 - losses) / np.abs(losses)))
        f32_curve = max(f32_curve, worst)
        print(f"  {cname:14s} losses {' '.join(f'{v:.9f}' for v in losses)}  "
              f"lr {' '.join(f'{v:g}' for v in lrs)}  float32 torch rel err {worst:.2e}")
        arrays["train_offsets"] = offsets
        arrays["curve:" + cname] = losses
        arrays["curve_lr:" + cname] = lrs
        arrays["curve_optimizer:" + cname] = np.array(curve[1])
        arrays["curve_hyper:" + cname] = np.array(curve[2:], dtype=np.float64)
    arrays.update({"f32_grad_bound_ratio": np.float64(f32_grad), "f32_loss_rel": np.float64(f32_loss),
                   "f32_curve_worst": np.float64(f32_curve),
                   "versions": np.array(versions)})
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, f"{name}.npz")
    save_npz_deterministic(target, arrays)
    shown = os.path.relpath(target, REPO_ROOT)
    shown = target if shown.startswith("..") else shown
    print(f"  wrote {shown}: {os.path.getsize(target)} bytes, sha256 {sha256(target)[:16]}")


def train_goldens(wanted, models_dir, out_dir, versions):
    sys.path.insert(0, os.path.join(REPO_ROOT, "test", "train"))
    import batches
    batches.self_test()
    tokens = np.fromfile(CORPUS, dtype="<u2")
    torch.use_deterministic_algorithms(True)
    with float64_exact():
        for name, arch, _, _ in FIXTURES:
            if name in wanted:
                produce_golden(name, arch, models_dir, out_dir, tokens, versions)
    print("all goldens written")


# ===========================================================================
# Row goldens (--row-goldens): the oracle of test/train/check_rows.py.
# ===========================================================================
#
# Supervised fine-tuning data is rows [R, T] with labels, -100 on the prompt
# and the padding (zrun train --data ROWS.npy --labels LABELS.npy). Written:
#
#   goldens/sft-rows.npy    int64 [10, 16]: per row a prompt of 2-6 tokens, a
#                           response of 3 or more, padded with 0 to T = 16 (row
#                           0 unpadded); tokens in [1, 256), numpy
#                           default_rng(19)
#   goldens/sft-labels.npy  int64 [10, 16]: the row, -100 on prompt and padding
#                           (so row i counts its response length of targets,
#                           3 to 12: different in every micro-batch)
#   goldens/llama-opset17-rows.npz, for the llama-opset17 fixture (its weights
#   read from the ONNX file into transformers' LlamaForCausalLM):
#     rows_sha256, labels_sha256   of the two files above
#     seed, steps, lr, global_rows  5 steps of SGD(lr=0.1) of G = 4 rows
#     curve:<name>   float64 [5], the loss zrun train logs per step
#     order:<name>   int64 [5, 4], the file rows of each step (batches.py)
#     split:<name>   int64 [3], the (B, K, N) the curve was computed with
#     hf_loss:<name> float32 [], transformers' float32
#                    model(input_ids, labels=labels).loss on step 1's first
#                    micro-batch (equal to curve:<name>[0] for B = 4)
#     token_weighted_step1  float64: HF's loss of step 1's 4 rows as one batch
#                    (the mean over all their counted targets)
#     ort_logits_rel  the largest |onnxruntime - torch| logit over the rows,
#                    relative to the largest |torch| logit
#     versions
#   with the curves
#     labels_b4    --labels, file order, one micro-batch of B = 4 (N = K = 1)
#     labels_b2    --labels, file order, micro-batches of B = 2 (N = 2 or K = 2)
#     shuffle_b4   --labels --shuffle --seed 5, B = 4
#     shuffle_b2   --labels --shuffle --seed 5, B = 2
#     nolabels_b4  no labels file: labels = the rows, file order, B = 4
#
# zrun's contract, followed here: step s reads rows batches.step_rows(seed,
# shuffle, s, R, G) (10 rows, 4 a step: 2 steps an epoch, 2 rows of each
# epoch dropped; step 5 starts the third epoch); micro-step k of rank r takes
# global rows [(k*N + r)*B, ...); each micro-batch's loss is HF's loss on its
# B rows (the mean over its counted targets); their gradients are summed and
# scaled by 1/(K*N), then one SGD step; the logged loss is the mean of the
# K*N micro-batch losses. With rows of different target counts that mean is
# not HF's loss of the 4 rows as one batch (token_weighted_step1), so a
# curve depends on B (not on how K and N split G / B: checked below).
#
# Checked before anything is written: the model rebuilt from the ONNX
# initializers gives llama-opset17.npz's committed loss (1e-9); onnxruntime's
# logits on the rows match torch's (1e-5 relative); transformers' float32
# loss equals the float64 oracle's on every micro-batch of step 1 (1e-5);
# labels_b2 is the same (1e-12) for (B, K, N) = (2, 1, 2) and (2, 2, 1).
# Last run with torch 2.15.0 (CPU) and transformers 4.57.6 (the versions go
# into the .npz); the weights come from the ONNX file, not from torch's RNG.

ROWS_NAME = "llama-opset17"
ROWS_ARCH = "llama"
ROWS_SHAPE = (10, 16)
ROWS_RNG = 19
ROWS_SEED = 5
ROWS_STEPS = 5
ROWS_LR = 0.1
ROWS_GLOBAL = 4
# name -> (labels file, shuffle, (B, K, N))
ROW_CURVES = {
    "labels_b4": (True, False, (4, 1, 1)),
    "labels_b2": (True, False, (2, 1, 2)),
    "shuffle_b4": (True, True, (4, 1, 1)),
    "shuffle_b2": (True, True, (2, 1, 2)),
    "nolabels_b4": (False, False, (4, 1, 1)),
}


def make_rows():
    """The SFT rows and their labels (see above)."""
    rng = np.random.default_rng(ROWS_RNG)
    count, length = ROWS_SHAPE
    rows = np.zeros(ROWS_SHAPE, dtype=np.int64)
    labels = np.full(ROWS_SHAPE, -100, dtype=np.int64)
    for i in range(count):
        prompt = int(rng.integers(2, 7))
        response = length - prompt if i == 0 else int(rng.integers(3, length - prompt + 1))
        used = prompt + response
        rows[i, :used] = rng.integers(1, VOCAB, size=used)
        labels[i, prompt:used] = rows[i, prompt:used]
    return rows, labels


def row_curve(wrapper, rows, labels, shuffle, split):
    """Losses and file rows of ROWS_STEPS SGD steps (zrun's contract, above)."""
    import batches
    batch, k_steps, world = split
    wrapper.train()  # every dropout probability is 0: same as eval
    params = [p for _, p in wrapper.named_parameters()]
    optimizer = torch.optim.SGD(params, lr=ROWS_LR, foreach=False)
    losses, orders = [], []
    for step in range(ROWS_STEPS):
        picked = batches.step_rows(ROWS_SEED if shuffle else 0, shuffle, step,
                                   len(rows), batch * k_steps * world)
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for micro in range(k_steps):
            for rank in range(world):
                index = [picked[q] for q in batches.micro_batch_rows(micro, rank, world, batch)]
                loss = causal_lm_loss(wrapper(torch.from_numpy(rows[index])),
                                      torch.from_numpy(labels[index]))
                loss.backward()
                total += float(loss.item())
        with torch.no_grad():
            for p in params:
                p.grad.mul_(1.0 / (k_steps * world))
        optimizer.step()
        losses.append(total / (k_steps * world))
        orders.append(picked)
    return np.array(losses), np.array(orders, dtype=np.int64)


def row_goldens(models_dir, out_dir, versions):
    sys.path.insert(0, os.path.join(REPO_ROOT, "test", "train"))
    import batches
    batches.self_test()
    torch.use_deterministic_algorithms(True)
    path = os.path.join(models_dir, f"{ROWS_NAME}.onnx")
    rows, labels = make_rows()
    counted = (labels[:, 1:] != -100).sum(axis=1)
    print(f"== rows {list(rows.shape)}; counted targets per row: {counted.tolist()}")
    arrays = {"seed": np.int64(ROWS_SEED), "steps": np.int64(ROWS_STEPS),
              "lr": np.float64(ROWS_LR), "global_rows": np.int64(ROWS_GLOBAL)}
    with float64_exact():
        model32, _ = model_from_onnx(ROWS_ARCH, path, torch.float32)
        model64, _ = model_from_onnx(ROWS_ARCH, path, torch.float64)
        # The rebuilt model is the one the train goldens were made from.
        golden = np.load(os.path.join(models_dir, "goldens", f"{ROWS_NAME}.npz"))
        with default_dtype(torch.float64), torch.no_grad():
            ids = torch.from_numpy(golden["input_ids"])
            again = float(causal_lm_loss(model64(ids), ids))
        if not abs(again - float(golden["loss"])) <= 1e-9 * abs(again):
            raise SystemExit(f"rebuilt {ROWS_NAME}: loss {again} != the golden's "
                             f"{float(golden['loss'])}")
        with torch.no_grad():
            ref = model32(torch.from_numpy(rows)).numpy()
        (got,) = ort_session(path).run(["logits"], {"input_ids": rows})
        ort_rel = relative_error(got, ref)
        if not ort_rel <= 1e-5:
            raise SystemExit(f"onnxruntime's logits differ from torch's by {ort_rel:.2e}")
        print(f"  rebuilt from the ONNX initializers: golden loss {again:.12f}; "
              f"onnxruntime vs torch logits {ort_rel:.2e}")
        for name, (with_labels, shuffle, split) in ROW_CURVES.items():
            targets = labels if with_labels else rows
            with default_dtype(torch.float64):
                losses, orders = row_curve(model_from_onnx(ROWS_ARCH, path, torch.float64)[0],
                                           rows, targets, shuffle, split)
            batch = split[0]
            first = orders[0][:batch]
            with torch.no_grad():
                hf = float(model32.model(input_ids=torch.from_numpy(rows[first]),
                                         labels=torch.from_numpy(targets[first]),
                                         use_cache=False).loss)
                for start in range(0, ROWS_GLOBAL, batch):
                    part = orders[0][start:start + batch]
                    hf_part = float(model32.model(input_ids=torch.from_numpy(rows[part]),
                                                  labels=torch.from_numpy(targets[part]),
                                                  use_cache=False).loss)
                    with default_dtype(torch.float64):
                        exact = float(causal_lm_loss(model64(torch.from_numpy(rows[part])),
                                                     torch.from_numpy(targets[part])))
                    if not abs(hf_part - exact) <= 1e-5 * abs(exact):
                        raise SystemExit(f"{name}: transformers' loss {hf_part} on rows {part} "
                                         f"!= the oracle's {exact}")
            if name == "labels_b2":
                with default_dtype(torch.float64):
                    other, other_orders = row_curve(
                        model_from_onnx(ROWS_ARCH, path, torch.float64)[0], rows, targets,
                        shuffle, (2, 2, 1))
                if not (np.array_equal(other_orders, orders)
                        and np.allclose(other, losses, rtol=1e-12, atol=0)):
                    raise SystemExit(f"{name}: (B, K, N) = (2, 2, 1) gives {other}, not {losses}")
            print(f"  {name:12s} B,K,N={split}  losses "
                  + " ".join(f"{v:.9f}" for v in losses)
                  + f"  (transformers float32, step 1, first micro-batch: {hf:.9f})")
            arrays["curve:" + name] = losses
            arrays["order:" + name] = orders
            arrays["split:" + name] = np.array(split, dtype=np.int64)
            arrays["hf_loss:" + name] = np.float32(hf)
        with default_dtype(torch.float64), torch.no_grad():
            step1 = arrays["order:labels_b4"][0]
            weighted = float(causal_lm_loss(model64(torch.from_numpy(rows[step1])),
                                            torch.from_numpy(labels[step1])))
        print(f"  step 1 (rows {step1.tolist()}): HF's loss of the 4 rows as one batch "
              f"{weighted:.9f}; mean of the two 2-row micro-batches' losses "
              f"{arrays['curve:labels_b2'][0]:.9f}")
    os.makedirs(out_dir, exist_ok=True)
    rows_path = os.path.join(out_dir, "sft-rows.npy")
    labels_path = os.path.join(out_dir, "sft-labels.npy")
    np.save(rows_path, rows)
    np.save(labels_path, labels)
    arrays.update({"token_weighted_step1": np.float64(weighted),
                   "ort_logits_rel": np.float64(ort_rel),
                   "rows_sha256": np.array(sha256(rows_path)),
                   "labels_sha256": np.array(sha256(labels_path)),
                   "versions": np.array(versions)})
    target = os.path.join(out_dir, f"{ROWS_NAME}-rows.npz")
    save_npz_deterministic(target, arrays)
    for written in (rows_path, labels_path, target):
        shown = os.path.relpath(written, REPO_ROOT)
        shown = written if shown.startswith("..") else shown
        print(f"  wrote {shown}: {os.path.getsize(written)} bytes, "
              f"sha256 {sha256(written)[:16]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", default=DEFAULT_OUT_DIR)
    ap.add_argument("--only", action="append", metavar="NAME",
                    help="fixture name(s) to produce, e.g. llama-opset17 (repeatable)")
    ap.add_argument("--train-goldens", action="store_true",
                    help="write test/models/goldens/*.npz from the ONNX files in --out-dir "
                         "instead of exporting them")
    ap.add_argument("--row-goldens", action="store_true",
                    help="write the rows, labels and loss curves of test/train/"
                         "check_rows.py into <out-dir>/goldens instead of exporting")
    ap.add_argument("--golden-dir", default=None,
                    help="with --train-goldens or --row-goldens: where the goldens go "
                         "(default: <out-dir>/goldens)")
    args = ap.parse_args()

    versions = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": ort.__version__,
    }
    print("python " + sys.version.split()[0] + ", "
          + ", ".join(f"{k} {v}" for k, v in versions.items()))
    for k, v in versions.items():
        if v.split("+")[0] != TESTED_VERSIONS[k]:
            print(f"WARNING: {k} {v} differs from the tested {TESTED_VERSIONS[k]}; "
                  "graphs may differ from the committed ones", file=sys.stderr)

    names = [f[0] for f in FIXTURES] + [f[0] for f in KV_FIXTURES]
    wanted = args.only or names
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        ap.error(f"unknown fixture(s) {unknown}; known: {names}")
    os.makedirs(args.out_dir, exist_ok=True)
    torch.set_num_threads(1)
    if args.row_goldens:
        row_goldens(args.out_dir, args.golden_dir or os.path.join(args.out_dir, "goldens"),
                    "python " + sys.version.split()[0] + ", "
                    + ", ".join(f"{k} {v}" for k, v in versions.items())
                    + f", numpy {np.__version__}")
        return
    if args.train_goldens:
        train_goldens(wanted, args.out_dir,
                      args.golden_dir or os.path.join(args.out_dir, "goldens"),
                      "python " + sys.version.split()[0] + ", "
                      + ", ".join(f"{k} {v}" for k, v in versions.items())
                      + f", numpy {np.__version__}")
        return

    cache = {}
    for name, arch, opset, external in FIXTURES:
        if name in wanted:
            produce(name, arch, opset, external, args.out_dir, cache)
    for name, arch, opset in KV_FIXTURES:
        if name in wanted:
            produce_kv(name, arch, opset, args.out_dir)
    print("all fixtures verified")


if __name__ == "__main__":
    main()
