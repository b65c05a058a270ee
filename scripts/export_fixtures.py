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


class LogitsOnly(torch.nn.Module):
    """input_ids -> logits; no cache, no attention mask, tuple outputs."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False, return_dict=False)[0]


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", default=DEFAULT_OUT_DIR)
    ap.add_argument("--only", action="append", metavar="NAME",
                    help="fixture name(s) to produce, e.g. llama-opset17 (repeatable)")
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

    names = [f[0] for f in FIXTURES]
    wanted = args.only or names
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        ap.error(f"unknown fixture(s) {unknown}; known: {names}")
    os.makedirs(args.out_dir, exist_ok=True)
    torch.set_num_threads(1)

    cache = {}
    for name, arch, opset, external in FIXTURES:
        if name in wanted:
            produce(name, arch, opset, external, args.out_dir, cache)
    print("all fixtures verified")


if __name__ == "__main__":
    main()
