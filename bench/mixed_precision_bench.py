#!/usr/bin/env python3
"""Mixed precision benchmark: zcc --param-dtype bf16 [--reduce-dtype bf16]
against fp32 in the same run, on CPU ranks and in zcc's H200 simulation.

What `--param-dtype bf16` does (FSDP2's names): the shards stay f32 master
weights (optimizer state and checkpoints f32); each rank rounds its shard to
bf16 as it all-gathers, so a gather moves half the bytes and a gathered copy
takes half the memory. With it comes `--compute-dtype bf16` (the default
under --param-dtype bf16): every matmul that computes from a parameter
multiplies bf16 operands (the bf16 copy itself, and a bf16 copy of its
activation or gradient operand, which is also what the backward keeps)
accumulating in f32 and rounding the result to bf16; a forward elementwise op
whose operands are all bf16 returns bf16 too; everything else is f32.
`--compute-dtype fp32` (config
bf16-f32mm) reads each parameter through an f32 cast instead: f32 GEMMs, f32
activations. `--reduce-dtype bf16` rounds gradients to bf16 for the
reduce-scatter (and the persistent parameters' all-reduce) and accumulates
in f32. On this CPU a bf16 matmul widens its operands and runs the f32 SGEMM
(Debian's OpenBLAS has no sbgemm); in the H200 simulation it runs at the
bf16 tensor-core rate and an f32 one at the FP32 CUDA-core rate (the runtime
does not use TF32).

Parts (each prints ratios against fp32 measured in the same run):

  counts  bytes gathered/reduced per training micro-step (`zrun PLAN train
          --stats`: "per micro-step: gathered X B, reduced Y B") and the
          micro-step's collectives (`zrun PLAN inspect` op counts), for the
          GPT-2 of bench/train_peers.py at N = 2 and 4, with every parameter
          sharded (--persistence-threshold 0) and at zcc's default threshold;
          fp32, bf16, bf16 + reduce bf16.
  memory  the same runs' per-rank memory lines (peak RSS, arena, shards,
          persistent, training state) and zcc's report peaks per program.
  time    median step time on CPU ranks, bench/train_peers.py's model, data,
          batches, optimizer and threads (1 per rank): zrun fp32, bf16,
          bf16 + reduce bf16, and FSDP2 (torch 2.7.1, gloo) fp32 and with
          MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32).
  h200    zcc's simulated H200 micro-step (--hardware h200 --mode train
          --dump report, no -o) of float32 Llama-2-7B and 70B-shaped graphs
          (bench/make_shaped_models.py's *-f32 models; 70B's 8-layer variant
          by default, see --llama70b) at N = 8 and 64, bf16 against fp32,
          default and jit policies.

    python3 bench/mixed_precision_bench.py                       # all, ~11 min on 2 cores
    python3 bench/mixed_precision_bench.py --quick               # ~2.5 min
    python3 bench/mixed_precision_bench.py --only counts --only memory

Parts counts, memory and time export the model with torch (bench/train_peers.py's
`prepare`), run by --prepare-python (default bench/.venv-peers' interpreter
when it exists); the FSDP2 workers run with --fsdp2-python (default
bench/.venv-fsdp2's). Part h200 needs only onnx and numpy. See bench/README.md,
"Mixed precision". Exits 1 when any command fails or prints what cannot be read.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True
BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)
import train_peers  # noqa: E402  (stdlib only at import)

REPO_ROOT = train_peers.REPO_ROOT
PEERS_PYTHON = os.path.join(train_peers.VENV, "bin", "python")
FSDP2_PYTHON = os.path.join(train_peers.FSDP2_VENV, "bin", "python")
PARTS = ["counts", "memory", "time", "h200"]

# (label, zcc flags)
PRECISIONS = [
    ("fp32", []),
    ("bf16", ["--param-dtype=bf16"]),
    ("bf16-f32mm", ["--param-dtype=bf16", "--compute-dtype=fp32"]),
    ("bf16+rbf16", ["--param-dtype=bf16", "--reduce-dtype=bf16"]),
]
THRESHOLDS = [("0", ["--persistence-threshold=0"]), ("default", [])]

STATS_TRAFFIC = re.compile(r"zrun: per micro-step: gathered (\d+) B, reduced (\d+) B")
STATS_MEMORY = re.compile(
    r"zrun: rank (\d+): peak RSS (\d+) B, arena (\d+) B, shards (\d+) B, "
    r"persistent (\d+) B, training state (\d+) B")
PROGRESS = re.compile(r"step (\d+)/\d+\s+loss \S+\s+lr \S+\s+([\d,]+) tok/s")
SIZE_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


class Failure(Exception):
    pass


def log(message):
    print(f"# {message}", file=sys.stderr, flush=True)


def run(command, timeout, env=None):
    """Runs `command`; returns (stdout + stderr, seconds); raises Failure."""
    begin = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              env=env)
    except subprocess.TimeoutExpired:
        raise Failure(f"{' '.join(command)}\n    timed out after {timeout} s")
    seconds = time.perf_counter() - begin
    if done.returncode != 0:
        raise Failure(f"{' '.join(command)}\n    exit status {done.returncode}: "
                      f"{(done.stdout + done.stderr).strip()[-2000:]}")
    return done.stdout + done.stderr, seconds


def ratio(a, b, digits=3):
    return f"{a / b:.{digits}f}" if b else "n/a"


def mib(x):
    return f"{x / 2**20:.2f}"


#===------------------------------------------------------------------------===#
# zcc / zrun on the GPT-2 of train_peers.py
#===------------------------------------------------------------------------===#

def compile_plan(args, world, flags, name):
    """zcc --mode train -o PLAN --dump report; returns (plan, report text)."""
    plan = os.path.join(args.work_dir, f"{name}.zplan")
    command = [args.zcc, os.path.join(args.work_dir, "gpt2-peers.onnx"), "--mode=train",
               f"--world-size={world}", f"--input-shape=input_ids={args.rows}x{args.seq}",
               "--dump=report", "-o", plan] + flags
    report, _ = run(command, args.timeout)
    return plan, report


def report_summary(report):
    """precision lines, default policy's psi line and per-program peaks."""
    lines = report.splitlines()
    precision = [l[len("precision: "):] for l in lines if l.startswith("precision: ")]
    psi = None
    for line in lines:
        m = re.match(r"\s+default\s+all-gathered ([\d.]+) psi, reduced ([\d.]+) psi", line)
        if m:
            psi = (float(m.group(1)), float(m.group(2)))
    peaks, program = {}, None
    for line in lines:
        m = re.match(r"program '(\S+)'", line)
        if m:
            program = m.group(1)
            continue
        fields = line.split()
        if program and len(fields) >= 6 and fields[0] == "default" and "psi" not in line:
            # default  GATHERED UNIT  COLLECTIVES  PEAK UNIT  ...
            peaks[program] = float(fields[4]) * SIZE_UNITS[fields[5]]
    if not precision or psi is None or "train_micro_step" not in peaks:
        raise Failure("cannot read zcc's report (precision, psi or peak lines):\n" +
                      report[-1500:])
    return {"precision": precision, "psi": psi, "peaks": peaks}


def plan_collectives(args, plan, program="train_micro_step"):
    """{op: count} of the collectives in `program` (`zrun PLAN inspect`)."""
    text, _ = run([args.zrun, plan, "inspect", "--program", program], args.timeout)
    m = re.search(r"^\s+ops: (.*)$", text, re.M)
    if not m:
        raise Failure(f"zrun {plan} inspect: no ops line")
    ops = dict((k, int(v)) for k, v in
               (item.rsplit(" ", 1) for item in m.group(1).split(", ")))
    return {k: ops.get(k, 0) for k in ("all_gather", "reduce_scatter", "all_reduce",
                                       "cast")}, text


def memory_peak_op(args, world, flags, inspect_text):
    """The train_micro_step instruction at which zcc's memory dump peaks."""
    command = [args.zcc, os.path.join(args.work_dir, "gpt2-peers.onnx"), "--mode=train",
               f"--world-size={world}", f"--input-shape=input_ids={args.rows}x{args.seq}",
               "--dump=memory"] + flags
    text, _ = run(command, args.timeout)
    m = re.search(r"peak at instruction #(\d+)", text)
    if not m:
        return "?"
    index = m.group(1)
    for line in inspect_text.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0] == index and fields[1] in ("comm", "compute"):
            return f"#{index} {fields[2]}"
    return f"#{index}"


def zrun_train(args, plan, world, steps, name):
    """mpirun -np N zrun PLAN train ... --stats; returns the parsed result."""
    loss_log = os.path.join(args.work_dir, f"{name}.loss")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    command = ["mpirun", "-np", str(world), "--oversubscribe", "--bind-to", "none",
               args.zrun, plan, "train", "--data", args.data, "--steps", str(steps),
               "--lr", repr(train_peers.LR), "--beta1", repr(train_peers.BETAS[0]),
               "--beta2", repr(train_peers.BETAS[1]), "--eps", repr(train_peers.EPS),
               "--weight-decay", repr(train_peers.WEIGHT_DECAY), "--seed", "0",
               "--threads", "1", "--stats", "--loss-log", loss_log]
    if os.geteuid() == 0:
        command.insert(1, "--allow-run-as-root")
    output, _ = run(command, args.timeout, env)
    with open(os.path.join(args.work_dir, f"{name}.log"), "w") as handle:
        handle.write(" ".join(command) + "\n" + output)
    traffic = STATS_TRAFFIC.search(output)
    ranks = [tuple(int(x) for x in m.groups()) for m in STATS_MEMORY.finditer(output)]
    if not traffic or len(ranks) != world:
        raise Failure(f"{' '.join(command)}\n    no --stats lines for every rank:\n"
                      f"{output[-1500:]}")
    losses = [float(line.split("\t")[1]) for line in open(loss_log) if line.strip()]
    # As bench/train_peers.py: progress lines carry the cumulative rate, so
    # the elapsed time at step k is tokens_k / rate_k.
    step_tokens = world * args.rows * args.seq
    elapsed = [0.0]
    for m in PROGRESS.finditer(output):
        rate = float(m.group(2).replace(",", ""))
        elapsed.append(int(m.group(1)) * step_tokens / rate if rate else 0.0)
    seconds = [b - a for a, b in zip(elapsed, elapsed[1:])]
    memory = {
        "rss": max(r[1] for r in ranks), "rss_min": min(r[1] for r in ranks),
        "arena": max(r[2] for r in ranks), "shards": max(r[3] for r in ranks),
        "persistent": max(r[4] for r in ranks), "state": max(r[5] for r in ranks),
    }
    return {"gathered": int(traffic.group(1)), "reduced": int(traffic.group(2)),
            "memory": memory, "losses": losses, "seconds": seconds}


#===------------------------------------------------------------------------===#
# Parts 1 and 2: counted bytes, collectives and memory
#===------------------------------------------------------------------------===#

def collect_counts(args):
    rows = []
    for world in args.worlds:
        for threshold, tflags in THRESHOLDS:
            for label, pflags in PRECISIONS:
                flags = tflags + pflags
                name = f"counts-n{world}-t{threshold}-{label}"
                log(f"counts/memory: N={world} threshold {threshold} {label}")
                plan, report = compile_plan(args, world, flags, name)
                summary = report_summary(report)
                ops, inspect_text = plan_collectives(args, plan)
                peak_op = memory_peak_op(args, world, flags, inspect_text)
                result = zrun_train(args, plan, world, args.count_steps, name)
                rows.append(dict(world=world, threshold=threshold, precision=label,
                                 summary=summary, ops=ops, peak_op=peak_op, **result))
    return rows


def baseline(rows, row):
    return next(r for r in rows if r["world"] == row["world"] and
                r["threshold"] == row["threshold"] and r["precision"] == "fp32")


def print_counts(rows):
    print("== Part 1: bytes and collectives per training micro-step "
          "(zrun train --stats; plan op counts) ==")
    print(f"GPT-2 of bench/train_peers.py (psi = 13,031,424 B fp32), "
          f"B={ARGS.rows}x T={ARGS.seq} per rank; threshold = --persistence-threshold "
          f"(default: zcc's).")
    header = (f"{'N':>2} {'thresh':<7} {'precision':<11} {'gathered B':>11} "
              f"{'reduced B':>11} {'AG/fp32':>7} {'RS/fp32':>7} {'AG':>3} {'RS':>3} "
              f"{'AR':>3} {'casts':>5}  {'report AG psi':>13} {'RS psi':>6}  precision (report)")
    print(header)
    print("-" * len(header))
    unexpected = []
    for row in rows:
        base = baseline(rows, row)
        ag = row["gathered"] / base["gathered"] if base["gathered"] else float("nan")
        rs = row["reduced"] / base["reduced"] if base["reduced"] else float("nan")
        want_ag = 1.0 if row["precision"] == "fp32" else 0.5
        want_rs = 0.5 if row["precision"] == "bf16+rbf16" else 1.0
        if ag != want_ag or rs != want_rs:
            unexpected.append(f"N={row['world']} threshold {row['threshold']} "
                              f"{row['precision']}: AG/fp32 {ag:.6f} (expected {want_ag}), "
                              f"RS/fp32 {rs:.6f} (expected {want_rs})")
        ops = row["ops"]
        psi = row["summary"]["psi"]
        print(f"{row['world']:>2} {row['threshold']:<7} {row['precision']:<11} "
              f"{row['gathered']:>11,} {row['reduced']:>11,} {ag:>7.3f} {rs:>7.3f} "
              f"{ops['all_gather']:>3} {ops['reduce_scatter']:>3} {ops['all_reduce']:>3} "
              f"{ops['cast']:>5}  {psi[0]:>13.2f} {psi[1]:>6.2f}  "
              f"{' | '.join(row['summary']['precision'])}")
    print("gathered/reduced B: zrun's '--stats' line (bytes of the gathered and "
          "reduced buffers per micro-step); AG/RS/AR: all_gather, reduce_scatter, "
          "all_reduce ops in train_micro_step (zrun PLAN inspect); casts: cast ops there.")
    for note in unexpected:
        print(f"note: UNEXPECTED ratio: {note}")
    if not unexpected:
        print("every AG/fp32 is exactly 0.5 for bf16; RS/fp32 exactly 1.0 (bf16) and "
              "0.5 (bf16+rbf16).")
    print(flush=True)


def print_memory(rows):
    print("== Part 2: memory per rank (zrun train --stats; zcc report peaks, default "
          "policy) ==")
    header = (f"{'N':>2} {'thresh':<7} {'precision':<11} {'peak RSS MiB':>12} "
              f"{'arena MiB':>9} {'shards MiB':>10} {'persist MiB':>11} "
              f"{'state MiB':>9} {'infer peak':>10} {'train peak':>10}  "
              f"{'RSS/fp32':>8} {'arena/fp32':>10} {'infer/fp32':>10}  arena peak at")
    print(header)
    print("-" * len(header))
    for row in rows:
        base = baseline(rows, row)
        m, bm = row["memory"], base["memory"]
        peaks, bpeaks = row["summary"]["peaks"], base["summary"]["peaks"]
        print(f"{row['world']:>2} {row['threshold']:<7} {row['precision']:<11} "
              f"{mib(m['rss']):>12} {mib(m['arena']):>9} {mib(m['shards']):>10} "
              f"{mib(m['persistent']):>11} {mib(m['state']):>9} "
              f"{mib(peaks.get('infer', 0)):>10} {mib(peaks['train_micro_step']):>10}  "
              f"{ratio(m['rss'], bm['rss']):>8} {ratio(m['arena'], bm['arena']):>10} "
              f"{ratio(peaks.get('infer', 0), bpeaks.get('infer', 0)):>10}  "
              f"{row['peak_op']}")
    print("peak RSS: the largest rank's (zrun --stats); arena/shards/persistent/state: "
          "zrun --stats; infer/train peak: zcc's report, peak/rank of the 'infer' and "
          "'train_micro_step' programs (resident + arena); arena peak at: the "
          "train_micro_step instruction where zcc's --dump memory peaks.")
    print(flush=True)


#===------------------------------------------------------------------------===#
# Part 3: step time against FSDP2
#===------------------------------------------------------------------------===#

def fsdp2_worker(args):
    """One FSDP2 rank (run by the FSDP2 interpreter): train_peers.worker's
    FSDP2 path with an optional MixedPrecisionPolicy."""
    import numpy as np
    import torch
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    counts = {}
    train_peers.install_counters(counts)
    import torch.distributed as dist
    fully_shard = train_peers.import_fully_shard()
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy
    except ImportError:
        from torch.distributed._composable.fsdp import MixedPrecisionPolicy

    model = train_peers.gpt2(args.layers, args.hidden)
    model.load_state_dict(torch.load(os.path.join(args.work_dir, "weights.pt"),
                                     weights_only=True))
    model.train()
    tokens = np.fromfile(args.data, dtype=np.uint16)
    dist.init_process_group("gloo")
    kwargs = {}
    if args.worker == "fsdp2-bf16":
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                                                   reduce_dtype=torch.float32)
    for block in model.transformer.h:
        fully_shard(block, **kwargs)
    fully_shard(model, **kwargs)
    optimizer = torch.optim.AdamW(model.parameters(), lr=train_peers.LR,
                                  betas=train_peers.BETAS, eps=train_peers.EPS,
                                  weight_decay=train_peers.WEIGHT_DECAY)
    counts.clear()
    losses, seconds, per_step = [], [], []
    for s in range(args.steps):
        offsets = train_peers.row_offsets(0, len(tokens), args.rows, args.seq, world, s,
                                          rank)
        batch = torch.from_numpy(np.stack(
            [tokens[o:o + args.seq].astype(np.int64) for o in offsets]))
        begin = time.perf_counter()
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        value = loss.item()
        seconds.append(time.perf_counter() - begin)
        losses.append(value)
        per_step.append({k: list(v) for k, v in counts.items()})
        counts.clear()
    import resource
    result = {"rank": rank, "torch": torch.__version__, "losses": losses,
              "seconds": seconds, "collectives": per_step,
              "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    with open(os.path.join(args.work_dir, f"{args.worker}-{world}-{rank}.json"),
              "w") as handle:
        json.dump(result, handle)
    dist.barrier()
    dist.destroy_process_group()


def run_fsdp2(args, name, world, port):
    worker_args = ["--worker", name, "--work-dir", args.work_dir, "--data", args.data,
                   "--rows", str(args.rows), "--seq", str(args.seq),
                   "--steps", str(args.steps), "--layers", str(args.layers),
                   "--hidden", str(args.hidden)]
    results, error = train_peers.launch_ranks(args.fsdp2_python, __file__, worker_args,
                                              world, port, args.work_dir, name,
                                              args.timeout)
    if error:
        raise Failure(f"{name} N={world}: {error} (logs: {args.work_dir}/{name}-{world}-*.log)")
    losses = [sum(r["losses"][s] for r in results) / world for s in range(args.steps)]
    step = max(train_peers.median_after_warmup(r["seconds"], args.warmup) for r in results)
    counts = results[0]["collectives"][min(args.warmup, args.steps - 1)]
    gathered = sum(v[1] for k, v in counts.items() if "gather" in k)
    reduced = sum(v[1] for k, v in counts.items() if "reduce" in k)
    return {"step": step, "losses": losses, "gathered": gathered, "reduced": reduced,
            "calls": sum(v[0] for v in counts.values()), "by_name": counts,
            "rss": max(r["peak_rss"] for r in results), "torch": results[0]["torch"]}


TIME_CONFIGS = [
    # (name, kind, zcc flags / FSDP2 worker)
    ("zplan fp32", "zrun", []),
    ("zplan bf16", "zrun", ["--param-dtype=bf16"]),
    ("zplan bf16-f32mm", "zrun", ["--param-dtype=bf16", "--compute-dtype=fp32"]),
    ("zplan bf16+rbf16", "zrun", ["--param-dtype=bf16", "--reduce-dtype=bf16"]),
    ("FSDP2 fp32", "fsdp2", "fsdp2-fp32"),
    ("FSDP2 bf16", "fsdp2", "fsdp2-bf16"),
]


def collect_time(args):
    """Every configuration once per round, interleaved, so that slow phases
    of a shared machine fall on all of them; per configuration the median
    step time of each round (steps after --warmup; the slowest rank's for
    FSDP2, rank 0's for zrun)."""
    port = 29500 + os.getpid() % 1000
    results = {}
    for world in args.worlds:
        plans = {}
        for name, kind, flags in TIME_CONFIGS:
            if kind == "zrun":
                plans[name], report = compile_plan(
                    args, world, flags, f"time-n{world}-{name.split()[1]}")
                report_summary(report)  # fails on a report it cannot read
                ops, _ = plan_collectives(args, plans[name])
                plans[name + " coll"] = (ops["all_gather"] + ops["reduce_scatter"] +
                                         ops["all_reduce"])
        for rnd in range(args.rounds):
            for name, kind, flags in TIME_CONFIGS:
                log(f"time: N={world} round {rnd + 1}/{args.rounds} {name} "
                    f"(load {os.getloadavg()[0]:.2f})")
                if kind == "zrun":
                    r = zrun_train(args, plans[name], world, args.steps,
                                   f"time-n{world}-{name.split()[1]}-r{rnd}")
                    r["step"] = train_peers.median_after_warmup(r["seconds"], args.warmup)
                    r["rss"] = r["memory"]["rss"]
                    r["calls"] = plans[name + " coll"]
                else:
                    port += 1
                    r = run_fsdp2(args, flags, world, port)
                entry = results.setdefault((world, name), {"rounds": []})
                entry["rounds"].append(r)
    return results


def print_time(results):
    print("== Part 3: step time on CPU ranks (1 thread per rank), zplan vs FSDP2 ==")
    print(f"model, data, batches, AdamW as bench/train_peers.py: GPT-2 {ARGS.layers}x"
          f"{ARGS.hidden}, B={ARGS.rows}x T={ARGS.seq} per rank, {ARGS.steps} steps, "
          f"median over steps {ARGS.warmup + 1}-{ARGS.steps}; {ARGS.rounds} round(s), "
          f"configurations interleaved; 'step (med)' = median over rounds of each "
          f"round's median.")
    header = (f"{'N':>2} {'config':<17} {'step (med)':>10}  {'per round ms':<24} "
              f"{'AG MiB':>7} {'RS MiB':>7} {'coll':>4} {'peak RSS':>9}  "
              f"{'loss 1-5':<41} {'last':>7} {'vs fp32 (1-5)':>13}")
    for world in ARGS.worlds:
        print(header)
        print("-" * len(header))
        rows = {}
        for name, kind, _ in TIME_CONFIGS:
            entry = results[(world, name)]
            rounds = entry["rounds"]
            step = statistics.median(r["step"] for r in rounds)
            rows[name] = dict(step=step, rounds=rounds, kind=kind)
        for name, kind, _ in TIME_CONFIGS:
            row = rows[name]
            last = row["rounds"][-1]
            base = rows["zplan fp32" if kind == "zrun" else "FSDP2 fp32"]["rounds"][-1]
            first = last["losses"][:5]
            diff = max(abs(a - b) / abs(b) for a, b in zip(first, base["losses"][:5]))
            coll = str(last["calls"])
            print(f"{world:>2} {name:<17} {row['step'] * 1e3:>7.1f} ms  "
                  f"{' / '.join('%.1f' % (r['step'] * 1e3) for r in row['rounds']):<24} "
                  f"{mib(last['gathered']):>7} {mib(last['reduced']):>7} {coll:>4} "
                  f"{mib(last['rss']):>5} MiB  "
                  f"{' '.join(f'{l:.5f}' for l in first):<41} {last['losses'][-1]:>7.4f} "
                  f"{diff:>13.1e}")
        print(f"N={world} ratios (median step): ")

        def pair(a, b):
            per_round = [ra["step"] / rb["step"] for ra, rb in
                         zip(rows[a]["rounds"], rows[b]["rounds"])]
            return (f"  {a} / {b}: {rows[a]['step'] / rows[b]['step']:.3f} "
                    f"(per round {', '.join(f'{x:.3f}' for x in per_round)})")
        for a, b in (("zplan bf16", "zplan fp32"), ("zplan bf16-f32mm", "zplan fp32"),
                     ("zplan bf16+rbf16", "zplan fp32"),
                     ("FSDP2 bf16", "FSDP2 fp32"), ("zplan bf16", "FSDP2 bf16"),
                     ("zplan fp32", "FSDP2 fp32")):
            print(pair(a, b))
        fb, ff = rows["FSDP2 bf16"]["rounds"][-1], rows["FSDP2 fp32"]["rounds"][-1]
        zb, zf = rows["zplan bf16"]["rounds"][-1], rows["zplan fp32"]["rounds"][-1]
        print(f"  bytes per step, bf16 / fp32: zplan gathered {ratio(zb['gathered'], zf['gathered'])}"
              f" reduced {ratio(zb['reduced'], zf['reduced'])}; FSDP2 gathered "
              f"{ratio(fb['gathered'], ff['gathered'])} reduced "
              f"{ratio(fb['reduced'], ff['reduced'])}")
        for name in ("FSDP2 fp32", "FSDP2 bf16"):
            counts = rows[name]["rounds"][-1]["by_name"]
            print(f"  {name} collectives per step (rank 0): " + ", ".join(
                f"{k} {v[0]}x {mib(v[1])} MiB" for k, v in sorted(counts.items())))
        print()
    any_fsdp2 = results[(ARGS.worlds[0], "FSDP2 fp32")]["rounds"][-1]
    print(f"FSDP2 workers: torch {any_fsdp2['torch']} ({ARGS.fsdp2_python}), gloo. "
          f"zplan: AG/RS MiB = zrun --stats per micro-step (K = 1); FSDP2: counted "
          f"collectives of one step after warm-up (a gather's output, a "
          f"reduce-scatter's input). vs fp32: max |rel diff| of the first 5 losses "
          f"against the same system's fp32 run. zplan bf16 multiplies bf16 operands "
          f"in its matmuls (widened to an f32 SGEMM on this CPU), rounds their results "
          f"and the elementwise ops of bf16 operands to bf16, and computes the rest "
          f"in f32; bf16-f32mm computes in f32 from the bf16 weights; FSDP2 bf16 "
          f"computes in bf16 (CPU bf16 GEMMs, bf16 activations and logits; loss from "
          f"bf16 logits): different numerics.")
    print(flush=True)


#===------------------------------------------------------------------------===#
# Part 4: simulated H200 step time
#===------------------------------------------------------------------------===#

def collect_h200(args):
    import make_shaped_models
    import train_schedule_bench
    models = ["llama2-7b-f32", args.llama70b]
    worlds = [8, 64]
    if args.quick:
        models, worlds = ["llama2-7b-f32"], [8]
    paths = make_shaped_models.ensure_models(args.cache_dir, models)
    rows = []
    for model in models:
        for world in worlds:
            for label, flags in PRECISIONS:
                log(f"h200: {model} 1x2048 N={world} {label} (load "
                    f"{os.getloadavg()[0]:.2f})")
                command, stdout, seconds, error = train_schedule_bench.run_zcc(
                    args.zcc, paths[model], "1x2048", world, None, flags, args.timeout)
                if error is None:
                    try:
                        micro, optimizer, groups = \
                            train_schedule_bench.parse_train_report(stdout)
                    except Exception as exc:  # ReportError
                        error = f"cannot read the report: {exc}"
                if error is not None:
                    raise Failure(f"{' '.join(command)}\n    {error}")
                precision = [l for l in stdout.splitlines() if l.startswith("precision:")]
                rows.append(dict(model=model, world=world, precision=label,
                                 seconds=seconds, micro=micro, optimizer=optimizer,
                                 lines=precision))
    return rows


def print_h200(rows):
    print("== Part 4: zcc's simulated H200 training micro-step (--hardware h200 "
          "--mode train --dump report), 1x2048 ==")
    header = (f"{'model':<18} {'N':>3} {'precision':<10} {'zcc s':>6}  {'policy':<7} "
              f"{'AG psi':>6} {'RS psi':>6} {'coll':>5} {'peak/rank':>10} "
              f"{'micro-step':>11} {'exposed':>11} {'step':>11}  {'bf16/fp32':>9}")
    print(header)
    print("-" * len(header))
    for row in rows:
        base = next(r for r in rows if r["model"] == row["model"] and
                    r["world"] == row["world"] and r["precision"] == "fp32")
        for i, policy in enumerate(("default", "jit")):
            v = row["micro"][policy]
            step = v["simulated"] + row["optimizer"][policy]["simulated"]
            prefix = (f"{row['model']:<18} {row['world']:>3} {row['precision']:<10} "
                      f"{row['seconds']:>6.1f}" if i == 0 else " " * 41)
            print(f"{prefix}  {policy:<7} {v['gathered_psi']:>6.2f} {v['reduced_psi']:>6.2f} "
                  f"{v['collectives']:>5} {v['peak_text']:>10} "
                  f"{v['simulated'] * 1e3:>8.1f} ms {v['exposed'] * 1e3:>8.1f} ms "
                  f"{step * 1e3:>8.1f} ms  "
                  f"{ratio(v['simulated'], base['micro'][policy]['simulated']):>9}")
    print("bf16/fp32: simulated micro-step time over the same model, N and policy in "
          "fp32. AG/RS psi: bytes per micro-step over the model's f32 parameter bytes.")
    print("Summary (micro-step):")
    for model in dict.fromkeys(r["model"] for r in rows):
        for world in dict.fromkeys(r["world"] for r in rows if r["model"] == model):
            f = next(r for r in rows if r["model"] == model and r["world"] == world and
                     r["precision"] == "fp32")
            b = next(r for r in rows if r["model"] == model and r["world"] == world and
                     r["precision"] == "bf16")
            m = next(r for r in rows if r["model"] == model and r["world"] == world and
                     r["precision"] == "bf16-f32mm")
            t = lambda r, p: r["micro"][p]["simulated"]  # noqa: E731
            e = lambda r, p: r["micro"][p]["exposed"]  # noqa: E731
            print(f"  {model} N={world}: bf16/fp32 default {ratio(t(b, 'default'), t(f, 'default'))}"
                  f" (exposed {ratio(e(b, 'default'), e(f, 'default'))}), jit "
                  f"{ratio(t(b, 'jit'), t(f, 'jit'))} (exposed "
                  f"{ratio(e(b, 'jit'), e(f, 'jit'))}); bf16-default / fp32-jit "
                  f"{ratio(t(b, 'default'), t(f, 'jit'))}; bf16-jit / fp32-default "
                  f"{ratio(t(b, 'jit'), t(f, 'default'))}; bf16-f32mm/fp32 default "
                  f"{ratio(t(m, 'default'), t(f, 'default'))}, jit "
                  f"{ratio(t(m, 'jit'), t(f, 'jit'))}")
    for row in rows:
        if row["precision"] == "bf16":
            print(f"  {row['model']} N={row['world']} bf16: " + "; ".join(
                l[len("precision: "):] for l in row["lines"]))
            break
    print(flush=True)


#===------------------------------------------------------------------------===#
# Main
#===------------------------------------------------------------------------===#

def prepare(args):
    """bench/train_peers.py's weights and ONNX export, with the torch of
    --prepare-python (a subprocess, so this script needs no torch)."""
    code = ("import sys, types; sys.dont_write_bytecode = True; "
            f"sys.path.insert(0, {BENCH_DIR!r}); import train_peers; "
            f"a = types.SimpleNamespace(work_dir={args.work_dir!r}, data={args.data!r}, "
            f"layers={args.layers}, hidden={args.hidden}); train_peers.prepare(a); "
            "print('# data file:', a.data)")
    output, _ = run([args.prepare_python, "-c", code], args.timeout)
    for line in output.splitlines():
        if line.startswith("# data file: "):
            args.data = line[len("# data file: "):]
        elif line.startswith("#"):
            print(line)


def describe_build(path):
    try:
        import schedule_bench
        return schedule_bench.describe_build(path)
    except Exception:  # noqa: BLE001 - a description only
        return path


ARGS = None


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=PARTS,
                        help="run just this part (repeatable)")
    parser.add_argument("--quick", action="store_true",
                        help="a fast subset: N=2 only, 1 round of 8 steps, 7B at N=8 only")
    parser.add_argument("--worker", choices=["fsdp2-fp32", "fsdp2-bf16"],
                        help=argparse.SUPPRESS)
    parser.add_argument("--zcc", default=os.path.join(REPO_ROOT, "build", "bin", "zcc"))
    parser.add_argument("--zrun", default=os.path.join(REPO_ROOT, "build", "bin", "zrun"))
    parser.add_argument("--prepare-python",
                        default=PEERS_PYTHON if os.path.exists(PEERS_PYTHON) else sys.executable,
                        help="interpreter with torch and transformers that exports the "
                             "model (default: bench/.venv-peers')")
    parser.add_argument("--fsdp2-python",
                        default=FSDP2_PYTHON if os.path.exists(FSDP2_PYTHON) else sys.executable,
                        help="interpreter of the FSDP2 workers (default: bench/.venv-fsdp2's)")
    parser.add_argument("--work-dir",
                        default=os.path.join(REPO_ROOT, "build", "mixed-precision-bench"))
    parser.add_argument("--cache-dir", default=None,
                        help="shaped models (default: make_shaped_models' build/bench-models)")
    parser.add_argument("--data", default=os.path.join(REPO_ROOT, "data", "gpl-3.0.bin"))
    parser.add_argument("--worlds", default="2,4")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count-steps", type=int, default=3,
                        help="steps of the counts/memory runs")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--rows", type=int, default=2)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--llama70b", default="llama2-70b-8l-f32",
                        choices=["llama2-70b-8l-f32", "llama2-70b-f32"],
                        help="the 70B graph of part h200: 8 layers of 70B's shapes "
                             "(default) or all 80 (one zcc run took 418 s here)")
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()
    if args.worker:
        fsdp2_worker(args)
        return 0
    ARGS = args
    args.worlds = [int(w) for w in args.worlds.split(",")]
    if args.quick:
        args.worlds, args.rounds, args.steps = [2], 1, 8
    parts = args.only or PARTS
    if args.cache_dir is None:
        import make_shaped_models
        args.cache_dir = make_shaped_models.DEFAULT_CACHE_DIR
    for tool in (args.zcc, args.zrun):
        if not os.access(tool, os.X_OK):
            sys.exit(f"mixed_precision_bench: error: not executable: {tool}")
    os.makedirs(args.work_dir, exist_ok=True)
    begin = time.time()
    print(f"# mixed_precision_bench: parts {', '.join(parts)}{' (--quick)' if args.quick else ''}; "
          f"python {sys.version.split()[0]}, cores {os.cpu_count()}, load "
          f"{os.getloadavg()[0]:.2f} at start")
    print(f"# zcc: {describe_build(args.zcc)}")
    print(f"# zrun: {args.zrun}")
    failures = []
    try:
        if any(p in parts for p in ("counts", "memory", "time")):
            prepare(args)
            if "time" in parts:
                torch_version = subprocess.run(
                    [args.fsdp2_python, "-c", "import torch; print(torch.__version__)"],
                    capture_output=True, text=True).stdout.strip() or "not importable"
                print(f"# FSDP2 workers: {args.fsdp2_python}, torch {torch_version}")
        print(flush=True)
        if "counts" in parts or "memory" in parts:
            rows = collect_counts(args)
            if "counts" in parts:
                print_counts(rows)
            if "memory" in parts:
                print_memory(rows)
        if "time" in parts:
            print_time(collect_time(args))
        if "h200" in parts:
            print_h200(collect_h200(args))
    except Failure as exc:
        failures.append(str(exc))
    print(f"# total {time.time() - begin:.0f} s, load {os.getloadavg()[0]:.2f} at the end")
    for failure in failures:
        print(f"mixed_precision_bench: error: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
