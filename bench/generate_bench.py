#!/usr/bin/env python3
"""Generation benchmark: greedy tokens/s of zrun generate against
onnxruntime with a KV cache, DeepSpeed ZeRO-3 and PyTorch FSDP2, on CPU
ranks, in one run, on one ~156M-parameter Llama-style model.

    python3 bench/train_peers.py --setup           # once: bench/.venv-peers
    python3 bench/train_peers.py --setup-fsdp2     # once: bench/.venv-fsdp2
    bench/.venv-peers/bin/python bench/generate_bench.py
    bench/.venv-peers/bin/python bench/generate_bench.py --worlds 2 --peers ort-kv,deepspeed,zrun

Model (built on demand into bench/.models/llama-156m/, git-ignored): a
transformers LlamaForCausalLM, 8 layers, hidden 1024, 16 heads with 4 kv
heads (GQA), intermediate 2816, vocab 32000, untied lm_head, eager
attention, float32, 155,730,944 parameters, random weights from the
library's init (normal(0, 0.02)) under a fixed seed, nothing downloaded
(HF_HUB_OFFLINE=1). The same weights are written three ways: weights.pt
(the state dict DeepSpeed and FSDP2 load), plain.onnx (input_ids -> logits,
what zcc compiles) and kv.onnx (the cache export of docs/generation.md section 3:
input_ids, attention_mask, position_ids, past_key_values.{i}.key|value ->
logits, present.{i}.key|value; what onnxruntime runs with a cache).

Rows, one thread per rank everywhere (OMP_NUM_THREADS=1,
OPENBLAS_NUM_THREADS=1, torch.set_num_threads(1), ORT intra- and inter-op
threads 1), B rows of a P-token random prompt, M new tokens, greedy, no EOS:

  ort-kv       onnxruntime on kv.onnx, one process (replicated: every rank
               would run the same), prefill with an empty past, then one token
               per step with the presents fed back. The ceiling.
  ort-kv-end   ort-kv again after all other rows: the load's drift.
  ort-full     onnxruntime on plain.onnx, full recompute per token (no
               cache): the oracle the tokens are checked against (as
               test/generate/reference.py), timed for information.
  deepspeed    DeepSpeed ZeRO-3 (DS_ACCELERATOR=cpu, gloo, no optimizer),
               engine.module.generate(...) on N ranks.
  fsdp2        fully_shard on every decoder layer and the root (gloo, torch
               of bench/.venv-fsdp2), model.generate(...) on N ranks.
  zrun-*       zcc --mode generate (resident: no budget; streamed: a budget
               that holds only part of the model; streamed-nocarry: the same
               budget with --cross-step-prefetch=false; jit: --policy jit), then
               mpirun -np N zrun PLAN generate --stats. Skipped, with the
               reason, when zcc refuses --mode generate.

Measured per row: time to first token (prefill and the first token chosen),
decode tokens/s = B x (M - 1) / (time from the first decode step to the end),
bytes gathered per decoded token, the tokens themselves. The peers' bytes
come from wrapping torch.distributed's collectives (train_peers.py's
counters), snapshotted at every forward of the model: the median over the
decode forwards. zrun's come from its summary lines (loosely parsed).
Exits 1 when a row that should run fails or a row's tokens differ from the
oracle's. See bench/README.md ("generate_bench.py").
"""

import os

# Must be set before transformers is imported: never touch the network.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import argparse
import hashlib
import json
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True
BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)
import train_peers  # noqa: E402

REPO_ROOT = train_peers.REPO_ROOT
MODEL_DIR = os.path.join(BENCH_DIR, ".models", "llama-156m")
DEEPSPEED_PYTHON = os.path.join(train_peers.VENV, "bin", "python")
FSDP2_PYTHON = os.path.join(train_peers.FSDP2_VENV, "bin", "python")

# The bench model. Changing any of these (or MODEL_FORMAT) rebuilds the files.
LLAMA = dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816,
             num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4,
             max_position_embeddings=2048, rms_norm_eps=1e-6, rope_theta=10000.0,
             tie_word_embeddings=False)
MODEL_SEED = 20261201
MODEL_FORMAT = 1  # bump when the export itself changes
PROMPT_SEED = 7
# Logits of an export against torch's, relative to max |logit|.
EXPORT_TOLERANCE = 1e-4
SIZE_UNITS = {"B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3,
              "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
MiB = 1 << 20


class BenchError(Exception):
    pass


#===------------------------------------------------------------------------===#
# The model and its exports
#===------------------------------------------------------------------------===#

def llama_model():
    """The bench model with seeded random weights (identical on every call
    with the same torch version)."""
    import torch
    import transformers
    config = transformers.LlamaConfig(
        **LLAMA, hidden_act="silu", attention_bias=False, mlp_bias=False,
        attention_dropout=0.0, attn_implementation="eager", use_cache=True,
        # No EOS: every implementation generates exactly M tokens.
        bos_token_id=None, eos_token_id=None, pad_token_id=None)
    torch.manual_seed(MODEL_SEED)
    model = transformers.LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def load_model():
    """The bench model with the saved weights (what the peers run)."""
    import torch
    model = llama_model()
    state = torch.load(os.path.join(MODEL_DIR, "weights.pt"), weights_only=True)
    model.load_state_dict(state)
    return model.eval()


def model_fingerprint():
    return hashlib.sha256(json.dumps([LLAMA, MODEL_SEED, MODEL_FORMAT],
                                     sort_keys=True).encode()).hexdigest()


def kv_names(layers):
    inputs, outputs = [], []
    for i in range(layers):
        for kind in ("key", "value"):
            inputs.append(f"past_key_values.{i}.{kind}")
            outputs.append(f"present.{i}.{kind}")
    return inputs, outputs


def cache_export_wrapper(model):
    """input_ids, attention_mask, position_ids, flat past -> logits, flat
    presents, with the names torch/optimum exports use."""
    import torch
    from transformers.cache_utils import DynamicCache

    class CacheExport(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, *past):
            cache = DynamicCache.from_legacy_cache(
                tuple((past[i], past[i + 1]) for i in range(0, len(past), 2)))
            out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                             position_ids=position_ids, past_key_values=cache,
                             use_cache=True, return_dict=True)
            presents = []
            for key, value in out.past_key_values.to_legacy_cache():
                presents += [key, value]
            return (out.logits, *presents)

    return CacheExport().eval()


def export_cache_model(model, path):
    import inspect
    import warnings
    import torch
    layers = LLAMA["num_hidden_layers"]
    kv_heads = LLAMA["num_key_value_heads"]
    head_dim = LLAMA["hidden_size"] // LLAMA["num_attention_heads"]
    batch, seq, past = 2, 3, 5
    past_names, present_names = kv_names(layers)
    example = (torch.zeros((batch, seq), dtype=torch.int64),
               torch.ones((batch, past + seq), dtype=torch.int64),
               torch.arange(past, past + seq).repeat(batch, 1),
               *[torch.zeros((batch, kv_heads, past, head_dim)) for _ in past_names])
    dynamic = {"input_ids": {0: "batch", 1: "sequence"},
               "attention_mask": {0: "batch", 1: "total_sequence"},
               "position_ids": {0: "batch", 1: "sequence"},
               "logits": {0: "batch", 1: "sequence"}}
    dynamic.update({name: {0: "batch", 2: "past_sequence"} for name in past_names})
    dynamic.update({name: {0: "batch", 2: "total_sequence"} for name in present_names})
    kwargs = dict(input_names=["input_ids", "attention_mask", "position_ids"] + past_names,
                  output_names=["logits"] + present_names, dynamic_axes=dynamic,
                  opset_version=17, do_constant_folding=False, export_params=True)
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarnings from transformers
        with torch.no_grad():
            torch.onnx.export(cache_export_wrapper(model), example, path, **kwargs)


def check_exports(model, directory):
    """Both exports' logits against torch's on one prompt: the plain one at
    full length, the cache one as prefill (empty past) and as one decode
    step on the prefill's presents."""
    import numpy as np
    import torch
    rng = np.random.default_rng(1)
    ids = rng.integers(1, LLAMA["vocab_size"], size=(2, 9), dtype=np.int64)
    with torch.no_grad():
        want = model(input_ids=torch.from_numpy(ids), use_cache=False).logits.numpy()
    scale = float(np.abs(want).max())
    plain = ort_session(os.path.join(directory, "plain.onnx"))
    got = plain.run(["logits"], {"input_ids": ids})[0]
    errors = {"plain": float(np.abs(got - want).max()) / scale}
    cache = KvCacheRunner(os.path.join(directory, "kv.onnx"))
    prefill = cache.step(ids[:, :8], np.arange(8))
    decode = cache.step(ids[:, 8:], np.arange(8, 9))
    errors["kv prefill"] = float(np.abs(prefill - want[:, :8]).max()) / scale
    errors["kv decode"] = float(np.abs(decode - want[:, 8:]).max()) / scale
    for name, error in errors.items():
        if not error <= EXPORT_TOLERANCE:
            raise BenchError(f"{name} export: logits differ from torch's by {error:.2e} "
                             f"of max |logit| (> {EXPORT_TOLERANCE})")
    return errors


def ensure_model():
    """Builds bench/.models/llama-156m/ when missing or stale; returns its
    manifest."""
    manifest_path = os.path.join(MODEL_DIR, "manifest.json")
    fingerprint = model_fingerprint()
    if os.path.exists(manifest_path):
        with open(manifest_path) as handle:
            manifest = json.load(handle)
        if manifest.get("fingerprint") == fingerprint:
            return manifest
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise BenchError(f"building the bench model needs torch and transformers ({exc}); "
                         f"run with bench/.venv-peers/bin/python or "
                         f"{train_peers.TORCH_VENV}/bin/python")
    sys.path.insert(0, os.path.join(REPO_ROOT, "scripts"))
    import export_fixtures
    print(f"# building the bench model into {MODEL_DIR} (about a minute) ...", flush=True)
    staging = MODEL_DIR + ".partial"
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    model = llama_model()
    torch.save(model.state_dict(), os.path.join(staging, "weights.pt"))
    with open(os.path.join(staging, "plain.onnx"), "wb") as handle:
        handle.write(export_fixtures.export_bytes(export_fixtures.LogitsOnly(model).eval(), 17))
    export_cache_model(model, os.path.join(staging, "kv.onnx"))
    errors = check_exports(model, staging)
    parameters = sum(p.numel() for p in model.parameters())
    manifest = {"fingerprint": fingerprint, "config": LLAMA, "seed": MODEL_SEED,
                "parameters": parameters, "parameter_bytes": 4 * parameters,
                "torch": torch.__version__, "transformers": transformers.__version__,
                "export_errors": errors}
    with open(os.path.join(staging, "manifest.json"), "w") as handle:
        json.dump(manifest, handle, indent=1)
    shutil.rmtree(MODEL_DIR, ignore_errors=True)
    os.rename(staging, MODEL_DIR)
    return manifest


#===------------------------------------------------------------------------===#
# onnxruntime
#===------------------------------------------------------------------------===#

def ort_session(path):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


class KvCacheRunner:
    """kv.onnx with its presents fed back as the next step's past."""

    def __init__(self, path):
        self.session = ort_session(path)
        self.layers = LLAMA["num_hidden_layers"]
        self.past_names, self.present_names = kv_names(self.layers)
        self.past = None

    def step(self, ids, positions):
        import numpy as np
        batch, seq = ids.shape
        if self.past is None:
            shape = (batch, LLAMA["num_key_value_heads"], 0,
                     LLAMA["hidden_size"] // LLAMA["num_attention_heads"])
            self.past = [np.zeros(shape, dtype=np.float32) for _ in self.past_names]
        total = self.past[0].shape[2] + seq
        feed = {"input_ids": ids, "attention_mask": np.ones((batch, total), dtype=np.int64),
                "position_ids": np.tile(np.asarray(positions, dtype=np.int64), (batch, 1))}
        feed.update(zip(self.past_names, self.past))
        outputs = self.session.run(["logits"] + self.present_names, feed)
        self.past = outputs[1:]
        return outputs[0]


def greedy_loop(step, prompt, new_tokens):
    """Runs `step(ids, positions) -> logits [B, S, V]` greedily; returns
    tokens [B, M], logits [M, B, V], time to first token and decode time."""
    import numpy as np
    begin = time.perf_counter()
    _, prompt_len = prompt.shape
    logits = step(prompt, np.arange(prompt_len))[:, -1]
    tokens, step_logits = [logits.argmax(-1)], [logits]
    first = time.perf_counter()
    for k in range(1, new_tokens):
        position = prompt_len + k - 1
        logits = step(tokens[-1][:, None].astype(np.int64), np.arange(position, position + 1))
        logits = logits[:, -1]
        tokens.append(logits.argmax(-1))
        step_logits.append(logits)
    end = time.perf_counter()
    return (np.stack(tokens, axis=1).astype(np.int64), np.stack(step_logits),
            first - begin, end - first)


def run_ort_kv(prompt, new_tokens):
    path = os.path.join(MODEL_DIR, "kv.onnx")
    greedy_loop(KvCacheRunner(path).step, prompt, min(4, new_tokens))  # warm-up
    tokens, logits, ttft, decode = greedy_loop(KvCacheRunner(path).step, prompt, new_tokens)
    return {"tokens": tokens, "logits": logits, "ttft": ttft, "decode": decode,
            "gathered": 0, "gathered_how": "replicated: nothing gathered"}


def run_ort_full(prompt, new_tokens):
    """Full recompute: every step runs the whole sequence so far."""
    import numpy as np
    session = ort_session(os.path.join(MODEL_DIR, "plain.onnx"))
    history = [prompt]

    def step(ids, positions):
        if ids is not prompt:
            history.append(ids)
        return session.run(["logits"], {"input_ids": np.concatenate(history, axis=1)})[0]

    tokens, logits, ttft, decode = greedy_loop(step, prompt, new_tokens)
    return {"tokens": tokens, "logits": logits, "ttft": ttft, "decode": decode,
            "gathered": 0, "gathered_how": "replicated: nothing gathered"}


#===------------------------------------------------------------------------===#
# DeepSpeed ZeRO-3 and FSDP2 (one worker process per rank)
#===------------------------------------------------------------------------===#

def snapshot(counts):
    return {name: list(value) for name, value in counts.items()}


def worker(args):
    import numpy as np
    import torch
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    counts = {}
    train_peers.install_counters(counts)
    import torch.distributed as dist

    model = load_model()
    prompt = np.load(os.path.join(args.work_dir, args.prompt_file))
    if args.rows_per_rank:
        # Data parallel: this rank's rows of the global batch.
        prompt = prompt[rank * args.rows_per_rank:(rank + 1) * args.rows_per_rank]
    prompt = torch.from_numpy(np.ascontiguousarray(prompt))
    if args.worker == "deepspeed":
        import deepspeed
        deepspeed.init_distributed(dist_backend="gloo")
        # Inference only: no optimizer; ZeRO-3 with its default persistence
        # threshold (parameters under 1e5 elements, the norms, stay whole).
        config = {"train_micro_batch_size_per_gpu": prompt.shape[0],
                  "fp16": {"enabled": False}, "bf16": {"enabled": False},
                  "zero_optimization": {"stage": 3}, "steps_per_print": 1 << 30}
        engine, _, _, _ = deepspeed.initialize(model=model, config=config)
        module = engine.module
        version = deepspeed.__version__
    else:
        fully_shard = train_peers.import_fully_shard()
        dist.init_process_group("gloo")
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
        module = model
        version = torch.__version__
    module.eval()
    # One mark per forward of the whole model (prefill, then one per decode
    # step), taken before FSDP's or DeepSpeed's own hooks gather anything.
    marks = []
    module.register_forward_pre_hook(
        lambda *_: marks.append((time.perf_counter(), snapshot(counts))), prepend=True)

    def generate(new_tokens):
        with torch.no_grad():
            return module.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt),
                                   max_new_tokens=new_tokens, do_sample=False, use_cache=True, pad_token_id=0)

    generate(min(4, args.new_tokens))  # warm-up
    marks.clear()
    counts.clear()
    begin = time.perf_counter()
    output = generate(args.new_tokens)
    end = time.perf_counter()
    marks.append((end, snapshot(counts)))
    per_forward = []
    for (_, before), (_, after) in zip(marks, marks[1:]):
        per_forward.append({name: [after[name][0] - before.get(name, [0, 0])[0],
                                   after[name][1] - before.get(name, [0, 0])[1]]
                            for name in after})
    result = {"rank": rank, "version": version,
              "tokens": output[:, prompt.shape[1]:].tolist(),
              "ttft": marks[1][0] - begin if len(marks) > 2 else end - begin,
              "decode": end - marks[1][0] if len(marks) > 2 else 0.0,
              "forwards": len(marks) - 1, "per_forward": per_forward,
              "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    with open(os.path.join(args.work_dir, f"{args.tag or args.worker}-{world}-{rank}.json"),
              "w") as handle:
        json.dump(result, handle)
    dist.barrier()
    dist.destroy_process_group()


def run_peer(args, name, world, port, prompt_file="prompt.npy", rows_per_rank=0, tag=None):
    """DeepSpeed or FSDP2 on `world` ranks: every rank the whole of
    WORK_DIR/PROMPT_FILE (replicated), or with `rows_per_rank` its own rows
    of it (data parallel: the tokens are every rank's, in rank order)."""
    import numpy as np
    python = args.fsdp2_python if name == "fsdp2" else args.deepspeed_python
    tag = tag or name
    worker_args = ["--worker", name, "--work-dir", args.work_dir,
                   "--new-tokens", str(args.new_tokens), "--prompt-file", prompt_file,
                   "--rows-per-rank", str(rows_per_rank), "--tag", tag]
    results, error = train_peers.launch_ranks(python, os.path.abspath(__file__), worker_args,
                                              world, port, args.work_dir, tag, args.timeout)
    if error:
        return None, error
    tokens = [np.array(r["tokens"], dtype=np.int64) for r in results]
    if rows_per_rank:
        tokens = [np.concatenate(tokens)]
    elif any(not np.array_equal(t, tokens[0]) for t in tokens):
        return None, "ranks generated different tokens"
    if results[0]["forwards"] != args.new_tokens:
        return None, (f"{results[0]['forwards']} forwards of the model for "
                      f"{args.new_tokens} new tokens (expected one per token)")
    # Collectives per decode forward (forwards 2..M), rank 0; every rank
    # issues the same ones.
    decode = results[0]["per_forward"][1:]
    gathered = statistics.median(sum(v[1] for k, v in f.items() if "gather" in k or
                                     k == "broadcast") for f in decode) if decode else 0
    names = sorted({k for f in decode for k, v in f.items() if v[0]})
    calls = {k: statistics.median(f.get(k, [0, 0])[0] for f in decode) for k in names}
    detail = ", ".join(f"{calls[k]:g} {k}" for k in names) or "no collectives"
    return {"tokens": tokens[0], "ttft": max(r["ttft"] for r in results),
            "decode": max(r["decode"] for r in results), "gathered": gathered,
            "gathered_how": f"counted per decode forward (median): {detail}",
            "rss": max(r["peak_rss"] for r in results), "version": results[0]["version"]}, None


#===------------------------------------------------------------------------===#
# zrun
#===------------------------------------------------------------------------===#

ZCC_REFUSES_GENERATE = re.compile(
    r"generate is not available|Unknown command line argument '--(batch|max-seq-len|"
    r"prompt-len)\b|for argument '--mode'|Cannot find option named 'generate'")


def parse_size(number, unit):
    return float(number.replace(",", "")) * SIZE_UNITS.get(unit or "B", 1)


def parse_zrun_summary(text):
    """What zrun generate's summary says (docs/generation.md section 5), read
    loosely: the last decode tokens/s, time to first token and bytes
    gathered per decoded token (the run-time count from --stats when it is
    printed, else the plan's)."""
    found = {}
    for line in text.splitlines():
        lower = line.lower()
        rate = re.search(r"([\d,]+(?:\.\d+)?)\s*tok(?:en)?s?/s", line)
        if rate and "decode" in lower:
            found["rate"] = float(rate.group(1).replace(",", ""))
        elif rate and "rate" not in found and "progress" not in lower:
            found["rate_any"] = float(rate.group(1).replace(",", ""))
        ttft = re.search(r"first token\D*?([\d.]+)\s*(ms|s)\b", line, re.I)
        if ttft:
            found["ttft"] = float(ttft.group(1)) / (1000 if ttft.group(2) == "ms" else 1)
        step = re.search(r"gathered per decode step: ([\d,.]+) (B|KiB|MiB|GiB) \(plan\)"
                         r"(?:, ([\d,.]+) (B|KiB|MiB|GiB) \(counted\))?", line)
        if step:
            # zrun's own summary line; one decode step is one token per row.
            found.setdefault("gathered_plan", parse_size(step.group(1), step.group(2)))
            if step.group(3):
                found.setdefault("gathered_run", parse_size(step.group(3), step.group(4)))
            continue
        if "per" in lower and "token" in lower and "gather" in lower:
            # One figure, or the plan's and the run-time count on one line:
            # a figure belongs to the last keyword before it.
            for match in re.finditer(r"([\d,]+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|KB|MB|GB)\b", line):
                before = lower[:match.start()]
                run_at = max(before.rfind(k) for k in ("count", "stats", "measured", "run"))
                plan_at = before.rfind("plan")
                key = "gathered_run" if run_at > plan_at else "gathered_plan"
                found.setdefault(key, parse_size(match.group(1), match.group(2)))
    if "rate" not in found and "rate_any" in found:
        found["rate"] = found["rate_any"]
    return found


def zrun_budget(args, manifest, world):
    """Per-rank budget of the streamed row: the rank's shards, the KV cache,
    --streamed-fraction of the model resident or in flight, and a fixed
    allowance for activations."""
    params = manifest["parameter_bytes"]
    return int(params / world + kv_cache_bytes(args) + args.streamed_fraction * params
               + args.activation_allowance * MiB)


def kv_cache_bytes(args):
    head_dim = LLAMA["hidden_size"] // LLAMA["num_attention_heads"]
    return (2 * LLAMA["num_hidden_layers"] * args.batch * LLAMA["num_key_value_heads"]
            * (args.prompt_len + args.new_tokens) * head_dim * 4)


def predicted_rates(report):
    """What zcc's report predicts: {'carry': decode tokens/s with the carry over
    without it (1.0 when zcc did not carry: the two schedules are the same),
    'jit': the chosen policy's decode tokens/s over jit's}."""
    predicted = {}
    carried = re.search(r"decode/token .*; tokens/s ([0-9.]+) vs ([0-9.]+)", report)
    if carried:
        predicted["carry"] = float(carried.group(1)) / float(carried.group(2))
    elif re.search(r"carried group \(default policy\): none:", report):
        predicted["carry"] = 1.0
    versus_jit = re.search(r"default / jit: ([0-9.]+)x tokens/s", report)
    if versus_jit:
        predicted["jit"] = float(versus_jit.group(1))
    return predicted


def run_zrun(args, manifest, world, variant):
    """Returns (row, error, skip reason)."""
    import numpy as np
    if not os.path.exists(args.zcc) or not os.path.exists(args.zrun):
        return None, None, f"no zcc/zrun at {args.zcc}, {args.zrun} (build first)"
    plan = os.path.join(args.work_dir, f"gen-{variant}-{world}.zplan")
    compile_cmd = [args.zcc, os.path.join(MODEL_DIR, "plain.onnx"), "--mode=generate",
                   f"--batch={args.batch}",
                   f"--max-seq-len={args.prompt_len + args.new_tokens}",
                   f"--prompt-len={args.prompt_len}", f"--world-size={world}",
                   "--hardware=cpu", "--dump=report", "-o", plan]
    if args.hardware_profile:
        compile_cmd.append(f"--hardware-profile={args.hardware_profile}")
    budget = None
    if variant in ("streamed", "streamed-nocarry"):
        budget = zrun_budget(args, manifest, world)
        compile_cmd.append(f"--memory-budget={budget}")
    if variant == "streamed-nocarry":
        # The same budget without the cross-step prefetch: what it gains.
        compile_cmd.append("--cross-step-prefetch=false")
    if variant == "jit":
        compile_cmd.append("--policy=jit")
    done = subprocess.run(compile_cmd, capture_output=True, text=True, timeout=args.timeout)
    report = done.stdout
    with open(plan + ".zcc.log", "w") as handle:
        handle.write(" ".join(compile_cmd) + "\n" + done.stdout + done.stderr)
    if done.returncode != 0:
        message = done.stderr.strip().splitlines()
        message = message[0][:200] if message else f"exit status {done.returncode}"
        if ZCC_REFUSES_GENERATE.search(done.stderr):
            return None, None, f"zcc refuses --mode generate: {message}"
        return None, f"zcc: {message}", None
    tokens_path = os.path.join(args.work_dir, f"zrun-{variant}-{world}.tokens.npy")
    logits_path = os.path.join(args.work_dir, f"zrun-{variant}-{world}.logits.npy")
    for path in (tokens_path, logits_path):
        if os.path.exists(path):
            os.remove(path)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    # Replicated, as every other row of this bench: each rank generates the
    # same B rows (zrun's prompt file is the global batch of N x B rows,
    # docs/generation.md section 8; dp_generate_bench.py splits the rows).
    prompt_path = os.path.join(args.work_dir, f"prompt-x{world}.npy")
    np.save(prompt_path, np.tile(np.load(os.path.join(args.work_dir, "prompt.npy")), (world, 1)))
    command = ["mpirun", "-np", str(world), "--oversubscribe", "--bind-to", "none",
               args.zrun, plan, "generate", "--prompt", prompt_path,
               "--max-new-tokens", str(args.new_tokens), "--output", tokens_path,
               "--logits-output", logits_path, "--stats"]
    if os.geteuid() == 0:
        command.insert(1, "--allow-run-as-root")
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env,
                              timeout=args.timeout)
        output = done.stdout + done.stderr
        if done.returncode != 0 and "--logits-output" in output:
            # A zrun without the optional per-step logits: tokens only.
            at = command.index("--logits-output")
            del command[at:at + 2]
            done = subprocess.run(command, capture_output=True, text=True, env=env,
                                  timeout=args.timeout)
            output = done.stdout + done.stderr
    except subprocess.TimeoutExpired:
        return None, f"zrun timed out after {args.timeout} s", None
    with open(os.path.join(args.work_dir, f"zrun-{variant}-{world}.log"), "w") as handle:
        handle.write(" ".join(command) + "\n" + output)
    if done.returncode != 0:
        return None, f"zrun exit status {done.returncode}: {output.strip()[-600:]}", None
    if not os.path.exists(tokens_path):
        return None, f"zrun wrote no {tokens_path}", None
    summary = parse_zrun_summary(output)
    # The summary's rate counts every rank's rows: one rank's B rows'.
    rate = summary.get("rate") / world if summary.get("rate") else None
    decode_tokens = args.batch * (args.new_tokens - 1)
    row = {"tokens": np.load(tokens_path).astype(np.int64)[:args.batch],
           "ttft": summary.get("ttft"),
           "decode": decode_tokens / rate if rate else None,
           "budget": budget,
           # Each line once (a line printed by every rank too), in order.
           "summary": list(dict.fromkeys(
               l.strip() for l in output.splitlines()
               if re.search(r"tok/s|first token|per (decoded )?token|gathered|resident|cache",
                            l, re.I) and "progress" not in l.lower()))[-8:],
           "report": [l.rstrip() for l in report.splitlines()
                      if re.search(r"per token|resident|kv cache|tok/s|tokens/s|carried group",
                                   l, re.I)],
           "predicted": predicted_rates(report)}
    if os.path.exists(logits_path):
        row["logits"] = np.load(logits_path)[:, :args.batch]  # [M, N*B, V]: rank 0's rows
    if "gathered_run" in summary:
        row["gathered"], row["gathered_how"] = summary["gathered_run"], "zrun --stats count"
    elif "gathered_plan" in summary:
        row["gathered"] = summary["gathered_plan"]
        row["gathered_how"] = "the plan's decode program, from zrun's summary"
    else:
        row["gathered"], row["gathered_how"] = None, "not found in zrun's output"
    if rate is None:
        row["note"] = "no decode tok/s line in zrun's output"
    return row, None, None


#===------------------------------------------------------------------------===#
# Parent
#===------------------------------------------------------------------------===#

def environment(args):
    import numpy as np
    lines = [f"# python {sys.version.split()[0]} ({sys.executable}), numpy {np.__version__}, "
             f"cores {os.cpu_count()}, load {os.getloadavg()[0]:.2f} before"]
    try:
        import onnxruntime
        lines.append(f"# onnxruntime {onnxruntime.__version__}")
    except ImportError:
        lines.append("# onnxruntime not importable")
    for name, python, probe in (
            ("deepspeed", args.deepspeed_python,
             "import torch, deepspeed; print(torch.__version__, deepspeed.__version__)"),
            ("fsdp2", args.fsdp2_python, "import torch; print(torch.__version__)")):
        if name in args.peers:
            out = subprocess.run([python, "-c", probe], capture_output=True, text=True,
                                 env=dict(os.environ, DS_ACCELERATOR="cpu"))
            version = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else \
                "not importable"
            what = "torch, deepspeed" if name == "deepspeed" else "torch"
            lines.append(f"# {name} workers: {python}: {what} {version}")
    lines.append(f"# zcc {args.zcc}, zrun {args.zrun}")
    return lines


def compare_tokens(tokens, reference):
    import numpy as np
    if tokens.shape != reference.shape:
        return f"shape {list(tokens.shape)} != {list(reference.shape)}"
    diff = np.argwhere(tokens != reference)
    if not len(diff):
        return "same"
    row, step = diff[0]
    return (f"DIFF: {len(diff)} of {tokens.size}, first at row {row} step {step} "
            f"({tokens[row, step]} != {reference[row, step]})")


def logits_error(logits, reference):
    import numpy as np
    if logits is None or reference is None or logits.shape != reference.shape:
        return None
    return float(np.abs(logits - reference).max() / np.abs(reference).max())


def decode_rate(row, args):
    """Decoded tokens per second of all rows together, or None."""
    if not row.get("decode"):
        return None
    return args.batch * (args.new_tokens - 1) / row["decode"]


def cell(value, text):
    """`text` formatted with `value`, or n/a when there is no value."""
    return "n/a" if value is None else text.format(value)


def print_table(rows, args, manifest):
    params = manifest["parameter_bytes"]
    print(f"{'row':<16} {'N':>2} {'TTFT':>9} {'decode tok/s':>12} {'gathered/token':>15} "
          f"{'/psi':>6} {'x DeepSpeed':>11} {'x ort-kv':>8}  tokens vs oracle")
    ort = rows.get(("ort-kv", 1))
    ort_rate = decode_rate(ort, args) if ort else None
    for (name, world), row in rows.items():
        rate = decode_rate(row, args)
        ds = rows.get(("deepspeed", world))
        ds_rate = decode_rate(ds, args) if ds else None
        gathered = row.get("gathered")
        print(f"{name:<16} {world:>2} {cell(row.get('ttft'), '{:.3f} s'):>9} "
              f"{cell(rate, '{:.2f}'):>12} "
              f"{cell(None if gathered is None else gathered / MiB, '{:.2f} MiB'):>15} "
              f"{cell(None if gathered is None else gathered / params, '{:.3f}'):>6} "
              f"{cell(rate / ds_rate if rate and ds_rate else None, '{:.3f}'):>11} "
              f"{cell(rate / ort_rate if rate and ort_rate else None, '{:.3f}'):>8}  "
              f"{row.get('check', 'n/a')}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", choices=["deepspeed", "fsdp2"], help=argparse.SUPPRESS)
    parser.add_argument("--prompt-file", default="prompt.npy", help=argparse.SUPPRESS)
    parser.add_argument("--rows-per-rank", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--tag", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worlds", default="1,2",
                        help="rank counts; at N=1 only zrun resident runs (nothing to shard)")
    parser.add_argument("--batch", type=int, default=1, help="B: sequences per generate")
    parser.add_argument("--prompt-len", type=int, default=32, help="P: prompt tokens per row")
    parser.add_argument("--new-tokens", type=int, default=64, help="M: tokens generated")
    parser.add_argument("--peers", default="ort-kv,ort-full,deepspeed,fsdp2,zrun")
    parser.add_argument("--zrun-variants",
                        default="resident,streamed,streamed-nocarry,jit")
    parser.add_argument("--streamed-fraction", type=float, default=0.4,
                        help="streamed row's budget: shards + KV cache + this fraction of "
                             "the model + --activation-allowance")
    parser.add_argument("--activation-allowance", type=float, default=64,
                        help="MiB of the streamed budget for activations")
    parser.add_argument("--hardware-profile", default=None,
                        help="zcc --hardware-profile: a calibrated profile "
                             "(bench/calibrate_cpu.cpp) in place of the embedded cpu one")
    parser.add_argument("--zcc", default=os.environ.get(
        "ZCC", os.path.join(REPO_ROOT, "build", "bin", "zcc")))
    parser.add_argument("--zrun", default=os.environ.get(
        "ZRUN", os.path.join(REPO_ROOT, "build", "bin", "zrun")))
    parser.add_argument("--deepspeed-python",
                        default=DEEPSPEED_PYTHON if os.path.exists(DEEPSPEED_PYTHON)
                        else sys.executable)
    parser.add_argument("--fsdp2-python",
                        default=FSDP2_PYTHON if os.path.exists(FSDP2_PYTHON)
                        else sys.executable)
    parser.add_argument("--work-dir", default=os.path.join(REPO_ROOT, "build", "generate-bench"))
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return 0
    args.peers = args.peers.split(",")
    os.makedirs(args.work_dir, exist_ok=True)

    import numpy as np
    for line in environment(args):
        print(line)
    try:
        manifest = ensure_model()
    except BenchError as exc:
        print(f"generate_bench: error: {exc}", file=sys.stderr)
        return 1
    params = manifest["parameter_bytes"]
    print(f"# model: {MODEL_DIR}: Llama {LLAMA['num_hidden_layers']} layers x "
          f"{LLAMA['hidden_size']} hidden, {LLAMA['num_attention_heads']} heads "
          f"({LLAMA['num_key_value_heads']} kv), intermediate {LLAMA['intermediate_size']}, "
          f"vocab {LLAMA['vocab_size']}, untied lm_head, {manifest['parameters']:,} parameters "
          f"(psi = {params:,} B fp32); exports vs torch: "
          + ", ".join(f"{k} {v:.1e}" for k, v in manifest["export_errors"].items()))
    prompt = np.random.default_rng(PROMPT_SEED).integers(
        1, LLAMA["vocab_size"], size=(args.batch, args.prompt_len), dtype=np.int64)
    np.save(os.path.join(args.work_dir, "prompt.npy"), prompt)
    print(f"# B={args.batch} x P={args.prompt_len} prompt tokens, M={args.new_tokens} new "
          f"tokens, greedy, one thread per rank; KV cache "
          f"{kv_cache_bytes(args):,} B at L = P + M = {args.prompt_len + args.new_tokens}")
    print(flush=True)

    rows, failures, skips = {}, [], []

    def record(name, world, row, error, skip=None):
        if skip:
            skips.append(f"{name} N={world}: {skip}")
            print(f"# {name} N={world} skipped: {skip}", flush=True)
        elif error:
            failures.append(f"{name} N={world}: {error}")
            print(f"# {name} N={world} failed: {error}", flush=True)
        else:
            rows[(name, world)] = row
            np.save(os.path.join(args.work_dir, f"{name}-{world}.tokens.npy"), row["tokens"])
            rate = decode_rate(row, args)
            print(f"# {name} N={world}: " + (f"{rate:.2f} decode tok/s" if rate else
                                              "no rate") , flush=True)

    for name, run in (("ort-full", run_ort_full), ("ort-kv", run_ort_kv)):
        if name in args.peers:
            print(f"# running {name} ...", file=sys.stderr, flush=True)
            try:
                record(name, 1, run(prompt, args.new_tokens), None)
            except Exception as exc:  # noqa: BLE001 - reported as a failed row
                record(name, 1, None, f"{type(exc).__name__}: {exc}")
    port = 29500 + os.getpid() % 1000
    for world in [int(w) for w in args.worlds.split(",")]:
        for peer in ("deepspeed", "fsdp2"):
            if peer in args.peers and world > 1:
                print(f"# running {peer} N={world} ...", file=sys.stderr, flush=True)
                port += 1
                row, error = run_peer(args, peer, world, port)
                record(peer, world, row, error)
        if "zrun" in args.peers:
            for variant in args.zrun_variants.split(","):
                if world == 1 and variant != "resident":
                    continue
                print(f"# running zrun {variant} N={world} ...", file=sys.stderr, flush=True)
                row, error, skip = run_zrun(args, manifest, world, variant)
                record(f"zrun-{variant}", world, row, error, skip)

    if "ort-kv" in args.peers and len(rows) > 1:
        # Again at the end: the machine's load drifts over a run of minutes,
        # and the two ort-kv rows show by how much.
        print("# running ort-kv again ...", file=sys.stderr, flush=True)
        try:
            record("ort-kv-end", 1, run_ort_kv(prompt, args.new_tokens), None)
        except Exception as exc:  # noqa: BLE001 - reported as a failed row
            record("ort-kv-end", 1, None, f"{type(exc).__name__}: {exc}")

    oracle_name = "ort-full" if ("ort-full", 1) in rows else "ort-kv"
    oracle = rows.get((oracle_name, 1))
    for key, row in rows.items():
        if oracle is not None:
            row["check"] = compare_tokens(row["tokens"], oracle["tokens"])
            error = logits_error(row.get("logits"), oracle.get("logits"))
            if error is not None and key[0] != oracle_name:
                row["check"] += f", logits {error:.1e}"
            if not row["check"].startswith("same"):
                failures.append(f"{key[0]} N={key[1]}: tokens {row['check']}")

    print()
    print(f"tokens/s of greedy decode (B x (M-1) / decode time); oracle: {oracle_name}; "
          f"psi = {params / MiB:.1f} MiB")
    print_table(rows, args, manifest)
    print()
    for (name, world), row in rows.items():
        print(f"  {name} N={world}: gathered per token: {row.get('gathered_how', 'n/a')}"
              + (f"; peak RSS/rank {row['rss'] / MiB:.0f} MiB" if row.get("rss") else "")
              + (f"; budget {row['budget']:,} B/rank" if row.get("budget") else "")
              + (f"; {row['note']}" if row.get("note") else ""))
        for line in row.get("summary", []):
            print(f"    {line}")
        for line in row.get("report", []):
            print(f"    zcc report: {line}")
    ds = rows.get(("deepspeed", 2))
    resident = rows.get(("zrun-resident", 2))
    ort = rows.get(("ort-kv", 1))
    if resident and ds and decode_rate(resident, args) and decode_rate(ds, args):
        print(f"  goal: zrun resident >= 3x DeepSpeed at N=2: "
              f"{decode_rate(resident, args) / decode_rate(ds, args):.2f}x")
    if resident and ort and decode_rate(resident, args) and decode_rate(ort, args):
        print(f"  goal: ort-kv / zrun resident (N=2) <= 1.3: "
              f"{decode_rate(ort, args) / decode_rate(resident, args):.2f}")
    carry = rows.get(("zrun-streamed", 2))
    nocarry = rows.get(("zrun-streamed-nocarry", 2))
    if carry and nocarry and decode_rate(carry, args) and decode_rate(nocarry, args):
        print(f"  cross-step prefetch (streamed / streamed-nocarry, N=2, same budget): "
              f"{decode_rate(carry, args) / decode_rate(nocarry, args):.3f}x tokens/s "
              f"measured, {carry['predicted'].get('carry', float('nan')):.3f}x predicted "
              f"by zcc's report")
    jit = rows.get(("zrun-jit", 2))
    if carry and jit and decode_rate(carry, args) and decode_rate(jit, args):
        print(f"  prefetch placement (streamed / jit, N=2): "
              f"{decode_rate(carry, args) / decode_rate(jit, args):.3f}x tokens/s measured, "
              f"{carry['predicted'].get('jit', float('nan')):.3f}x predicted by zcc's report "
              f"(jit under the streamed budget)")
    for skip in skips:
        print(f"note: skipped {skip}")
    for failure in failures:
        print(f"generate_bench: error: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
