#!/usr/bin/env python3
"""Real-exporter fixtures: tiny Hugging Face causal LMs exported three ways.

Builds tiny causal LMs of ten families from `transformers` configs with random,
seeded weights (nothing is downloaded: HF_HUB_OFFLINE=1) and exports each
three ways, the ways users export them:

  ts17     torch.onnx.export(..., dynamo=False, opset_version=17), input_ids
           only -> logits (the TorchScript exporter with its defaults:
           constant folding on; eager attention; with optimum's vmap-free
           attention-mask functions, without which the TorchScript exporter
           fails on transformers 4.57: see traceable_masks);
  dynamo   torch.onnx.export(..., dynamo=True) at its default opset, input_ids
           only -> logits, batch and sequence dynamic (eager attention); the
           nodes' stack-trace metadata is dropped (strip_stack_traces);
  optimum  optimum's `text-generation-with-past` export (optimum.exporters.onnx.
           main_export of a model written with save_pretrained into a temporary
           directory; SDPA attention, optimum's default): input_ids,
           attention_mask, position_ids (where the family takes them),
           past_key_values.{i}.key|value in; logits, present.{i}.key|value out.

Each export is checked against torch with onnxruntime before it is kept.

Modes:

  scripts/make_real_fixtures.sh [ARGS]   creates .venv-fixtures/ (pinned
                                         versions, below) and runs this script
  --census DIR     export every family into DIR/<family>/, check with
                   onnxruntime, print each graph's op census (op types with
                   counts, domains, opsets, IR version, initializers that are
                   not parameters under their own name, buffers kept as
                   initializers); with --zcc, also compile each export with zcc
                   --mode infer, train and generate and print zcc's first error
                   line per mode; --census-md FILE writes the same as Markdown
  (default)        write the committed fixtures and goldens under
                   test/models/real/ for FIXTURE_FAMILIES (the comment block
                   "Committed fixtures and goldens" below says what each file
                   holds and how the weights' seeds were chosen); the bytes are
                   reproducible (a rerun writes identical files)
  --search-seeds   choose each family's (seed, scale) again, then write
  --only FAMILY    (repeatable) restrict to these families

Run: scripts/make_real_fixtures.sh [ARGS] (about 3 minutes for all nine
families on 2 cores; the census about 4).

Versions: see TESTED_VERSIONS; the script prints the versions it runs with and
warns when they differ (other versions produce other graphs).
"""

import os

# Must be set before transformers is imported: never touch the network.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import collections
import contextlib
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort
import torch
import transformers

# The sibling script's writer: fixed zip timestamps, so reruns give identical
# bytes.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_fixtures import save_npz_deterministic  # noqa: E402

TESTED_VERSIONS = {
    "torch": "2.15.0",
    "transformers": "4.57.6",
    "optimum": "2.1.0",
    "optimum-onnx": "0.1.0",
    "onnxscript": "0.7.2",
    "onnx": "1.23.2",
    "onnxruntime": "1.32.0",
}

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

VOCAB = 256
HIDDEN = 64
LAYERS = 2
HEADS = 4
HEAD_DIM = 16
INTERMEDIATE = 128
MAX_POS = 64
TOLERANCE = 1e-4  # max |ort - torch| / max |torch|
CHECK_SHAPES = [(2, 16), (1, 7)]
EXPORT_SHAPE = (2, 16)


# ---------------------------------------------------------------------------
# Families: tiny configs (2 layers, hidden 64, 4 heads of 16, vocab 256, 64
# positions, intermediate 128). Token ids 0..3 are the special tokens.
# ---------------------------------------------------------------------------

def common(**kw):
    base = dict(vocab_size=VOCAB, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    base.update(kw)
    return base


def cfg_gpt2():
    return transformers.GPT2Config(**common(
        n_positions=MAX_POS, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_inner=INTERMEDIATE,
        activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        tie_word_embeddings=True))


def llama_like(cls, kv_heads, tie, **extra):
    return cls(**common(
        hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=kv_heads, head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POS, rms_norm_eps=1e-6, rope_theta=10000.0,
        attention_dropout=0.0, tie_word_embeddings=tie, **extra))


def cfg_llama():
    return llama_like(transformers.LlamaConfig, 2, False, hidden_act="silu")


def cfg_llama_tied():
    return llama_like(transformers.LlamaConfig, 1, True, hidden_act="silu")


def cfg_qwen2():
    return llama_like(transformers.Qwen2Config, 2, False, hidden_act="silu",
                      use_sliding_window=False)


def cfg_qwen3():
    return llama_like(transformers.Qwen3Config, 2, False, hidden_act="silu",
                      use_sliding_window=False)


def cfg_mistral():
    return llama_like(transformers.MistralConfig, 2, False, hidden_act="silu",
                      sliding_window=None)


def cfg_phi3():
    return transformers.Phi3Config(**common(
        hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=2, max_position_embeddings=MAX_POS,
        original_max_position_embeddings=MAX_POS, rms_norm_eps=1e-5, rope_theta=10000.0,
        resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0, hidden_act="silu",
        sliding_window=None, tie_word_embeddings=False))


def cfg_gptneox():
    return transformers.GPTNeoXConfig(**common(
        hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, max_position_embeddings=MAX_POS, rotary_pct=0.25,
        rotary_emb_base=10000, hidden_act="gelu", use_parallel_residual=True,
        attention_dropout=0.0, hidden_dropout=0.0, layer_norm_eps=1e-5,
        tie_word_embeddings=False))


def cfg_opt():
    return transformers.OPTConfig(**common(
        hidden_size=HIDDEN, num_hidden_layers=LAYERS, ffn_dim=INTERMEDIATE,
        num_attention_heads=HEADS, max_position_embeddings=MAX_POS, word_embed_proj_dim=HIDDEN,
        do_layer_norm_before=True, activation_function="relu", enable_bias=True, dropout=0.0,
        attention_dropout=0.0, layerdrop=0.0, tie_word_embeddings=True, pad_token_id=1,
        bos_token_id=2, eos_token_id=2))


def cfg_gemma():
    return transformers.GemmaConfig(**common(
        hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=2, head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POS, rms_norm_eps=1e-6, rope_theta=10000.0,
        hidden_activation="gelu_pytorch_tanh", attention_dropout=0.0,
        tie_word_embeddings=True))


def cfg_phi():
    return transformers.PhiConfig(**common(
        hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=HEADS, max_position_embeddings=MAX_POS,
        partial_rotary_factor=0.5, rope_theta=10000.0, hidden_act="gelu_new",
        resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0, layer_norm_eps=1e-5,
        qk_layernorm=False, tie_word_embeddings=False))


FAMILIES = {
    "gpt2": cfg_gpt2,
    "llama": cfg_llama,
    "llama-tied": cfg_llama_tied,
    "qwen2": cfg_qwen2,
    "qwen3": cfg_qwen3,
    "mistral": cfg_mistral,
    "phi3": cfg_phi3,
    "gptneox": cfg_gptneox,
    "opt": cfg_opt,
    "gemma": cfg_gemma,
    "phi": cfg_phi,
}
EXPORTERS = ["ts17", "dynamo", "optimum"]


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------

def build_model(family, seed, scale, attn="eager"):
    """The family's model: the library's own init under torch.manual_seed(seed),
    then every parameter + normal(0, scale) from a generator seeded seed + 1
    (named_parameters() yields a tied tensor once, so ties stay tied)."""
    cfg = FAMILIES[family]()
    cfg.use_cache = False
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=attn)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for _, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * scale)
    model.eval()
    return model


class LogitsOnly(torch.nn.Module):
    """input_ids -> logits; no cache, no attention mask."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False, return_dict=False)[0]


def tied_pairs(model):
    """(name, name) of parameters that are the same tensor."""
    seen, pairs = {}, []
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen:
            pairs.append((seen[id(p)], name))
        else:
            seen[id(p)] = name
    return pairs


# ---------------------------------------------------------------------------
# Exports
# ---------------------------------------------------------------------------

@contextlib.contextmanager
def traceable_masks():
    """transformers >= 4.53 builds attention masks with torch.vmap, which the
    TorchScript tracer cannot trace (torch.jit.trace fails with `IndexError:
    unordered_map::at` in masking_utils.sdpa_mask_recent_torch, for every
    family). optimum's ModelPatcher swaps in vmap-free mask functions and a
    traceable find_packed_sequence_indices; so does this, with optimum's own
    functions, for the TorchScript export only."""
    from optimum.exporters.onnx import model_patcher as mp
    from transformers import masking_utils as mu
    registry = mu.ALL_MASK_ATTENTION_FUNCTIONS
    saved = (registry["sdpa"], registry["eager"], mu.find_packed_sequence_indices)
    registry.register("sdpa", mp.sdpa_mask_without_vmap)
    registry.register("eager", mp.eager_mask_without_vmap)
    mu.find_packed_sequence_indices = mp.find_packed_sequence_indices_patched
    try:
        yield
    finally:
        registry.register("sdpa", saved[0])
        registry.register("eager", saved[1])
        mu.find_packed_sequence_indices = saved[2]


def export_ts17(model, path):
    wrapper = LogitsOnly(model).eval()
    example = torch.zeros(EXPORT_SHAPE, dtype=torch.int64)
    with warnings.catch_warnings(), traceable_masks():
        warnings.simplefilter("ignore")
        with torch.no_grad():
            torch.onnx.export(
                wrapper, (example,), path, dynamo=False, opset_version=17,
                input_names=["input_ids"], output_names=["logits"],
                dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                              "logits": {0: "batch", 1: "sequence"}})
    return "dynamic batch, sequence"


def export_dynamo(model, path):
    wrapper = LogitsOnly(model).eval()
    example = torch.randint(4, VOCAB, EXPORT_SHAPE, dtype=torch.int64,
                            generator=torch.Generator().manual_seed(5))
    batch = torch.export.Dim("batch", min=1, max=64)
    seq = torch.export.Dim("sequence", min=2, max=MAX_POS)
    notes = "dynamic batch, sequence"
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()) as quiet:
        warnings.simplefilter("ignore")
        try:
            program = torch.onnx.export(
                wrapper, (example,), dynamo=True, input_names=["input_ids"],
                output_names=["logits"],
                dynamic_shapes={"input_ids": {0: batch, 1: seq}})
        except Exception as error:  # noqa: BLE001 - fall back to a static export
            notes = f"static {EXPORT_SHAPE} (dynamic failed: {type(error).__name__}: " \
                    f"{str(error).splitlines()[0][:160]})"
            program = torch.onnx.export(wrapper, (example,), dynamo=True,
                                        input_names=["input_ids"], output_names=["logits"])
    del quiet
    proto = program.model_proto
    strip_stack_traces(proto)
    onnx.save_model(proto, path)
    return notes


def strip_stack_traces(proto):
    """Drops the dynamo exporter's per-node `pkg.torch.onnx.stack_trace`
    metadata: Python stack traces with this machine's paths and this script's
    line numbers (about 130 KB a file), which would make the bytes change with
    every edit of the script. Nothing else is changed: the other metadata
    (name_scopes, class_hierarchy, fx_node, namespace) stays."""
    graphs = [proto.graph] + list(proto.functions)
    while graphs:
        graph = graphs.pop()
        for node in graph.node:
            kept = [p for p in node.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
            del node.metadata_props[:]
            node.metadata_props.extend(kept)
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    graphs.append(attribute.g)
                graphs.extend(attribute.graphs)


def export_optimum(family, seed, scale, path):
    from optimum.exporters.onnx import main_export
    model = build_model(family, seed, scale, attn="sdpa")
    model.config.use_cache = True
    tmp = tempfile.mkdtemp(prefix=f"zplan-{family}-")
    try:
        src = os.path.join(tmp, "hf")
        out = os.path.join(tmp, "onnx")
        model.save_pretrained(src)
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()) as err:
            warnings.simplefilter("ignore")
            try:
                main_export(src, out, task="text-generation-with-past", device="cpu",
                            do_validation=False, library_name="transformers")
            except Exception:
                sys.stderr.write(err.getvalue()[-3000:])
                raise
        files = sorted(os.listdir(out))
        onnx_files = [f for f in files if f.endswith(".onnx")]
        if onnx_files != ["model.onnx"]:
            raise RuntimeError(f"optimum wrote {files}")
        # Inline any external data so that the fixture is one file.
        proto = onnx.load_model(os.path.join(out, "model.onnx"), load_external_data=True)
        onnx.save_model(proto, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return "optimum main_export text-generation-with-past, sdpa"


# ---------------------------------------------------------------------------
# Checks against torch
# ---------------------------------------------------------------------------

def ort_session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def rel(got, ref):
    return float(np.max(np.abs(got - ref))) / float(np.max(np.abs(ref)))


def check_plain(path, model, static_shape=None):
    sess = ort_session(path)
    gen = torch.Generator().manual_seed(77)
    worst = 0.0
    for shape in ([static_shape] if static_shape else CHECK_SHAPES):
        ids = torch.randint(4, VOCAB, shape, generator=gen, dtype=torch.int64)
        with torch.no_grad():
            ref = model(input_ids=ids, use_cache=False).logits.numpy()
        (got,) = sess.run(["logits"], {"input_ids": ids.numpy()})
        worst = max(worst, rel(got, ref))
    return worst


def graph_inputs(proto):
    inits = {t.name for t in proto.graph.initializer}
    return [i for i in proto.graph.input if i.name not in inits]


def dims_of(value_info):
    out = []
    for d in value_info.type.tensor_type.shape.dim:
        out.append(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?"))
    return out


def cache_feed(proto, batch, seq, past, gen, cfg):
    feed = {}
    ids = torch.randint(4, VOCAB, (batch, seq), generator=gen, dtype=torch.int64)
    for inp in graph_inputs(proto):
        name = inp.name
        if name == "input_ids":
            feed[name] = ids.numpy()
        elif name == "attention_mask":
            feed[name] = np.ones((batch, past + seq), np.int64)
        elif name == "position_ids":
            feed[name] = np.tile(np.arange(past, past + seq, dtype=np.int64), (batch, 1))
        elif name.startswith("past_key_values."):
            d = dims_of(inp)
            heads = d[1] if isinstance(d[1], int) else None
            hd = d[3] if isinstance(d[3], int) else None
            feed[name] = torch.randn((batch, heads, past, hd), generator=gen).numpy()
        else:
            raise RuntimeError(f"unknown input {name}")
    return feed


def check_cache(path, model):
    """ORT vs torch (same weights, eager; SDPA gives the same function) at
    (past, seq) = (0, 5), (5, 1), (5, 3): logits and every present."""
    proto = onnx.load_model(path)
    sess = ort_session(path)
    outs = [o.name for o in proto.graph.output]
    gen = torch.Generator().manual_seed(78)
    worst = 0.0
    layers = model.config.num_hidden_layers
    for past, seq in ((0, 5), (5, 1), (5, 3)):
        feed = cache_feed(proto, 2, seq, past, gen, model.config)
        got = dict(zip(outs, sess.run(outs, feed)))
        cache = transformers.DynamicCache()
        if past:
            for i in range(layers):
                cache.update(torch.from_numpy(feed[f"past_key_values.{i}.key"]),
                             torch.from_numpy(feed[f"past_key_values.{i}.value"]), i)
        kwargs = dict(input_ids=torch.from_numpy(feed["input_ids"]),
                      attention_mask=torch.from_numpy(np.ones((2, past + seq), np.int64)),
                      past_key_values=cache, use_cache=True)
        if "position_ids" in feed:
            kwargs["position_ids"] = torch.from_numpy(feed["position_ids"])
        with torch.no_grad():
            ref = model(**kwargs)
        worst = max(worst, rel(got["logits"], ref.logits.numpy()))
        pkv = ref.past_key_values
        for i in range(layers):
            k, v = (pkv[i][0], pkv[i][1]) if not hasattr(pkv, "layers") else (
                pkv.layers[i].keys, pkv.layers[i].values)
            worst = max(worst, rel(got[f"present.{i}.key"], k.numpy()),
                        rel(got[f"present.{i}.value"], v.numpy()))
    return worst


# ---------------------------------------------------------------------------
# Census
# ---------------------------------------------------------------------------

def all_nodes(graph):
    for n in graph.node:
        yield n
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from all_nodes(a.g)
            for g in a.graphs:
                yield from all_nodes(g)


def op_census(proto):
    counts = collections.Counter()
    for n in all_nodes(proto.graph):
        counts[(n.domain or "", n.op_type)] += 1
    for f in proto.functions:
        for n in f.node:
            counts[(n.domain or "", n.op_type)] += 1
    return counts


def describe_initializers(proto, model):
    """Lines for initializers that are not a parameter under its own name, and
    for buffers kept as initializers or large Constant nodes."""
    params = {k: v.detach().numpy() for k, v in model.named_parameters(remove_duplicate=False)}
    buffers = {k: v.detach().numpy() for k, v in model.named_buffers(remove_duplicate=False)}
    def strip(name):
        for p in ("model.",):
            if name.startswith(p) and name[len(p):] in params:
                return name[len(p):]
        return name

    def identify(arr):
        for pool, kind in ((params, "parameter"), (buffers, "buffer")):
            for k, v in pool.items():
                if v.shape == arr.shape and np.array_equal(v, arr):
                    return f"= {kind} {k}"
                if v.ndim == 2 and v.T.shape == arr.shape and np.array_equal(v.T, arr):
                    return f"= transpose of {kind} {k}"
                if v.size == arr.size and v.size > 4 and np.array_equal(v.ravel(), arr.ravel()):
                    return f"= {kind} {k} reshaped from {list(v.shape)}"
                if v.shape == arr.shape and v.dtype.kind == "f" and np.array_equal(
                        (v + np.float32(1)).astype(v.dtype), arr):
                    return f"= 1 + {kind} {k} (folded)"
        return "derived constant"

    lines, named, other = [], 0, 0
    for init in proto.graph.initializer:
        arr = onnx.numpy_helper.to_array(init)
        if strip(init.name) in params and params[strip(init.name)].shape == arr.shape and \
                np.array_equal(params[strip(init.name)], arr):
            named += 1
            continue
        if arr.size <= 4:
            other += 1
            continue
        lines.append(f"initializer `{init.name}` {arr.dtype}{list(arr.shape)} {identify(arr)}")
    for node in all_nodes(proto.graph):
        if node.op_type != "Constant":
            continue
        for a in node.attribute:
            if a.name == "value" and a.t is not None:
                arr = onnx.numpy_helper.to_array(a.t)
                if arr.size > 4:
                    lines.append(f"Constant `{node.output[0]}` {arr.dtype}{list(arr.shape)} "
                                 f"{identify(arr)}")
    return named, other, lines


# ---------------------------------------------------------------------------
# zcc
# ---------------------------------------------------------------------------

def zcc_try(zcc, path, mode, cache_export, workdir):
    plan = os.path.join(workdir, f"{mode}.zplan")
    cmd = [zcc, path, "--mode", mode, "--world-size", "1", "-o", plan]
    if mode == "infer":
        cmd += ["--input-shape", "input_ids=2x16"]
    elif mode == "train":
        cmd += ["--input-shape", "input_ids=2x8"]
    elif mode == "generate":
        cmd += ["--batch", "2", "--max-seq-len", "32", "--prompt-len", "8"]
    t0 = time.time()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return "TIMEOUT (600 s)"
    if done.returncode == 0:
        return f"ok ({time.time() - t0:.1f} s)"
    lines = [l for l in done.stderr.splitlines() if l.strip()]
    errs = [l for l in lines if "error" in l]
    return (errs or lines or [f"exit {done.returncode}"])[0].strip()


def supported_ops(zcc):
    """zcc --list-ops, when this zcc has it: op type -> "runtime" (imported on
    run-time data) or "constant" (folded only when its inputs are constants)."""
    try:
        done = subprocess.run([zcc, "--list-ops"], capture_output=True, text=True, timeout=60)
    except OSError:
        return None
    if done.returncode != 0:
        return None
    return dict(l.split()[:2] for l in done.stdout.splitlines() if l.strip())


def census(args, versions):
    out_dir = os.path.abspath(args.census)
    os.makedirs(out_dir, exist_ok=True)
    wanted = args.only or list(FAMILIES)
    known = supported_ops(args.ops_zcc or args.zcc) if (args.ops_zcc or args.zcc) else None
    md = ["# Census of real exports", "",
          "Made by `scripts/make_real_fixtures.py --census` "
          f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}); {versions}.", ""]
    summary = []
    for family in wanted:
        fam_dir = os.path.join(out_dir, family)
        os.makedirs(fam_dir, exist_ok=True)
        model = build_model(family, args.seed, args.scale)
        ties = tied_pairs(model)
        md += [f"## {family}", "",
               f"`{type(model).__name__}`; tied: {ties or 'none'}; "
               f"parameters {sum(p.numel() for p in model.parameters())}", ""]
        print(f"== {family} ({type(model).__name__}) tied {ties}", flush=True)
        for exporter in args.exporters:
            path = os.path.join(fam_dir, f"{exporter}.onnx")
            t0 = time.time()
            row = {"family": family, "exporter": exporter}
            try:
                if exporter == "ts17":
                    notes = export_ts17(model, path)
                elif exporter == "dynamo":
                    notes = export_dynamo(model, path)
                else:
                    notes = export_optimum(family, args.seed, args.scale, path)
            except Exception as error:  # noqa: BLE001
                msg = f"{type(error).__name__}: {str(error).strip().splitlines()[-1][:300]}" \
                    if str(error).strip() else type(error).__name__
                print(f"  {exporter}: EXPORT FAILED {msg}", flush=True)
                traceback.print_exc(limit=3)
                md += [f"### {family} / {exporter}", "", f"export failed: `{msg}`", ""]
                row["export"] = "FAILED: " + msg
                summary.append(row)
                continue
            proto = onnx.load_model(path)
            static = None
            ins = graph_inputs(proto)
            is_cache = any(i.name.startswith("past_key_values") for i in ins)
            try:
                if is_cache:
                    err = check_cache(path, model)
                else:
                    d = dims_of(ins[0])
                    if all(isinstance(x, int) for x in d):
                        static = tuple(d)
                    err = check_plain(path, model, static)
                check = f"ORT vs torch max rel {err:.2e}" + (" OK" if err <= TOLERANCE else " MISMATCH")
            except Exception as error:  # noqa: BLE001
                check = f"ORT check failed: {type(error).__name__}: {str(error).splitlines()[0][:200]}"
            counts = op_census(proto)
            named, small, init_lines = describe_initializers(proto, model)
            domains = sorted({d or "ai.onnx" for d, _ in counts})
            opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in proto.opset_import)
            size = os.path.getsize(path)
            io_line = ("inputs " + ", ".join(f"{i.name}{dims_of(i)}" for i in ins)
                       + "; outputs " + ", ".join(f"{o.name}{dims_of(o)}" for o in proto.graph.output))
            ops_line = ", ".join(f"{op if not d else d + '::' + op} {c}"
                                 for (d, op), c in sorted(counts.items(), key=lambda kv: kv[0][1]))
            unknown = sorted(op for (d, op) in counts if known is not None and op not in known)
            fold_only = sorted(op for (d, op) in counts
                               if known is not None and known.get(op) == "constant")
            print(f"  {exporter}: {size} bytes, {time.time() - t0:.1f} s, {notes}; {check}",
                  flush=True)
            print(f"    ir {proto.ir_version}, opsets {opsets}, functions {len(proto.functions)}")
            print(f"    {io_line}")
            print(f"    nodes {sum(counts.values())}, op types {len(counts)}: {ops_line}")
            print(f"    initializers {len(proto.graph.initializer)}: {named} parameters under "
                  f"their own name, {small} small constants (<= 4 elements)")
            for line in init_lines:
                print("    " + line)
            md += [f"### {family} / {exporter}", "",
                   f"- {size} bytes; {notes}; {check}",
                   f"- IR version {proto.ir_version}; opset imports: {opsets}; node domains: "
                   f"{', '.join(domains)}; functions: {len(proto.functions)}",
                   f"- {io_line}",
                   f"- {sum(counts.values())} nodes, {len(counts)} op types: {ops_line}",
                   f"- initializers: {len(proto.graph.initializer)} ({named} parameters under "
                   f"their own name, {small} of at most 4 elements)"]
            if init_lines:
                md += ["- not a parameter under its own name, or a buffer/large constant:"]
                md += [f"  - {line}" for line in init_lines]
            if known is not None:
                md += [f"- op types zcc does not know: **{', '.join(unknown) or 'none'}**; "
                       f"known only when their inputs are compile-time constants: "
                       f"{', '.join(fold_only) or 'none'}"]
                print(f"    unknown to zcc: {unknown}; constant-only: {fold_only}")
            row.update(export="ok", check=check, size=size, ops=dict(
                (op, c) for (_, op), c in counts.items()), unknown=unknown,
                constant_only=fold_only if known is not None else None)
            if args.zcc:
                work = tempfile.mkdtemp(prefix="zplan-census-")
                try:
                    for mode in ("infer", "train", "generate"):
                        result = zcc_try(args.zcc, path, mode, is_cache, work)
                        row[mode] = result
                        print(f"    zcc --mode {mode}: {result}", flush=True)
                        md.append(f"- zcc --mode {mode}: `{result}`")
                finally:
                    shutil.rmtree(work, ignore_errors=True)
            md.append("")
            summary.append(row)
    if args.census_md:
        table = ["## Summary", "",
                 "| family | exporter | export | unknown op types | infer | train | generate |",
                 "|---|---|---|---|---|---|---|"]
        for r in summary:
            cells = [r.get("export", "")[:80], ", ".join(r.get("unknown") or []) or "-"] + [
                short_error(r.get(m, "")).replace("|", "\\|") for m in ("infer", "train", "generate")]
            table.append(f"| {r['family']} | {r['exporter']} | " + " | ".join(cells) + " |")
        text = md[:4] + table + [""] + md[4:]
        with open(args.census_md, "w") as f:
            f.write("\n".join(text) + "\n")
        with open(os.path.splitext(args.census_md)[0] + ".json", "w") as f:
            json.dump(summary, f, indent=1)
        print(f"wrote {args.census_md}")


# ===========================================================================
# Committed fixtures and goldens (the default mode)
# ===========================================================================
#
# Files (test/models/real/):
#   <family>-ts17.onnx, <family>-dynamo.onnx   plain: input_ids -> logits
#   <family>-optimum.onnx                      cache export (text-generation-with-past)
#   goldens/<family>.npz                       what Hugging Face computes (below)
# for the families of FIXTURE_FAMILIES. The three exports of a family hold the
# same weights (the same seeded model); each is checked against torch with
# onnxruntime (max |ort - torch| <= 1e-4 of max |torch|) before it is written.
#
# Weights: the library's own init under torch.manual_seed(seed), then every
# parameter + normal(0, scale) (build_model; ties stay tied). (seed, scale) per
# family is WEIGHTS below, chosen by `--search-seeds` (choose_weights): scales
# SEARCH_SCALES in order, seeds SEARCH_SEEDS in order, the first pair for which
# greedy generation from both golden prompts, before and after one SGD step,
# (a) has a top-1 margin at every step of at least MARGIN_REL (1e-3) of the
# largest |logit| of those steps: a run whose logits are within the tests'
# 1e-4 of that largest logit cannot change an argmax (it moves a difference
# by at most 2e-4 of it), and (b) has at least MIN_DISTINCT (4) distinct
# tokens in each row's 8, and, for a tied model, (c) one SGD step with the
# tie broken (the LM head trained as a copy of the embedding) changes at least
# one of the 16 tokens, itself with a margin as in (a). The library's init
# scale (0.02) never passes for the tied models: their greedy continuation
# repeats the last token.
#
# goldens/<family>.npz (numpy arrays; strings as numpy unicode; no pickle):
#   weights_seed, weights_scale       the (seed, scale) above
#   param_names                       HF parameter names, model.named_parameters()
#                                     order (a tied tensor once, under its first name)
#   tied                              "first=alias" for each tied pair
#   map:<exporter>                    str [n, 3]: per ONNX initializer that zcc
#                                     takes as a parameter (float, more than one
#                                     element), in file order: (initializer, HF
#                                     parameter or "", relation): "same" (equal
#                                     values), "T" (its transpose: a constant-folded
#                                     copy), "1+" (1 + the parameter: Gemma's folded
#                                     norm gain), or for initializers that are not a
#                                     parameter: relation "buffer NAME" / "constant"
#   logits_input_ids int64 [2, 16], logits float32 [2, 16, 256]
#                                     HF model(input_ids).logits (float32, eager)
#   input_ids int64 [2, 8], loss float64, grad:<HF name> float32
#                                     loss = model(input_ids, labels=input_ids).loss
#                                     (float32), and each HF parameter's gradient
#                                     from loss.backward(): for a tied parameter the
#                                     sum over its uses (autograd). The gradient an
#                                     initializer should get: grad of its parameter,
#                                     transposed for "T", unchanged for "1+".
#   f32_grad_bound_ratio              the float32 gradients against a float64
#                                     run (model.double()), as a ratio to the test
#                                     bound (1e-4 of the tensor's max + 1e-6 of the
#                                     model's): what float32 itself costs
#   train_data, train_data_sha256, train_data_tokens, train_seed, train_steps,
#   train_seq_len, train_rows, train_offsets int64 [steps, rows]
#                                     rows picked from data/gpl-3.0.bin exactly as
#                                     zrun train picks them (test/train/batches.py)
#   curve:<sgd|adamw|adamw-wd0> float64 [steps] the loss HF's model.train() reports at each
#                                     optimizer step, before that step's update:
#                                     [0] = before any step, [1] = after one step
#   curve_hyper:<name> float64 [lr, beta1 (momentum), beta2, eps, weight_decay]
#                                     torch.optim.SGD / AdamW(model.parameters(),
#                                     foreach=False): a tied tensor is one parameter
#   gen_prompts int64 [2, 8] (right-padded with 0), gen_prompt_lengths int64 [2],
#   gen_max_new_tokens, gen_max_seq_len, gen_prompt_len
#   gen_tokens int64 [2, 8]           HF model.generate(do_sample=False, the row
#                                     alone, no EOS), equal to a full-recompute argmax loop
#   gen_margin, gen_logit_scale       min top-1 margin over rows and steps; max |logit|
#   gen_min_distinct                  fewest distinct tokens in a row
#   gen_after_sgd_tokens, gen_after_sgd_margin, gen_after_sgd_logit_scale
#                                     the same after one SGD step of curve:sgd (what
#                                     zrun train --steps 1 --generate-every 1 makes)
#   gen_after_sgd_untied_tokens       (tied models) the same had the one SGD step
#                                     trained the LM head as a separate copy of the
#                                     embedding: at least one token differs, so the
#                                     train-generate test tells a kept tie from a
#                                     broken one
#   versions                          the versions this ran with

FIXTURE_FAMILIES = ["gpt2", "llama", "llama-tied", "qwen2", "qwen3", "phi3", "gptneox",
                    "opt", "gemma"]
FIXTURE_DIR = os.path.join(REPO_ROOT, "test", "models", "real")
CORPUS = os.path.join(REPO_ROOT, "data", "gpl-3.0.bin")

SEARCH_SCALES = (0.1, 0.2, 0.3, 0.5)
SEARCH_SEEDS = range(1234, 1284)
MARGIN_REL = 1e-3
MIN_DISTINCT = 4
# (seed, scale) per family: the output of --search-seeds.
WEIGHTS = {"gpt2": (1237, 0.2), "llama": (1234, 0.1), "llama-tied": (1246, 0.2),
           "qwen2": (1235, 0.1), "qwen3": (1235, 0.1), "phi3": (1234, 0.1),
           "gptneox": (1236, 0.1), "opt": (1237, 0.2), "gemma": (1236, 0.2)}

LOGITS_IDS_SEED, LOGITS_SHAPE = 20261201, (2, 16)
GRAD_IDS_SEED, GRAD_SHAPE = 7, (2, 8)
TRAIN_SEED, TRAIN_STEPS, TRAIN_SEQ_LEN, TRAIN_ROWS = 0, 2, 16, 2
CURVES = [  # name, optimizer, lr, beta1 (momentum), beta2, eps, weight decay
    ("sgd", "sgd", 0.1, 0.0, 0.0, 0.0, 0.0),
    ("adamw", "adamw", 1e-2, 0.9, 0.999, 1e-8, 0.1),
    # Without weight decay: the check for exports that store a parameter as
    # 1 + w (Gemma's folded norm gains), where decaying the stored tensor is
    # not decaying w (docs/importing.md).
    ("adamw-wd0", "adamw", 1e-2, 0.9, 0.999, 1e-8, 0.0),
]
GEN_PROMPT_SEED, GEN_LENGTHS, GEN_NEW = 99, (6, 4), 8
GEN_PROMPT_LEN, GEN_MAX_SEQ_LEN = 8, 32


def gen_prompts():
    rng = np.random.default_rng(GEN_PROMPT_SEED)
    prompts = np.zeros((len(GEN_LENGTHS), GEN_PROMPT_LEN), np.int64)
    for row, length in enumerate(GEN_LENGTHS):
        prompts[row, :length] = rng.integers(4, VOCAB, length)
    return prompts, np.array(GEN_LENGTHS, np.int64)


def greedy_loop(model, prompts, lengths, new=GEN_NEW):
    """Full recompute, no cache: tokens [B, new], the min top-1 margin and the
    max |logit| over every row and step."""
    tokens, margin, scale = [], float("inf"), 0.0
    with torch.no_grad():
        for row, length in enumerate(lengths):
            ids = torch.from_numpy(prompts[row, :length])[None]
            out = []
            for _ in range(new):
                logits = model(input_ids=ids, use_cache=False).logits[0, -1].double()
                top = torch.topk(logits, 2).values
                margin = min(margin, float(top[0] - top[1]))
                scale = max(scale, float(logits.abs().max()))
                token = int(torch.argmax(logits))
                out.append(token)
                ids = torch.cat([ids, torch.tensor([[token]])], 1)
            tokens.append(out)
    return np.array(tokens, np.int64), margin, scale


def hf_generate(model, prompts, lengths, new=GEN_NEW):
    """model.generate(), greedy, each row alone (no padding), with the cache,
    never stopping at EOS: the model's own generation_config is changed (a
    config passed to generate() would have its library-default values, such
    as eos_token_id None and use_cache True, replaced by the model's)."""
    import copy
    saved = (copy.deepcopy(model.generation_config), model.config.use_cache)
    config = model.generation_config
    config.do_sample = False
    config.num_beams = 1
    config.max_new_tokens = new
    config.eos_token_id = None
    config.use_cache = True
    config.pad_token_id = model.config.pad_token_id
    model.config.use_cache = True
    rows = []
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("error")  # no silently changed setting
            for row, length in enumerate(lengths):
                ids = torch.from_numpy(prompts[row, :length])[None]
                out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids))
                if out.shape[1] != length + new:
                    raise SystemExit(f"generate() stopped after {out.shape[1] - length} tokens")
                rows.append(out[0, length:].tolist())
    finally:
        model.generation_config, model.config.use_cache = saved
    return np.array(rows, np.int64)


def distinct(tokens):
    return min(len(set(row.tolist())) for row in tokens)


def corpus_tokens():
    return np.fromfile(CORPUS, dtype="<u2")


def train_batches(tokens):
    sys.path.insert(0, os.path.join(REPO_ROOT, "test", "train"))
    import batches
    batches.self_test()
    offsets = np.array([batches.step_offsets(TRAIN_SEED, s, TRAIN_ROWS, len(tokens),
                                             TRAIN_SEQ_LEN) for s in range(TRAIN_STEPS)],
                       dtype=np.int64)
    rows = [np.stack([tokens[o:o + TRAIN_SEQ_LEN] for o in step]).astype(np.int64)
            for step in offsets]
    return offsets, rows


def hf_train(model, curve, rows, steps=TRAIN_STEPS):
    """HF's own training: model.train(), model(x, labels=x).loss, one
    torch.optim step on model.parameters() (a tied tensor once) per row set.
    Returns the loss of each step, before its update."""
    _, optimizer, lr, beta1, beta2, eps, weight_decay = curve
    model.train()
    params = list(model.parameters())
    if optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=lr, momentum=beta1, weight_decay=weight_decay,
                              foreach=False)
    else:
        opt = torch.optim.AdamW(params, lr=lr, betas=(beta1, beta2), eps=eps,
                                weight_decay=weight_decay, foreach=False)
    losses = []
    for step in range(steps):
        x = torch.from_numpy(rows[step])
        opt.zero_grad(set_to_none=True)
        loss = model(input_ids=x, labels=x, use_cache=False).loss
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
    model.eval()
    return np.array(losses, np.float64)


def untied(model):
    """The same model with its LM head a separate copy of the embedding: what
    a compiler that loses the tie trains."""
    head = model.get_output_embeddings()
    head.weight = torch.nn.Parameter(head.weight.detach().clone())
    if tied_pairs(model):
        raise SystemExit("untied(): the model still ties parameters")
    return model


def passes(tokens, margin, logit_scale):
    return margin >= MARGIN_REL * logit_scale and distinct(tokens) >= MIN_DISTINCT


def weights_ok(family, seed, scale, rows):
    """(ok, description) of the seed criteria for one (seed, scale)."""
    prompts, lengths = gen_prompts()
    model = build_model(family, seed, scale)
    tokens, margin, logit_scale = greedy_loop(model, prompts, lengths)
    parts = [f"margin {margin:.4f} ({margin / logit_scale:.2e} of {logit_scale:.2f}), "
             f"distinct {distinct(tokens)}"]
    if not passes(tokens, margin, logit_scale):
        return False, parts[0]
    hf_train(model, CURVES[0], rows, steps=1)
    tied_tokens, margin, logit_scale = greedy_loop(model, prompts, lengths)
    parts.append(f"after SGD margin {margin:.4f} ({margin / logit_scale:.2e}), "
                 f"distinct {distinct(tied_tokens)}")
    if not passes(tied_tokens, margin, logit_scale):
        return False, "; ".join(parts)
    if tied_pairs(model):
        other = untied(build_model(family, seed, scale))
        hf_train(other, CURVES[0], rows, steps=1)
        tokens, margin, logit_scale = greedy_loop(other, prompts, lengths)
        differ = int((tokens != tied_tokens).sum())
        parts.append(f"untied training: {differ} tokens differ, margin "
                     f"{margin / logit_scale:.2e}")
        if not (differ >= 1 and margin >= MARGIN_REL * logit_scale):
            return False, "; ".join(parts)
    return True, "; ".join(parts)


def choose_weights(family):
    _, rows = train_batches(corpus_tokens())
    tried = 0
    for scale in SEARCH_SCALES:
        for seed in SEARCH_SEEDS:
            tried += 1
            ok, text = weights_ok(family, seed, scale, rows)
            if ok:
                print(f"  {family}: seed {seed}, scale {scale} (candidate {tried}): {text}",
                      flush=True)
                return seed, scale
    raise SystemExit(f"{family}: no (seed, scale) of {tried} meets the criteria")


def relation(arr, name, params, aliases, buffers):
    """(HF parameter, relation) of an initializer's values."""
    for candidate in (name, name[len("model."):] if name.startswith("model.") else None):
        if candidate in aliases:
            p = params[aliases[candidate]]
            if p.shape == arr.shape and np.array_equal(p, arr):
                return aliases[candidate], "same"
    for k, v in params.items():
        if v.shape == arr.shape and np.array_equal(v, arr):
            return k, "same"
    for k, v in params.items():
        if v.ndim == 2 and v.T.shape == arr.shape and np.array_equal(v.T, arr):
            return k, "T"
    for k, v in params.items():
        if v.shape == arr.shape and np.array_equal((v + np.float32(1)).astype(v.dtype), arr):
            return k, "1+"
    for k, v in buffers.items():
        if v.size == arr.size and np.array_equal(v.ravel(), arr.ravel()):
            return "", f"buffer {k}"
    return "", "constant"


def map_initializers(proto, model):
    params = {k: v.detach().numpy() for k, v in model.named_parameters()}
    aliases = {}
    seen = {}
    for k, v in model.named_parameters(remove_duplicate=False):
        seen.setdefault(id(v), k)
        aliases[k] = seen[id(v)]
    buffers = {k: v.detach().numpy() for k, v in model.named_buffers()}
    rows = []
    for init in proto.graph.initializer:
        arr = onnx.numpy_helper.to_array(init)
        if arr.dtype.kind != "f" or arr.size <= 1:
            continue
        hf, how = relation(arr, init.name, params, aliases, buffers)
        rows.append((init.name, hf, how))
    covered = {hf for _, hf, _ in rows if hf}
    missing = sorted(set(params) - covered)
    return np.array(rows, dtype=str).reshape(-1, 3), missing


def hf_gradients(model, ids):
    model.train()
    model.zero_grad(set_to_none=True)
    x = torch.from_numpy(ids)
    loss = model(input_ids=x, labels=x, use_cache=False).loss
    loss.backward()
    grads = {k: (p.grad.detach().numpy().copy() if p.grad is not None
                 else np.zeros(tuple(p.shape), p.detach().numpy().dtype))
             for k, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    model.eval()
    return float(loss.item()), grads


def bound_ratio(approx, exact):
    largest = max(float(np.abs(g).max()) for g in exact.values())
    return max(float(np.abs(approx[k] - exact[k]).max())
               / (1e-4 * float(np.abs(exact[k]).max()) + 1e-6 * largest) for k in exact)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def produce_family(family, out_dir, versions, tokens):
    seed, scale = WEIGHTS[family]
    print(f"== {family}: seed {seed}, scale {scale}", flush=True)
    model = build_model(family, seed, scale)
    golden = {"weights_seed": np.int64(seed), "weights_scale": np.float64(scale),
              "param_names": np.array([k for k, _ in model.named_parameters()]),
              "tied": np.array([f"{a}={b}" for a, b in tied_pairs(model)], dtype=str)}
    tmp = tempfile.mkdtemp(prefix=f".{family}.", dir=out_dir)
    moves = []
    try:
        for exporter in EXPORTERS:
            name = f"{family}-{exporter}.onnx"
            path = os.path.join(tmp, name)
            if exporter == "ts17":
                export_ts17(model, path)
            elif exporter == "dynamo":
                export_dynamo(model, path)
            else:
                export_optimum(family, seed, scale, path)
            onnx.checker.check_model(path, full_check=True)
            proto = onnx.load_model(path)
            cache = any(i.name.startswith("past_key_values") for i in graph_inputs(proto))
            err = check_cache(path, model) if cache else check_plain(path, model)
            if not err <= TOLERANCE:
                raise SystemExit(f"{name}: onnxruntime differs from torch by {err:.3e}")
            table, missing = map_initializers(proto, model)
            if missing:
                raise SystemExit(f"{name}: no initializer holds HF parameters {missing}")
            golden[f"map:{exporter}"] = table
            odd = [f"{i} ({how}{' ' + hf if hf else ''})" for i, hf, how in table
                   if how != "same"]
            print(f"  {name}: {os.path.getsize(path)} bytes, ORT vs torch {err:.2e}; "
                  f"{len(table)} parameter initializers"
                  + (f", not a parameter under its own name: {', '.join(odd)}" if odd else ""),
                  flush=True)
            moves.append((path, os.path.join(out_dir, name)))

        # Logits.
        ids = np.random.default_rng(LOGITS_IDS_SEED).integers(4, VOCAB, LOGITS_SHAPE)
        with torch.no_grad():
            logits = model(input_ids=torch.from_numpy(ids), use_cache=False).logits.numpy()
        golden["logits_input_ids"] = ids.astype(np.int64)
        golden["logits"] = logits.astype(np.float32)

        # Loss and gradients (float32, as HF trains), and float64 for comparison.
        ids = np.random.default_rng(GRAD_IDS_SEED).integers(4, VOCAB, GRAD_SHAPE)
        loss, grads = hf_gradients(model, ids)
        model64 = build_model(family, seed, scale).double()
        loss64, grads64 = hf_gradients(model64, ids)
        del model64
        ratio = bound_ratio({k: v.astype(np.float64) for k, v in grads.items()}, grads64)
        golden.update({"input_ids": ids.astype(np.int64), "loss": np.float64(loss),
                       "f32_grad_bound_ratio": np.float64(ratio)})
        for k, g in grads.items():
            golden["grad:" + k] = g.astype(np.float32)
        print(f"  loss {loss:.7f} (float64 {loss64:.7f}); float32 gradients at "
              f"{ratio:.2e} of the test bound from float64", flush=True)

        # Training curves.
        offsets, rows = train_batches(tokens)
        golden.update({
            "train_data": np.array(os.path.relpath(CORPUS, REPO_ROOT)),
            "train_data_sha256": np.array(sha256(CORPUS)),
            "train_data_tokens": np.int64(len(tokens)),
            "train_seed": np.int64(TRAIN_SEED), "train_steps": np.int64(TRAIN_STEPS),
            "train_seq_len": np.int64(TRAIN_SEQ_LEN), "train_rows": np.int64(TRAIN_ROWS),
            "train_offsets": offsets})
        for curve in CURVES:
            losses = hf_train(build_model(family, seed, scale), curve, rows)
            golden["curve:" + curve[0]] = losses
            golden["curve_hyper:" + curve[0]] = np.array(curve[2:], np.float64)
            print(f"  {curve[0]}: losses {' '.join(f'{v:.7f}' for v in losses)}", flush=True)

        # Generation: HF generate, checked against the full-recompute loop.
        prompts, lengths = gen_prompts()
        golden.update({"gen_prompts": prompts, "gen_prompt_lengths": lengths,
                       "gen_max_new_tokens": np.int64(GEN_NEW),
                       "gen_max_seq_len": np.int64(GEN_MAX_SEQ_LEN),
                       "gen_prompt_len": np.int64(GEN_PROMPT_LEN)})
        for prefix, trained in (("gen", False), ("gen_after_sgd", True)):
            gmodel = build_model(family, seed, scale)
            if trained:
                hf_train(gmodel, CURVES[0], rows, steps=1)
            tokens_hf = hf_generate(gmodel, prompts, lengths)
            tokens_loop, margin, logit_scale = greedy_loop(gmodel, prompts, lengths)
            if not np.array_equal(tokens_hf, tokens_loop):
                raise SystemExit(f"{family} {prefix}: HF generate {tokens_hf.tolist()} != "
                                 f"the full-recompute loop {tokens_loop.tolist()}")
            if not (margin >= MARGIN_REL * logit_scale and distinct(tokens_hf) >= MIN_DISTINCT):
                raise SystemExit(f"{family} {prefix}: margin {margin:.4f} of {logit_scale:.2f}, "
                                 f"distinct {distinct(tokens_hf)}: rerun --search-seeds")
            golden[prefix + "_tokens"] = tokens_hf
            golden[prefix + "_margin"] = np.float64(margin)
            golden[prefix + "_logit_scale"] = np.float64(logit_scale)
            golden[prefix + "_min_distinct"] = np.int64(distinct(tokens_hf))
            print(f"  {prefix}: {tokens_hf.tolist()}, margin {margin:.4f} "
                  f"({margin / logit_scale:.2e} of max |logit| {logit_scale:.2f})", flush=True)
        if tied_pairs(model):
            other = untied(build_model(family, seed, scale))
            hf_train(other, CURVES[0], rows, steps=1)
            tokens_untied, margin, logit_scale = greedy_loop(other, prompts, lengths)
            differ = int((tokens_untied != golden["gen_after_sgd_tokens"]).sum())
            if not (differ >= 1 and margin >= MARGIN_REL * logit_scale):
                raise SystemExit(f"{family}: untied training gives the same tokens "
                                 f"({differ} differ, margin {margin:.4f}): rerun --search-seeds")
            golden["gen_after_sgd_untied_tokens"] = tokens_untied
            print(f"  gen_after_sgd, had the tie been broken: {tokens_untied.tolist()} "
                  f"({differ} tokens differ; margin {margin / logit_scale:.2e} of max |logit|)")
        golden["versions"] = np.array(versions)

        gdir = os.path.join(out_dir, "goldens")
        os.makedirs(gdir, exist_ok=True)
        gpath = os.path.join(tmp, f"{family}.npz")
        save_npz_deterministic(gpath, golden)
        moves.append((gpath, os.path.join(gdir, f"{family}.npz")))
        umask = os.umask(0)
        os.umask(umask)
        for src, dst in moves:
            os.chmod(src, 0o666 & ~umask)
            os.replace(src, dst)
            print(f"  wrote {os.path.relpath(dst, REPO_ROOT)}: {os.path.getsize(dst)} bytes, "
                  f"sha256 {sha256(dst)[:16]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def fixtures(args, versions):
    wanted = args.only or FIXTURE_FAMILIES
    if args.search_seeds:
        print("searching (seed, scale): scales " + ", ".join(map(str, SEARCH_SCALES))
              + f"; seeds {SEARCH_SEEDS.start}..{SEARCH_SEEDS.stop - 1}; margin >= "
              f"{MARGIN_REL} of max |logit|, >= {MIN_DISTINCT} distinct tokens per row")
        for family in wanted:
            WEIGHTS[family] = choose_weights(family)
        print("WEIGHTS = {" + ", ".join(f'"{f}": {WEIGHTS[f]}' for f in wanted) + "}")
    missing = [f for f in wanted if f not in WEIGHTS]
    if missing:
        raise SystemExit(f"no (seed, scale) for {missing}: run with --search-seeds")
    out_dir = os.path.abspath(args.out_dir)
    os.makedirs(out_dir, exist_ok=True)
    tokens = corpus_tokens()
    torch.use_deterministic_algorithms(True)
    for family in wanted:
        produce_family(family, out_dir, versions, tokens)
    print("all fixtures verified")


def short_error(line):
    """zcc's error without its list of supported op types."""
    for cut in ("; supported op types are", ", which is supported only for op types"):
        if cut in line:
            line = line.split(cut)[0] + " ..."
    return line


def versions_line():
    import importlib.metadata as md
    versions = {}
    for k in TESTED_VERSIONS:
        try:
            versions[k] = md.version(k)
        except md.PackageNotFoundError:
            versions[k] = "absent"
    line = "python " + sys.version.split()[0] + ", " + ", ".join(
        f"{k} {v}" for k, v in versions.items()) + f", numpy {np.__version__}"
    print(line)
    for k, v in versions.items():
        if v.split("+")[0] != TESTED_VERSIONS[k]:
            print(f"WARNING: {k} {v} differs from the tested {TESTED_VERSIONS[k]}; "
                  "graphs may differ from the committed ones", file=sys.stderr)
    return line


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--census", metavar="DIR", help="export into DIR and print the op census")
    ap.add_argument("--census-md", metavar="FILE", help="with --census: write Markdown here")
    ap.add_argument("--zcc", help="with --census: compile each export with this zcc")
    ap.add_argument("--ops-zcc", help="with --census: take the supported op list from this "
                    "zcc's --list-ops (default: --zcc's)")
    ap.add_argument("--only", action="append", metavar="FAMILY", choices=list(FAMILIES))
    ap.add_argument("--exporters", default=",".join(EXPORTERS))
    ap.add_argument("--seed", type=int, default=1234, help="with --census: the weights' seed")
    ap.add_argument("--scale", type=float, default=0.02,
                    help="with --census: the perturbation's scale")
    ap.add_argument("--out-dir", default=FIXTURE_DIR, help="fixtures and goldens/ go here")
    ap.add_argument("--search-seeds", action="store_true",
                    help="choose (seed, scale) per family again (see choose_weights)")
    args = ap.parse_args()
    args.exporters = args.exporters.split(",")
    torch.set_num_threads(1)
    line = versions_line()
    if args.census:
        census(args, line)
        return
    fixtures(args, line)


if __name__ == "__main__":
    main()
