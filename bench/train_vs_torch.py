#!/usr/bin/env python3
"""zrun train against PyTorch eager, one process, one thread (--threads T for
T): the simplest thing a user would run instead (issue 24).

Runs with the interpreter of bench/.venv-peers (torch 2.5.1, transformers
4.46.3, onnx; made by `python3 bench/train_peers.py --setup`):

    bench/.venv-peers/bin/python bench/train_vs_torch.py
    bench/.venv-peers/bin/python bench/train_vs_torch.py --sizes small --trials 1
    bench/.venv-peers/bin/python bench/train_vs_torch.py --parts forward

What it does, per model size:

  model   transformers LlamaForCausalLM from a config, random init (torch
          seed 0), eager attention, untied head, vocab 8192:
            small  4 layers, hidden 256, 4 heads, MLP 688   (7.4M parameters)
            large  8 layers, hidden 512, 8 heads, MLP 1376  (about 33M)
          saved once; torch loads these weights, and zcc compiles their ONNX
          export (torch.onnx.export, dynamo=False, opset 17, logits only).
  data    data/gpl-3.0.bin (byte-level uint16 tokens); batch B x T (default
          4 x 128) per step, rows chosen by runtime/train/BatchSampler.h's
          formula (train_peers.row_offsets, seed 0), labels = input_ids.
  optim   AdamW, lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0, fp32.
  torch   torch.set_num_threads(1); loss = model(input_ids, labels).loss;
          backward; step; zero_grad. Eager mode, as written.
  zrun    zcc --mode train --world-size 1; `mpirun -np 1 zrun PLAN train
          --threads 1` (OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=1), default flags.

The forward (--parts forward; issue 24's `zrun run` against onnxruntime and
torch), on the same model, weights and first batch:

  torch   model.eval() under torch.no_grad(), 1 thread: the logits.
  ort     onnxruntime 1.32 on the same ONNX export zcc compiles, one
          intra-op and one inter-op thread, sequential execution.
  zrun    zcc --mode infer --world-size 1; `mpirun -np 1 zrun PLAN run
          --repeat 5 --threads 1`, the `run time` it prints (the last run).
  zrun-openblas  the same with ZPLAN_GEMM=openblas: the f32 GEMMs through
          OpenBLAS's SGEMM instead of zplan's AVX-512 kernel
          (runtime/cpu/Gemm.h), which a CPU with AVX-512 otherwise takes.
  Each is timed the same way: 5 back-to-back runs after the session or
  plan is loaded, the last one timed (zrun's first run is its warm-up, as
  ort's and torch's). zrun's and ort's logits must be within 1e-4 x
  max|logit| of torch's, else the script exits 1.

Trials alternate torch and zrun (a slow phase of the shared machine falls on
both). Each trial's step time is its median over the steps after --warmup
(zrun's from its progress lines' cumulative rates, as train_peers.py reads
them); the reported figure is the median over trials, and tokens/s ratios
zrun / torch are printed per trial and for the medians. The first losses
must agree: step 1 within 1e-5 relative (the same weights and batch, before
any update), else the script exits 1 as it does when any command fails.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True
BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)
sys.path.insert(0, os.path.join(REPO_ROOT, "scripts"))

import train_peers  # noqa: E402  (row_offsets, the optimizer's constants)

SIZES = {
    "small": dict(layers=4, hidden=256, heads=4, intermediate=688),
    "large": dict(layers=8, hidden=512, heads=8, intermediate=1376),
}
VOCAB = 8192
STEP1_RTOL = 1e-5


def llama(size):
    import transformers
    shape = SIZES[size]
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=shape["hidden"],
        intermediate_size=shape["intermediate"], num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"], num_key_value_heads=shape["heads"],
        max_position_embeddings=512, hidden_act="silu", rms_norm_eps=1e-6,
        attention_dropout=0.0, use_cache=False, attn_implementation="eager",
        tie_word_embeddings=False, pad_token_id=None, bos_token_id=0, eos_token_id=0)
    return transformers.LlamaForCausalLM(config)


def prepare(args, size):
    """weights-SIZE.pt and SIZE.onnx in the work directory; the parameter
    count."""
    import torch
    import export_fixtures
    weights = os.path.join(args.work_dir, f"weights-{size}.pt")
    onnx_path = os.path.join(args.work_dir, f"{size}.onnx")
    torch.manual_seed(0)
    model = llama(size)
    if not (os.path.exists(weights) and os.path.exists(onnx_path)):
        torch.save(model.state_dict(), weights)
        wrapper = export_fixtures.LogitsOnly(model.eval()).eval()
        with open(onnx_path, "wb") as handle:
            handle.write(export_fixtures.export_bytes(wrapper, 17))
    return sum(p.numel() for p in model.parameters())


def batches(args, tokens, steps):
    import numpy as np
    for step in range(steps):
        offsets = train_peers.row_offsets(0, len(tokens), args.rows, args.seq, 1, step, 0)
        yield np.stack([tokens[o:o + args.seq].astype(np.int64) for o in offsets])


def load_llama(args, size):
    """The saved model of `size`, in this process at --threads threads."""
    import torch
    torch.set_num_threads(args.threads)
    model = llama(size)
    model.load_state_dict(torch.load(os.path.join(args.work_dir, f"weights-{size}.pt"),
                                     weights_only=True))
    return model


def zrun_on_one_rank(args, plan, verb, flags, extra_env=None):
    """Runs `mpirun -np 1 zrun PLAN VERB FLAGS --threads T` (T kernel
    threads: zrun splits the GEMMs and every other kernel over them, and
    keeps OpenBLAS's own at one); its stdout and stderr together (exits on
    failure)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS=str(args.threads), **(extra_env or {}))
    command = ["mpirun", "-np", "1", "--bind-to", "none", args.zrun, plan, verb] + flags + [
        "--threads", str(args.threads)]
    if os.geteuid() == 0:
        command.insert(1, "--allow-run-as-root")
    done = subprocess.run(command, capture_output=True, text=True, env=env,
                          timeout=args.timeout)
    output = done.stdout + done.stderr
    if done.returncode != 0:
        sys.exit(f"FAIL: {' '.join(command)}\n{output.strip()[-1500:]}")
    return output


def run_torch(args, size, tokens):
    """(losses, seconds per step) of eager training in this process."""
    import torch
    model = load_llama(args, size)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=train_peers.LR,
                                  betas=train_peers.BETAS, eps=train_peers.EPS,
                                  weight_decay=train_peers.WEIGHT_DECAY)
    losses, seconds = [], []
    for batch in batches(args, tokens, args.steps):
        ids = torch.from_numpy(batch)
        begin = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        seconds.append(time.perf_counter() - begin)
    return losses, seconds


def compile_plan(args, size):
    plan = os.path.join(args.work_dir, f"{size}.zplan")
    command = [args.zcc, os.path.join(args.work_dir, f"{size}.onnx"), "--mode=train",
               "--world-size=1", f"--input-shape=input_ids={args.rows}x{args.seq}",
               "-o", plan]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"FAIL: {' '.join(command)}\n{done.stderr.strip()}")
    return plan


def run_zrun(args, plan, size, trial):
    """(losses, seconds per step) of `zrun train` on one rank."""
    loss_log = os.path.join(args.work_dir, f"zrun-{size}-{trial}.loss")
    output = zrun_on_one_rank(args, plan, "train", [
        "--data", args.data, "--steps", str(args.steps),
        "--lr", repr(train_peers.LR), "--beta1", repr(train_peers.BETAS[0]),
        "--beta2", repr(train_peers.BETAS[1]), "--eps", repr(train_peers.EPS),
        "--weight-decay", repr(train_peers.WEIGHT_DECAY), "--seed", "0",
        "--loss-log", loss_log])
    losses = [float(line.split("\t")[1]) for line in open(loss_log) if line.strip()]
    seconds = train_peers.step_seconds(output, args.rows * args.seq)
    if len(losses) != args.steps or len(seconds) != args.steps:
        sys.exit(f"FAIL: zrun logged {len(losses)} losses and {len(seconds)} progress "
                 f"lines for {args.steps} steps:\n{output.strip()[-1500:]}")
    blas = re.search(r"^BLAS: (.*)$", subprocess.run([args.zrun, "--help"], text=True,
                                                     capture_output=True).stdout, re.M)
    return losses, seconds, blas.group(1) if blas else "unknown"


FORWARD_REPEAT = 5
FORWARD_TOLERANCE = 1e-4


def forward_torch(args, size, ids):
    """(logits, seconds of the last of FORWARD_REPEAT runs) of eager torch."""
    import torch
    model = load_llama(args, size)
    model.eval()
    batch = torch.from_numpy(ids)
    with torch.no_grad():
        for _ in range(FORWARD_REPEAT):
            begin = time.perf_counter()
            logits = model(input_ids=batch).logits
            seconds = time.perf_counter() - begin
    return logits.numpy(), seconds


def forward_ort(args, size, ids):
    """(logits, seconds of the last run) of onnxruntime, one thread."""
    import onnxruntime
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    session = onnxruntime.InferenceSession(os.path.join(args.work_dir, f"{size}.onnx"),
                                           options, providers=["CPUExecutionProvider"])
    for _ in range(FORWARD_REPEAT):
        begin = time.perf_counter()
        logits = session.run(None, {"input_ids": ids})[0]
        seconds = time.perf_counter() - begin
    return logits, seconds


def forward_zrun(args, size, ids, trial, gemm=None):
    """(logits, the run time zrun prints) of `zrun run` on one rank; `gemm`
    "openblas" sets ZPLAN_GEMM to it."""
    import numpy as np
    plan = os.path.join(args.work_dir, f"{size}-infer.zplan")
    if not os.path.exists(plan):
        command = [args.zcc, os.path.join(args.work_dir, f"{size}.onnx"), "--mode=infer",
                   f"--input-shape=input_ids={args.rows}x{args.seq}", "-o", plan]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"FAIL: {' '.join(command)}\n{done.stderr.strip()}")
    ids_path = os.path.join(args.work_dir, f"ids-{size}.npy")
    out_path = os.path.join(args.work_dir,
                            f"logits-{size}-{trial}{'-' + gemm if gemm else ''}.npy")
    np.save(ids_path, ids)
    output = zrun_on_one_rank(args, plan, "run", [
        "--input", f"input_ids={ids_path}", "--output", f"logits={out_path}",
        "--repeat", str(FORWARD_REPEAT)], {"ZPLAN_GEMM": gemm} if gemm else None)
    found = re.search(r"zrun: run time ([\d.]+) s", output)
    if not found:
        sys.exit(f"FAIL: zrun run printed no run time:\n{output.strip()[-1500:]}")
    return np.load(out_path), float(found.group(1))


def run_forward(args, size, tokens):
    """Prints the forward's times and ratios; False when a check fails."""
    import numpy as np
    ids = next(batches(args, tokens, 1))
    times = {"torch": [], "ort": [], "zrun": [], "zrun-openblas": []}
    ok = True
    for trial in range(args.trials):
        expected, t_seconds = forward_torch(args, size, ids)
        got_ort, o_seconds = forward_ort(args, size, ids)
        got_zrun, z_seconds = forward_zrun(args, size, ids, trial)
        got_blas, b_seconds = forward_zrun(args, size, ids, trial, gemm="openblas")
        bound = FORWARD_TOLERANCE * float(np.abs(expected).max())
        for name, got in (("ort", got_ort), ("zrun", got_zrun),
                          ("zrun-openblas", got_blas)):
            diff = float(np.abs(got.astype(np.float64) - expected).max())
            if not diff <= bound:
                print(f"FAIL {size} forward: {name}'s logits differ from torch's by {diff:.3g} "
                      f"> {bound:.3g}")
                ok = False
        times["torch"].append(t_seconds)
        times["ort"].append(o_seconds)
        times["zrun"].append(z_seconds)
        times["zrun-openblas"].append(b_seconds)
        print(f"{size} forward trial {trial + 1}: torch {t_seconds * 1e3:.1f} ms, ort "
              f"{o_seconds * 1e3:.1f} ms, zrun {z_seconds * 1e3:.1f} ms, zrun-openblas "
              f"{b_seconds * 1e3:.1f} ms; speed zrun/ort {o_seconds / z_seconds:.3f}, "
              f"zrun/torch {t_seconds / z_seconds:.3f}, zrun/zrun-openblas "
              f"{b_seconds / z_seconds:.3f}")
    med = {name: statistics.median(values) for name, values in times.items()}
    print(f"{size} forward {args.rows}x{args.seq}: torch {med['torch'] * 1e3:.1f} ms, ort "
          f"{med['ort'] * 1e3:.1f} ms, zrun {med['zrun'] * 1e3:.1f} ms, zrun-openblas "
          f"{med['zrun-openblas'] * 1e3:.1f} ms (medians); speed "
          f"zrun/ort {med['ort'] / med['zrun']:.3f}, zrun/torch "
          f"{med['torch'] / med['zrun']:.3f}, zrun/zrun-openblas "
          f"{med['zrun-openblas'] / med['zrun']:.3f}")
    return ok


def median_step(seconds, warmup):
    return statistics.median(seconds[warmup:])


def add_run_arguments(parser):
    """The batch, data, tools, work directory and timeout, as this script and
    bench/offload_bench.py (which trains its models) take them."""
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--data", default=os.path.join(REPO_ROOT, "data", "gpl-3.0.bin"))
    parser.add_argument("--zcc", default=os.path.join(REPO_ROOT, "build", "bin", "zcc"))
    parser.add_argument("--zrun", default=os.path.join(REPO_ROOT, "build", "bin", "zrun"))
    parser.add_argument("--work-dir", default=os.path.join(REPO_ROOT, "build",
                                                           "train-vs-torch"))
    parser.add_argument("--timeout", type=int, default=1800)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="small,large")
    parser.add_argument("--threads", type=int, default=1,
                        help="threads of every process: torch.set_num_threads, ort's "
                             "intra-op threads, zrun --threads (its kernel threads)")
    parser.add_argument("--parts", default="train,forward",
                        help="train (zrun train against torch), forward (zrun run "
                             "against onnxruntime and torch), or both")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=3)
    add_run_arguments(parser)
    args = parser.parse_args()
    import numpy as np
    import torch
    os.makedirs(args.work_dir, exist_ok=True)
    tokens = np.fromfile(args.data, dtype=np.uint16)
    if tokens.max() >= VOCAB:
        sys.exit(f"FAIL: {args.data} holds token {tokens.max()}, past the vocabulary")
    print(f"# torch {torch.__version__} ({torch.get_num_threads()} threads before "
          f"set_num_threads({args.threads})); batch {args.rows}x{args.seq}; {args.steps} steps, median "
          f"over steps {args.warmup + 1}-{args.steps}; {args.trials} trial(s), alternating")
    failed = False
    parts = args.parts.split(",")
    for size in args.sizes.split(","):
        count = prepare(args, size)
        if "forward" in parts and not run_forward(args, size, tokens):
            failed = True
        if "train" not in parts:
            continue
        plan = compile_plan(args, size)
        torch_steps, zrun_steps, ratios = [], [], []
        for trial in range(args.trials):
            t_losses, t_seconds = run_torch(args, size, tokens)
            z_losses, z_seconds, blas = run_zrun(args, plan, size, trial)
            t_step, z_step = median_step(t_seconds, args.warmup), median_step(z_seconds,
                                                                               args.warmup)
            torch_steps.append(t_step)
            zrun_steps.append(z_step)
            ratios.append(t_step / z_step)
            step1 = abs(z_losses[0] - t_losses[0]) / abs(t_losses[0])
            last = abs(z_losses[-1] - t_losses[-1]) / abs(t_losses[-1])
            print(f"{size} trial {trial + 1}: torch {t_step * 1e3:.1f} ms/step, zrun "
                  f"{z_step * 1e3:.1f} ms/step, zrun/torch tokens/s {t_step / z_step:.3f}; "
                  f"loss step 1 torch {t_losses[0]:.6f} zrun {z_losses[0]:.6f} (rel "
                  f"{step1:.1e}), step {args.steps} rel {last:.1e}")
            if not step1 <= STEP1_RTOL:
                print(f"FAIL {size}: the step-1 losses differ by {step1:.2e} > {STEP1_RTOL}")
                failed = True
        t_med, z_med = statistics.median(torch_steps), statistics.median(zrun_steps)
        tokens_per_step = args.rows * args.seq
        print(f"{size}: {count:,} parameters; torch {tokens_per_step / t_med:,.0f} tok/s, "
              f"zrun {tokens_per_step / z_med:,.0f} tok/s; zrun/torch {t_med / z_med:.3f} "
              f"(medians; per trial {', '.join(f'{r:.3f}' for r in ratios)}); zrun {blas}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
