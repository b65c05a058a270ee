#!/usr/bin/env python3
"""Training peers on CPU ranks: zrun train against DeepSpeed ZeRO-3 and
PyTorch FSDP2, on the same model, weights, batches and optimizer.

Runs with the interpreter of its own virtualenv (bench/.venv-peers, git-
ignored; `--setup` makes it from PyPI: torch 2.5.1, transformers, DeepSpeed,
numpy, onnx and onnxruntime at pinned versions). FSDP2 needs a newer torch than that one
(torch 2.5's FSDP2 requires CUDA streams), so its workers run with the
interpreter of a second virtualenv, bench/.venv-fsdp2 (`--setup-fsdp2`:
pinned torch, transformers, numpy, onnx from PyPI); the parent, DeepSpeed and
zrun stay as they are. Neither venv is part of scripts/setup.sh or CI.

    python3 bench/train_peers.py --setup          # once: the venv
    python3 bench/train_peers.py --setup-fsdp2    # once: the FSDP2 venv
    bench/.venv-peers/bin/python bench/train_peers.py            # N = 2, 4
    bench/.venv-peers/bin/python bench/train_peers.py --worlds 2 --steps 10

What it does, per world size N (one thread per rank everywhere:
OMP_NUM_THREADS=1, torch.set_num_threads(1), zrun --threads 1):

  model   GPT-2 (transformers GPT2LMHeadModel, eager attention, no dropout),
          --layers x --hidden (default 4 x 256), 4 heads, vocab 256 (byte-
          level), 128 positions; built once with a fixed seed (scripts/
          export_fixtures.py's `build`, at this size) and saved; every peer
          loads these weights, and zcc compiles the ONNX export of them.
  data    data/gpl-3.0.bin when present, else the bytes of
          /usr/share/common-licenses/GPL-3 written as uint16 (the same
          byte-level corpus); rows chosen by runtime/train/BatchSampler.h's
          formula (re-implemented below), seed 0, B rows of T tokens per rank
          and step, labels = input_ids (the loss shifts them).
  optim   AdamW, lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0,
          no warmup, no clipping, fp32.
  peers   (a) DeepSpeed ZeRO-3, DS_ACCELERATOR=cpu, gloo, the client
              optimizer torch.optim.AdamW;
          (b) PyTorch FSDP2 (torch.distributed.fsdp.fully_shard, or the
              _composable one before torch 2.6, on every block and the root),
              gloo, torch.optim.AdamW, run by --fsdp2-python (default: the
              interpreter of bench/.venv-fsdp2 when it exists);
          (c) `mpirun -np N zrun PLAN train` on the plan zcc compiles from
              the ONNX export (--mode train, default policy and flags).

For each it reports the median step time over the steps after --warmup, the
collectives and the bytes they move per step (the peers: every
torch.distributed collective is wrapped and counted; zrun: the plan's
train_micro_step + optimizer_step, from zcc's report), peak RSS per rank,
and the first five losses against zrun's (relative difference). Ratios
zrun/DeepSpeed and zrun/FSDP2 are printed. A peer that fails is reported
with its error, not skipped silently.
"""

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True
BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
VENV = os.path.join(BENCH_DIR, ".venv-peers")
DEEPSPEED_VERSION = "0.16.4"  # the newest that supports torch 2.5 without pulling another torch
FSDP2_VENV = os.path.join(BENCH_DIR, ".venv-fsdp2")
# torch 2.7.1: FSDP2 is public (torch.distributed.fsdp, since 2.6) and its
# comm context takes streams from the device's module, so CPU/gloo works;
# the rest are the versions .venv-peers has, so both venvs export and
# train the same model code.
FSDP2_PINS = ["torch==2.7.1", "transformers==4.46.3", "numpy==2.4.6", "onnx==1.23.2"]

SEED = 1234
VOCAB = 256
HEADS = 4
POSITIONS = 128
LR, BETAS, EPS, WEIGHT_DECAY = 1e-3, (0.9, 0.999), 1e-8, 0.0
MASK64 = (1 << 64) - 1


#===------------------------------------------------------------------------===#
# Batches: runtime/train/BatchSampler.h, exactly
#===------------------------------------------------------------------------===#

def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def step_seconds(output, step_tokens):
    """Each step's seconds from zrun train's progress lines, which carry the
    cumulative rate since training began: the elapsed time at step k is
    tokens_k / rate_k, and a step's time the difference of two."""
    elapsed = [0.0]
    for match in re.finditer(r"step (\d+)/\d+\s+loss \S+\s+lr \S+\s+([\d,]+) tok/s",
                             output):
        rate = float(match.group(2).replace(",", ""))
        elapsed.append(int(match.group(1)) * step_tokens / rate if rate else 0.0)
    return [b - a for a, b in zip(elapsed, elapsed[1:])]


def row_offsets(seed, num_tokens, rows, row_tokens, ranks, step, rank):
    """Token offsets of the rows rank `rank` reads at step `step` (K = 1)."""
    key = splitmix64(seed ^ ((0x9E3779B97F4A7C15 * (step + 1)) & MASK64))
    return [splitmix64((key + q) & MASK64) % (num_tokens - row_tokens)
            for q in range(rank * rows, (rank + 1) * rows)]


#===------------------------------------------------------------------------===#
# Workers (one process per rank, for DeepSpeed and FSDP2)
#===------------------------------------------------------------------------===#

COUNTED = ["all_gather_into_tensor", "_all_gather_base", "all_gather",
           "reduce_scatter_tensor", "_reduce_scatter_base", "reduce_scatter",
           "all_reduce", "broadcast", "reduce", "all_to_all_single",
           "all_gather_coalesced", "all_reduce_coalesced"]


def tensor_bytes(value):
    import torch
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(tensor_bytes(v) for v in value)
    return 0


def install_counters(counts):
    """Wraps torch.distributed's collectives; counts[name] = [calls, bytes].
    Bytes are the full (unsharded) tensor of the collective: the output of a
    gather, the input of a reduce-scatter, the tensor of an all-reduce."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    def wrap(name, original):
        def counted(*args, **kwargs):
            tensors = list(args[:2]) + [v for k, v in kwargs.items()
                                        if k in ("output", "input", "tensor",
                                                 "output_tensor", "input_tensor",
                                                 "tensor_list", "input_list",
                                                 "output_tensor_list")]
            size = max((tensor_bytes(t) for t in tensors), default=0)
            entry = counts.setdefault(name, [0, 0])
            entry[0] += 1
            entry[1] += size
            return original(*args, **kwargs)
        counted.bench_counted = True
        return counted

    for name in COUNTED:
        for module in (dist, c10d):
            original = getattr(module, name, None)
            if original is not None and not hasattr(original, "bench_counted"):
                setattr(module, name, wrap(name, original))


def gpt2(layers, hidden):
    import transformers
    cfg = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=POSITIONS, n_embd=hidden, n_layer=layers,
        n_head=HEADS, n_inner=4 * hidden, activation_function="gelu_new",
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False,
        attn_implementation="eager", tie_word_embeddings=True,
        bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(cfg)


def import_fully_shard():
    """FSDP2's fully_shard: public since torch 2.6, _composable before."""
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    return fully_shard


def worker(args):
    import numpy as np
    import torch
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    counts = {}
    install_counters(counts)
    import torch.distributed as dist

    model = gpt2(args.layers, args.hidden)
    model.load_state_dict(torch.load(os.path.join(args.work_dir, "weights.pt"),
                                     weights_only=True))
    model.train()
    tokens = np.fromfile(args.data, dtype=np.uint16)

    if args.worker == "deepspeed":
        import deepspeed
        deepspeed.init_distributed(dist_backend="gloo")
        optimizer = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS,
                                      eps=EPS, weight_decay=WEIGHT_DECAY)
        config = {
            "train_micro_batch_size_per_gpu": args.rows,
            "gradient_accumulation_steps": 1,
            "gradient_clipping": 0,
            "fp16": {"enabled": False}, "bf16": {"enabled": False},
            "zero_optimization": {"stage": 3},
            "steps_per_print": 1 << 30,
            "wall_clock_breakdown": False,
        }
        engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer,
                                               config=config)

        def step(batch):
            loss = engine(input_ids=batch, labels=batch).loss
            engine.backward(loss)
            engine.step()
            return loss.item()
    else:
        fully_shard = import_fully_shard()
        dist.init_process_group("gloo")
        for block in model.transformer.h:
            fully_shard(block)
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS,
                                      eps=EPS, weight_decay=WEIGHT_DECAY)

        def step(batch):
            loss = model(input_ids=batch, labels=batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return loss.item()

    setup_counts = {k: list(v) for k, v in counts.items()}
    counts.clear()
    losses, seconds, per_step = [], [], []
    for s in range(args.steps):
        offsets = row_offsets(0, len(tokens), args.rows, args.seq, world, s, rank)
        batch = torch.from_numpy(np.stack(
            [tokens[o:o + args.seq].astype(np.int64) for o in offsets]))
        begin = time.perf_counter()
        losses.append(step(batch))
        seconds.append(time.perf_counter() - begin)
        per_step.append({k: list(v) for k, v in counts.items()})
        counts.clear()
    result = {"rank": rank, "torch": torch.__version__, "losses": losses, "seconds": seconds,
              "collectives": per_step, "setup_collectives": setup_counts,
              "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    with open(os.path.join(args.work_dir, f"{args.worker}-{world}-{rank}.json"),
              "w") as handle:
        json.dump(result, handle)
    dist.barrier()
    dist.destroy_process_group()


def launch_ranks(python, script, worker_args, world, port, work_dir, name, timeout):
    """Runs `python script worker_args` once per rank, as torch.distributed
    expects them (RANK, WORLD_SIZE, MASTER_ADDR/PORT; one thread each;
    DS_ACCELERATOR=cpu), logging each rank to WORK_DIR/NAME-WORLD-RANK.log.
    Each rank writes WORK_DIR/NAME-WORLD-RANK.json; returns (results, error):
    the ranks' parsed JSON files, or None and the first failure."""
    procs = []
    logs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank),
                   WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1",
                   MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="")
        log = open(os.path.join(work_dir, f"{name}-{world}-{rank}.log"), "w+")
        logs.append(log)
        procs.append(subprocess.Popen([python, os.path.abspath(script)] + worker_args,
                                      env=env, stdout=log, stderr=subprocess.STDOUT))
    error = None
    deadline = time.time() + timeout
    for proc in procs:
        try:
            proc.wait(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            error = f"timed out after {timeout} s"
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    results = []
    for rank, (proc, log) in enumerate(zip(procs, logs)):
        log.seek(0)
        text = log.read()
        log.close()
        path = os.path.join(work_dir, f"{name}-{world}-{rank}.json")
        if proc.returncode != 0 or not os.path.exists(path):
            lines = [l for l in text.splitlines() if l.strip()]
            errors = [l for l in lines if "Error" in l or "error" in l]
            error = error or (f"rank {rank} exit status {proc.returncode}: " +
                              (errors[-1] if errors else (lines[-1] if lines else "")))
            continue
        with open(path) as handle:
            results.append(json.load(handle))
    return (None if error else results), error


def run_peer(args, name, world, port):
    """Launches `world` training worker processes; returns (results, error)."""
    python = args.fsdp2_python if name == "fsdp2" else sys.executable
    worker_args = ["--worker", name, "--work-dir", args.work_dir, "--data", args.data,
                   "--layers", str(args.layers), "--hidden", str(args.hidden),
                   "--rows", str(args.rows), "--seq", str(args.seq),
                   "--steps", str(args.steps)]
    return launch_ranks(python, __file__, worker_args, world, port, args.work_dir, name,
                        args.timeout)


#===------------------------------------------------------------------------===#
# zrun
#===------------------------------------------------------------------------===#

def run_zrun(args, world):
    plan = os.path.join(args.work_dir, f"gpt2-peers-{world}.zplan")
    compile_cmd = [args.zcc, os.path.join(args.work_dir, "gpt2-peers.onnx"),
                   "--mode=train", f"--world-size={world}",
                   f"--input-shape=input_ids={args.rows}x{args.seq}",
                   "--dump=report", "-o", plan]
    done = subprocess.run(compile_cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return None, f"zcc: {done.stderr.strip()}"
    report = done.stdout
    loss_log = os.path.join(args.work_dir, f"zrun-{world}.loss")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    command = ["mpirun", "-np", str(world), "--oversubscribe", "--bind-to", "none",
               # zrun train does not print --stats lines (zrun run does), so
               # each rank's peak RSS comes from GNU time.
               "/usr/bin/time", "-f", "zrun-bench: peak RSS %M KiB",
               args.zrun, plan, "train", "--data", args.data,
               "--steps", str(args.steps), "--lr", repr(LR),
               "--beta1", repr(BETAS[0]), "--beta2", repr(BETAS[1]),
               "--eps", repr(EPS), "--weight-decay", repr(WEIGHT_DECAY),
               "--seed", "0", "--threads", "1", "--stats", "--loss-log", loss_log]
    if os.geteuid() == 0:
        command.insert(1, "--allow-run-as-root")
    done = subprocess.run(command, capture_output=True, text=True, env=env,
                          timeout=args.timeout)
    output = done.stdout + done.stderr
    with open(os.path.join(args.work_dir, f"zrun-{world}.log"), "w") as handle:
        handle.write(" ".join(command) + "\n" + output)
    if done.returncode != 0:
        return None, f"zrun exit status {done.returncode}: {output.strip()[-800:]}"
    losses = [float(line.split("\t")[1]) for line in open(loss_log) if line.strip()]
    seconds = step_seconds(output, world * args.rows * args.seq)
    rss = [int(m.group(1)) * 1024
           for m in re.finditer(r"zrun-bench: peak RSS (\d+) KiB", output)]
    collectives = zrun_collectives(report)
    return {"losses": losses, "seconds": seconds, "peak_rss": rss,
            "collectives": collectives, "summary": [l for l in output.splitlines()
                                                    if "trained steps" in l]}, None


def zrun_collectives(report):
    """(collectives, bytes) per optimizer step of the default policy: the
    train_micro_step and optimizer_step rows of zcc's report; bytes are each
    gather's gathered buffer plus each reduce-scatter's full group."""
    lines = report.splitlines()
    total_coll, gathered = 0, 0.0
    size_units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    psi_line = None
    for program in ("train_micro_step", "optimizer_step"):
        start = lines.index(f"program '{program}'")
        for line in lines[start + 2:]:
            fields = line.split()
            if not fields or fields[0] not in ("default", "jit"):
                break
            if fields[0] == "default" and "psi" not in line:
                gathered += float(fields[1]) * size_units[fields[2]]
                total_coll += int(fields[3])
    for line in lines:
        match = re.match(r"\s+default\s+all-gathered ([\d.]+) psi, reduced ([\d.]+) psi"
                         r".*\(psi = ([\d.]+) (\S+) of parameters\)", line)
        if match:
            psi_line = match
    psi = float(psi_line.group(3)) * size_units[psi_line.group(4)]
    reduced = float(psi_line.group(2)) * psi
    return {"collectives": total_coll, "bytes": gathered + reduced,
            "gathered": gathered, "reduced": reduced, "psi": psi}


#===------------------------------------------------------------------------===#
# Parent
#===------------------------------------------------------------------------===#

# bench/.venv-peers: torch 2.5.1 with transformers 4.46.3 (the versions the
# fixtures were exported with, scripts/export_fixtures.py) and DeepSpeed,
# from PyPI, made from the interpreter running this script; nothing outside
# bench/ is used or cached.
PEERS_PINS = ["torch==2.5.1", "transformers==4.46.3", f"deepspeed=={DEEPSPEED_VERSION}",
              "numpy==2.4.6", "onnx==1.23.2", "onnxruntime==1.32.0"]


def make_venv(path, pins):
    python = os.path.join(path, "bin", "python")
    if not os.path.exists(python):
        subprocess.check_call([sys.executable, "-m", "venv", path])
    subprocess.check_call([python, "-m", "pip", "install"] + pins)


def setup_venv():
    make_venv(VENV, PEERS_PINS)


def setup_fsdp2_venv():
    """bench/.venv-fsdp2: FSDP2_PINS from PyPI (torch 2.5.1's FSDP2 needs
    CUDA, so it cannot share .venv-peers). PyPI's torch is the CUDA build
    and pulls its nvidia-* libraries (some GB); torch loads them at import
    even on CPU, so they are not left out."""
    make_venv(FSDP2_VENV, FSDP2_PINS)


def prepare(args):
    """Weights, ONNX export and the token file, in args.work_dir."""
    import numpy as np
    import torch
    os.makedirs(args.work_dir, exist_ok=True)
    if not os.path.exists(args.data):
        source = "/usr/share/common-licenses/GPL-3"
        args.data = os.path.join(args.work_dir, "gpl-3.0.bin")
        np.frombuffer(open(source, "rb").read(), dtype=np.uint8).astype(
            np.uint16).tofile(args.data)
        print(f"# data: {args.data} (bytes of {source} as uint16; "
              f"data/gpl-3.0.bin is not in this tree)")
    else:
        print(f"# data: {args.data}")
    sys.path.insert(0, os.path.join(REPO_ROOT, "scripts"))
    import export_fixtures
    torch.manual_seed(SEED)
    model = gpt2(args.layers, args.hidden)
    gen = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        # As export_fixtures.build: small noise on every parameter, so no
        # LayerNorm bias or gain starts at an exact constant.
        for _, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.02)
    torch.save(model.state_dict(), os.path.join(args.work_dir, "weights.pt"))
    wrapper = export_fixtures.LogitsOnly(model.eval()).eval()
    with open(os.path.join(args.work_dir, "gpt2-peers.onnx"), "wb") as handle:
        handle.write(export_fixtures.export_bytes(wrapper, 17))
    count = sum(p.numel() for p in model.parameters())
    print(f"# model: GPT-2 {args.layers} layers x {args.hidden} hidden, {HEADS} heads, "
          f"vocab {VOCAB}, {count:,} parameters ({count * 4:,} B fp32, wte tied)")


def median_after_warmup(seconds, warmup):
    tail = seconds[warmup:] or seconds
    return statistics.median(tail)


def summarize_peer(results, warmup, steps):
    """Rank 0's median step time, mean-over-ranks losses, per-step counts."""
    world = len(results)
    losses = [sum(r["losses"][s] for r in results) / world for s in range(steps)]
    step_time = max(median_after_warmup(r["seconds"], warmup) for r in results)
    # Collectives of one rank per step (every rank issues the same ones),
    # from a step after warm-up.
    counts = results[0]["collectives"][min(warmup, steps - 1)]
    calls = sum(v[0] for v in counts.values())
    nbytes = sum(v[1] for v in counts.values())
    return {"losses": losses, "step": step_time, "calls": calls, "bytes": nbytes,
            "by_name": counts, "rss": max(r["peak_rss"] for r in results)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setup", action="store_true", help="make the venv and exit")
    parser.add_argument("--setup-fsdp2", action="store_true",
                        help="make bench/.venv-fsdp2 (a newer torch for FSDP2) and exit")
    parser.add_argument("--fsdp2-python",
                        default=(os.path.join(FSDP2_VENV, "bin", "python")
                                 if os.path.exists(os.path.join(FSDP2_VENV, "bin", "python"))
                                 else sys.executable),
                        help="interpreter of the FSDP2 workers (default: bench/.venv-fsdp2's)")
    parser.add_argument("--worker", choices=["deepspeed", "fsdp2"], help=argparse.SUPPRESS)
    parser.add_argument("--worlds", default="2,4")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3,
                        help="steps left out of the median step time")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--rows", type=int, default=2, help="B: rows per rank and step")
    parser.add_argument("--seq", type=int, default=64, help="T: tokens per row")
    parser.add_argument("--data", default=os.path.join(REPO_ROOT, "data", "gpl-3.0.bin"))
    parser.add_argument("--zcc", default=os.path.join(REPO_ROOT, "build", "bin", "zcc"))
    parser.add_argument("--zrun", default=os.path.join(REPO_ROOT, "build", "bin", "zrun"))
    parser.add_argument("--work-dir", default=os.path.join(REPO_ROOT, "build", "train-peers"))
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--peers", default="deepspeed,fsdp2,zrun")
    args = parser.parse_args()
    if args.setup:
        setup_venv()
        return 0
    if args.setup_fsdp2:
        setup_fsdp2_venv()
        return 0
    if args.worker:
        worker(args)
        return 0

    import torch
    try:
        import deepspeed
        ds_version = deepspeed.__version__
    except Exception as exc:  # noqa: BLE001 - reported, not hidden
        ds_version = f"not importable ({exc})"
    print(f"# python {sys.version.split()[0]}, torch {torch.__version__}, "
          f"deepspeed {ds_version}, cores {os.cpu_count()}, load "
          f"{os.getloadavg()[0]:.2f} before")
    print(f"# zcc {args.zcc}, zrun {args.zrun}")
    if "fsdp2" in args.peers.split(","):
        fsdp2_torch = subprocess.run(
            [args.fsdp2_python, "-c", "import torch; print(torch.__version__)"],
            capture_output=True, text=True).stdout.strip() or "not importable"
        print(f"# fsdp2 workers: {args.fsdp2_python}, torch {fsdp2_torch}")
    prepare(args)
    print(f"# B={args.rows} rows x T={args.seq} tokens per rank and step, {args.steps} "
          f"steps, median step time over steps {args.warmup + 1}-{args.steps}; AdamW "
          f"lr {LR} betas {BETAS} eps {EPS} wd {WEIGHT_DECAY}")
    print(flush=True)
    peers = args.peers.split(",")
    failures = []
    port = 29500 + os.getpid() % 1000
    for world in [int(w) for w in args.worlds.split(",")]:
        summaries = {}
        for peer in peers:
            print(f"# running {peer} N={world} ...", file=sys.stderr, flush=True)
            begin = time.time()
            if peer == "zrun":
                result, error = run_zrun(args, world)
                if result:
                    c = result["collectives"]
                    summaries[peer] = {
                        "losses": result["losses"],
                        "step": median_after_warmup(result["seconds"], args.warmup),
                        "calls": c["collectives"], "bytes": c["bytes"],
                        "by_name": {"all_gather (plan)": [None, c["gathered"]],
                                    "reduce_scatter + all_reduce (plan)": [None, c["reduced"]]},
                        "rss": max(result["peak_rss"]) if result["peak_rss"] else 0,
                        "summary": result["summary"]}
            else:
                port += 1
                results, error = run_peer(args, peer, world, port)
                if results:
                    summaries[peer] = summarize_peer(results, args.warmup, args.steps)
            if error:
                failures.append(f"{peer} N={world}: {error}")
                print(f"# {peer} N={world} failed: {error}", flush=True)
            else:
                print(f"# {peer} N={world}: {time.time() - begin:.0f} s", flush=True)
        print_world(world, summaries, args)
    for failure in failures:
        print(f"train_peers: error: {failure}", file=sys.stderr)
    return 1 if failures else 0


def print_world(world, summaries, args):
    print(f"N={world}")
    header = (f"  {'peer':<10} {'step (med)':>11} {'coll/step':>9} {'MiB/step':>9} "
              f"{'peak RSS/rank':>14} {'zrun/peer step':>15} {'zrun/peer MiB':>14}  "
              f"losses 1-5, and max |rel diff| vs zrun")
    print(header)
    zrun = summaries.get("zrun")
    for name, s in summaries.items():
        step_ratio = f"{zrun['step'] / s['step']:.3f}" if zrun else "n/a"
        bytes_ratio = f"{zrun['bytes'] / s['bytes']:.3f}" if zrun and s["bytes"] else "n/a"
        first = s["losses"][:5]
        if zrun:
            diff = max(abs(a - b) / abs(b) for a, b in zip(first, zrun["losses"][:5]))
            diff_text = f"{diff:.2e}"
        else:
            diff_text = "n/a"
        print(f"  {name:<10} {s['step'] * 1e3:>8.1f} ms {s['calls']:>9} "
              f"{s['bytes'] / 2**20:>9.2f} {s['rss'] / 2**20:>10.1f} MiB "
              f"{step_ratio:>15} {bytes_ratio:>14}  "
              f"{' '.join(f'{l:.5f}' for l in first)}  {diff_text}")
    for name, s in summaries.items():
        detail = ", ".join(f"{k} {v[0] if v[0] is not None else ''}x "
                           f"{v[1] / 2**20:.2f} MiB".replace(" x", "x")
                           for k, v in sorted(s["by_name"].items()))
        print(f"  {name} collectives per step: {detail}")
        if s.get("summary"):
            print(f"  zrun: {s['summary'][0].strip()}")
        if len(s["losses"]) >= 5:
            print(f"  {name} loss at step {len(s['losses'])}: {s['losses'][-1]:.5f}")
    print(flush=True)


if __name__ == "__main__":
    sys.exit(main())
