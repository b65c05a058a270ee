#!/usr/bin/env python3
"""GRPO iteration: zplan (zcc + the zplan Python module on 2 MPI ranks)
against TRL 1.16's GRPOTrainer with DeepSpeed ZeRO-3 (bench/grpo_peers.py),
on CPU ranks, one thread per rank, on the bench model llama-156m, in one
run: per-phase times (generate, log-probs, train), collectives per
iteration, and the ratios TRL / zplan.

    python3 bench/grpo_bench.py                          # both, ~2-3 min on 2 cores
    python3 bench/grpo_bench.py --peers zrun             # zplan only, ~40 s
    python3 bench/grpo_bench.py --num-iterations 2       # + old log-probs, 2 steps
    python3 bench/grpo_bench.py --json /tmp/grpo-bench.json

It needs build/bin/zcc, build/python/zplan*.so, mpirun (Open MPI), protoc
and the Python packages numpy, onnx and protobuf for python3; for the TRL
side, bench/.venv-rl (grpo_peers.py's docstring). The model is
generate_bench.py's, built into bench/.models/llama-156m/ when missing (with
bench/.venv-peers/bin/python, which has torch): plain.onnx is what zcc
compiles; grpo_peers.py loads weights.pt, the same weights.

What runs, with K = --prompts-per-rank, G = --num-generations,
P = --prompt-length, M = --max-completion-length, mu = --num-iterations,
B = K x G rows per rank, T = P + M:

  zcc     a policy plan:    zcc plain.onnx --mode train,generate --loss grpo
                              --beta 0.04 --input-shape input_ids=BxT --batch B
                              --prompt-len P --max-seq-len T --world-size 2
                              --hardware cpu [--old-logprobs when mu > 1]
          a reference plan: zcc plain.onnx --mode logprobs
                              --input-shape input_ids=BxT --world-size 2
                              --hardware cpu
          (the loss type is zcc's default, dapo, as TRL's; no memory budget,
          so generation keeps every group gathered from generate_begin to
          generate_end, as TRL's ds3_gather_for_generation gathers the whole
          policy once)
  zplan   OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 mpirun -np 2 python3
          bench/grpo_bench.py --worker ...: zplan.Session(policy, threads=1,
          lr=1e-6, grad_accum=1, weight_decay=0.0) and
          zplan.Session(reference, threads=1). Per iteration, on each rank:
            generate  policy.generate(this rank's K prompts x G, M tokens,
                      temperature 1, no EOS: exactly M tokens, as TRL's
                      min_new_tokens = M)
            score     reward = fraction of completion tokens with id < V/2
                      (grpo_peers.py's), advantages (r - group mean) /
                      (group std, unbiased, + 1e-4) (TRL's scale_rewards
                      "group")
            logprobs  policy.logprobs (old; only when mu > 1) and
                      reference.logprobs on [B, T], mask = completion mask
            train     mu x policy.train_step(ids, completion_mask,
                      advantages, ref_logprobs[, old_logprobs]), each an
                      optimizer step (grad_accum 1)
          The prompts are grpo_peers.py's: random.Random(7), P words "t{id}"
          with ids in [3, V) (its tokenizer maps "t{id}" to id), iteration
          c's global batch the prompts [c 2K, (c + 1) 2K), rank r's the K
          from c 2K + r K (TRL's RepeatSampler split over 2 ranks).
  TRL     bench/.venv-rl/bin/python bench/grpo_peers.py with the same K, G,
          P, M, mu, iterations and warm-up, --json (its docstring says what
          it runs and times).

Timing: each phase is timed on every rank with time.perf_counter; iteration
is the whole loop body. --warmup (1) iterations are left out; a figure is
the median over the --iterations (3) timed ones, the max over the ranks (as
grpo_peers.py does). "logprobs" is old + ref.

Collectives per iteration, zplan: COUNTED FROM THE PLAN, not measured: the
collective instructions (all_gather, reduce_scatter, all_reduce,
resident_gather, carry_gather) of each program, times the number of runs of
that program in one iteration: generate_begin 1, prefill 1, decode M - 1
(the first token comes from prefill; with a lockstep period the runtime's
agreements are simulated as runtime/session/Generation.cpp decides them),
generate_end 1, the policy's logprobs (1 when mu > 1), the reference's
logprobs 1, train_micro_step mu, optimizer_step mu. Bytes: a gather's full
output, a reduce-scatter's or all-reduce's full input: the group's padded
elements (grpo_peers.py counts the same way). Besides the plan, the runtime issues small host collectives
between programs, listed apart ("host"), from the code paths the calls take:
one agreement all-reduce per Python call (python/ZplanModule.cpp,
agreeOrRaise), a barrier at each generate (Session::generate), the lockstep
agreements, and two all-reduces per train_step that closes a window (its
loss, the window's loss and token count; runtime/session/Training.cpp).
TRL's figure counts every torch.distributed call on rank 0 (rewards'
all-gather, barriers and DeepSpeed's own included).

Differences that remain: TRL clips gradients at max_grad_norm 1.0 (DeepSpeed
gradient_clipping "auto"); zplan.Session takes no clip option (zrun train's
--clip-grad-norm is not one of its keywords), so zplan does not clip. TRL
runs SDPA attention in torch, fp32; zplan its CPU kernels, fp32. TRL's
generate phase includes tokenization and decoding to text.

Prints the environment, both sides' figures, a side-by-side table with the
ratios TRL / zplan, the load average before and after each side and how much
CPU other processes took while it ran (zrun_bench.py's CpuMonitor; 10% or
more: "busy"), and one JSON line (--json OUT: also to OUT). Exits 1 when
a side that was asked for fails.
"""

import argparse
import json
import os
import random
import shlex
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True
BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)

RL_PYTHON = os.path.join(BENCH_DIR, ".venv-rl", "bin", "python")
PEERS_PYTHON = os.path.join(BENCH_DIR, ".venv-peers", "bin", "python")
WORLD = 2
BETA = 0.04          # grpo_peers.BETA
LR = 1e-6            # grpo_peers.LR
PROMPT_SEED = 7      # grpo_peers.PROMPT_SEED
SAMPLING_SEED = 1000
PHASES = ["generate", "logprobs_old", "logprobs_ref", "score", "train", "iteration"]
COLLECTIVES = ["ALL_GATHER", "REDUCE_SCATTER", "ALL_REDUCE", "RESIDENT_GATHER",
               "CARRY_GATHER"]
DTYPE_BYTES = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "I32": 4, "I8": 1, "U8": 1,
               "BOOL": 1}
MiB = 1 << 20


class BenchError(Exception):
    pass


def quoted(command):
    return " ".join(shlex.quote(str(c)) for c in command)


def short(command):
    """`command` with the paths inside the checkout relative to it."""
    def one(word):
        word = str(word)
        if os.path.isabs(word) and word.startswith(REPO_ROOT + os.sep):
            return os.path.relpath(word, REPO_ROOT)
        return word
    return quoted([one(c) for c in command])


#===------------------------------------------------------------------------===#
# Prompts and rewards (grpo_peers.py's)
#===------------------------------------------------------------------------===#

def all_prompts(cycles, prompts_per_rank, prompt_length, vocab):
    """Every prompt grpo_peers.py's dataset holds, as token ids
    [cycles x WORLD x K, P]: its words "t{id}" are the ids themselves."""
    rng = random.Random(PROMPT_SEED)
    return [[rng.randrange(3, vocab) for _ in range(prompt_length)]
            for _ in range(cycles * WORLD * prompts_per_rank)]


def group_advantages(rewards, group):
    """TRL's scale_rewards="group": (r - mean) / (std + 1e-4) per group of
    G, torch's unbiased std."""
    import numpy as np
    grouped = rewards.reshape(-1, group)
    mean = grouped.mean(1, keepdims=True)
    std = grouped.std(1, ddof=1, keepdims=True)
    return ((grouped - mean) / (std + 1e-4)).reshape(-1).astype(np.float32)


#===------------------------------------------------------------------------===#
# Worker (one process per rank, under mpirun)
#===------------------------------------------------------------------------===#

def worker(args):
    import numpy as np
    import zplan

    rank, world = zplan.rank(), zplan.world_size()
    K, G = args.prompts_per_rank, args.num_generations
    P, M, mu = args.prompt_length, args.max_completion_length, args.num_iterations
    policy = zplan.Session(args.policy_plan, threads=1, lr=LR, grad_accum=1,
                           weight_decay=0.0)
    reference = zplan.Session(args.reference_plan, threads=1)
    rows, length = policy.train_input_shape
    shape = policy.generation_shape
    if (world != WORLD or rows != K * G or length != P + M or shape["batch"] != rows
            or shape["prompt_len"] != P or shape["max_seq_len"] != P + M):
        raise SystemExit(f"grpo_bench worker: the plans do not match the flags: world {world}, "
                         f"train {rows}x{length}, generation {shape}")
    vocab = shape["vocabulary"]
    cycles = args.warmup + args.iterations
    prompts = np.asarray(all_prompts(cycles, K, P, vocab), dtype=np.int64)
    clock = time.perf_counter
    records = np.zeros((cycles, len(PHASES)))
    extra = np.zeros((cycles, 2))  # mean reward, last loss
    for cycle in range(cycles):
        begin = clock()
        first = cycle * world * K + rank * K
        batch = np.repeat(prompts[first:first + K], G, axis=0)  # [B, P]

        t = clock()
        completions = policy.generate(batch, max_new_tokens=M, temperature=1.0,
                                      seed=SAMPLING_SEED + cycle)
        generate_s = clock() - t

        t = clock()
        ids = np.concatenate([batch, completions], axis=1)
        mask = np.concatenate([np.zeros((rows, P), np.float32),
                               np.ones((rows, M), np.float32)], axis=1)
        rewards = (completions < vocab // 2).mean(axis=1)
        advantages = group_advantages(rewards, G)
        score_s = clock() - t

        old_s = 0.0
        inputs = {}
        if mu > 1:
            t = clock()
            inputs["old_logprobs"] = policy.logprobs(ids, mask=mask)
            old_s = clock() - t
        t = clock()
        inputs["ref_logprobs"] = reference.logprobs(ids, mask=mask)
        ref_s = clock() - t

        t = clock()
        loss = 0.0
        for _ in range(mu):
            loss = policy.train_step(ids, completion_mask=mask, advantages=advantages,
                                     **inputs)
        train_s = clock() - t
        records[cycle] = [generate_s, old_s, ref_s, score_s, train_s, clock() - begin]
        extra[cycle] = [rewards.mean(), loss]
        if rank == 0:
            print(f"grpo_bench: zplan iteration {cycle}{' (warm-up)' if cycle < args.warmup else ''}: "
                  f"{records[cycle][-1]:.3f} s (generate {generate_s:.3f}, logprobs "
                  f"{old_s + ref_s:.3f}, train {train_s:.3f}), mean reward "
                  f"{rewards.mean():.3f}, loss {loss:.5f}", flush=True)
    everyone = zplan.gather_rows(records)  # [world x cycles, phases]
    rewards = zplan.gather_rows(extra)
    memory = {"policy": int(policy.memory["current_bytes"]),
              "reference": int(reference.memory["current_bytes"])}
    if rank == 0:
        with open(args.worker_out, "w") as handle:
            json.dump({"records": everyone.reshape(world, cycles, len(PHASES)).tolist(),
                       "rewards_losses": rewards.reshape(world, cycles, 2).tolist(),
                       "memory_rank0": memory, "vocabulary": vocab,
                       "first_prompt_rank": [int(v) for v in prompts[0][:4]]}, handle)
    reference.close()
    policy.close()


#===------------------------------------------------------------------------===#
# Parent: model, plans, collectives
#===------------------------------------------------------------------------===#

def ensure_model():
    """bench/.models/llama-156m/ (generate_bench.py builds it; with torch
    from bench/.venv-peers when this interpreter has none)."""
    import generate_bench
    try:
        return generate_bench.ensure_model()
    except generate_bench.BenchError as exc:
        if not os.path.exists(PEERS_PYTHON):
            raise BenchError(str(exc))
    subprocess.run([PEERS_PYTHON, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                    "import generate_bench; generate_bench.ensure_model()", BENCH_DIR],
                   check=True)
    return generate_bench.ensure_model()


def compile_plans(args):
    import generate_bench
    onnx = os.path.join(generate_bench.MODEL_DIR, "plain.onnx")
    rows = args.prompts_per_rank * args.num_generations
    length = args.prompt_length + args.max_completion_length
    common = [f"--input-shape=input_ids={rows}x{length}", f"--world-size={WORLD}",
              "--hardware=cpu", "--dump=report"]
    policy = os.path.join(args.work_dir, "policy.zplan")
    reference = os.path.join(args.work_dir, "reference.zplan")
    commands = {
        "policy": [args.zcc, onnx, "--mode=train,generate", "--loss=grpo", f"--beta={BETA}",
                   f"--batch={rows}", f"--prompt-len={args.prompt_length}",
                   f"--max-seq-len={length}"] + common
                  + (["--old-logprobs"] if args.num_iterations > 1 else []) + ["-o", policy],
        "reference": [args.zcc, onnx, "--mode=logprobs"] + common + ["-o", reference],
    }
    reports = {}
    for name, command in commands.items():
        begin = time.time()
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
        with open(os.path.join(args.work_dir, f"{name}.zcc.log"), "w") as handle:
            handle.write(quoted(command) + "\n" + done.stdout + done.stderr)
        if done.returncode != 0:
            raise BenchError(f"zcc ({name}) exit status {done.returncode}: "
                             f"{(done.stdout + done.stderr).strip()[-600:]}")
        print(f"# zcc {name} ({time.time() - begin:.1f} s): "
              f"{short(command)}",
              flush=True)
        reports[name] = report_collectives(done.stdout)
    return {"policy": policy, "reference": reference}, commands, reports


def report_collectives(text):
    """{program: collectives} of the default policy in zcc's report (for a
    cross-check of the count from the plan)."""
    out, program = {}, None
    for line in text.splitlines():
        if line.startswith("program '"):
            program = line.split("'")[1]
        elif program and line.strip().startswith("default") and program not in out:
            fields = line.split()
            # default GATHERED UNIT COLLECTIVES ... ("0 B" or "594.00 MiB")
            try:
                out[program] = int(fields[3])
            except (IndexError, ValueError):
                pass
    return out


def load_plan_pb2(work_dir):
    """The protoc classes of runtime/plan/plan.proto, as the tests make them
    (test/zrun/break_plan.py)."""
    out = os.path.join(work_dir, "proto")
    os.makedirs(out, exist_ok=True)
    subprocess.run(["protoc", f"-I{REPO_ROOT}", f"--python_out={out}",
                    os.path.join(REPO_ROOT, "runtime", "plan", "plan.proto")], check=True)
    sys.path.insert(0, out)
    from runtime.plan import plan_pb2  # noqa: E402
    return plan_pb2


def plan_collectives(plan_pb2, path):
    """{program: {"calls": n, "bytes": b, "by_opcode": {...}}, ...} and the
    decode program's lockstep period."""
    plan = plan_pb2.Plan()
    with open(path, "rb") as handle:
        plan.ParseFromString(handle.read())
    wanted = {getattr(plan_pb2, f"OPCODE_{name}"): name.lower() for name in COLLECTIVES}
    out, period = {}, 0
    for program in plan.programs:
        entry = {"calls": 0, "bytes": 0, "by_opcode": {}}
        for instruction in program.instructions:
            name = wanted.get(instruction.opcode)
            if name is None:
                continue
            # Every one moves its whole group, padded (runtime/exec/
            # Instructions.cpp): the gathered copy, or the staged gradients
            # a reduce-scatter or all-reduce sums.
            group = plan.groups[instruction.group]
            nbytes = group.padded_elements * DTYPE_BYTES[plan_pb2.DataType.Name(group.dtype)]
            entry["calls"] += 1
            entry["bytes"] += nbytes
            entry["by_opcode"][name] = entry["by_opcode"].get(name, 0) + 1
        out[program.name] = entry
        if program.name == "decode":
            period = program.lockstep_period
    return out, period


def decode_runs(new_tokens, period):
    """(decode runs, lockstep agreements) of one generation of `new_tokens`
    tokens in every row, no EOS, as Session::generate / decodeAgain run it:
    prefill chooses the first token, then decode while `again`."""
    steps, runs, agreements = 1, 0, 0
    while True:
        if period == 0:
            again = steps < new_tokens
        elif steps % period != 0:
            again = True
        else:
            agreements += 1
            again = steps < new_tokens
        if not again:
            return runs, agreements
        runs += 1
        steps += 1


def count_collectives(args, plans, reports):
    plan_pb2 = load_plan_pb2(args.work_dir)
    policy, period = plan_collectives(plan_pb2, plans["policy"])
    reference, _ = plan_collectives(plan_pb2, plans["reference"])
    mu = args.num_iterations
    decodes, agreements = decode_runs(args.max_completion_length, period)
    runs = [("policy", "generate_begin", 1), ("policy", "prefill", 1),
            ("policy", "decode", decodes), ("policy", "generate_end", 1),
            ("policy", "logprobs", 1 if mu > 1 else 0), ("reference", "logprobs", 1),
            ("policy", "train_micro_step", mu), ("policy", "optimizer_step", mu)]
    tables = {"policy": policy, "reference": reference}
    rows, total, nbytes = [], 0, 0
    mismatches = []
    for plan, program, times in runs:
        entry = tables[plan].get(program)
        if entry is None:
            raise BenchError(f"the {plan} plan has no '{program}' program")
        reported = reports[plan].get(program)
        if reported is not None and reported != entry["calls"]:
            mismatches.append(f"{plan} {program}: plan {entry['calls']}, report {reported}")
        rows.append({"plan": plan, "program": program, "runs": times,
                     "per_run": entry["calls"], "bytes_per_run": entry["bytes"],
                     "by_opcode": entry["by_opcode"]})
        total += times * entry["calls"]
        nbytes += times * entry["bytes"]
    # The runtime's host collectives between programs (see the docstring).
    python_calls = 1 + (1 if mu > 1 else 0) + 1 + mu  # generate, logprobs, train_step
    host = {"agreements_per_call": python_calls, "generate_barrier": 1,
            "lockstep_agreements": agreements, "train_step_loss_all_reduces": 2 * mu}
    return {"counted_from": "plan", "total": total, "bytes": nbytes, "programs": rows,
            "host": host, "host_total": sum(host.values()),
            "decode_lockstep_period": period, "report_mismatches": mismatches}


#===------------------------------------------------------------------------===#
# Parent: the two sides
#===------------------------------------------------------------------------===#

def mpirun():
    command = ["mpirun", "-np", str(WORLD), "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        command.insert(1, "--allow-run-as-root")
    return command


def run_zplan(args, plans):
    out = os.path.join(args.work_dir, "zplan-worker.json")
    if os.path.exists(out):
        os.remove(out)
    command = mpirun() + [sys.executable, os.path.abspath(__file__), "--worker",
                          "--policy-plan", plans["policy"],
                          "--reference-plan", plans["reference"], "--worker-out", out]
    for name in ("prompts_per_rank", "num_generations", "prompt_length",
                 "max_completion_length", "iterations", "warmup", "num_iterations"):
        command += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    python_path = os.path.join(REPO_ROOT, "build", "python")
    if os.environ.get("PYTHONPATH"):
        python_path += os.pathsep + os.environ["PYTHONPATH"]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1", PYTHONPATH=python_path)
    print(f"# zplan: {short(command)}", flush=True)
    begin = time.time()
    try:
        done = subprocess.run(command, env=env, timeout=args.timeout, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    except subprocess.TimeoutExpired:
        raise BenchError(f"zplan ranks timed out after {args.timeout:.0f} s")
    with open(os.path.join(args.work_dir, "zplan.log"), "w") as handle:
        handle.write(quoted(command) + "\n" + done.stdout)
    for line in done.stdout.splitlines():
        if line.startswith("grpo_bench:"):
            print(line, flush=True)
    if done.returncode != 0 or not os.path.exists(out):
        raise BenchError(f"zplan ranks: exit status {done.returncode}: "
                         f"{done.stdout.strip()[-800:]}")
    print(f"# zplan ranks ran {time.time() - begin:.0f} s", flush=True)
    with open(out) as handle:
        result = json.load(handle)
    timed = [cycles[args.warmup:] for cycles in result["records"]]

    def phase(index):
        return max(statistics.median(c[index] for c in cycles) for cycles in timed)

    figures = {name: phase(i) for i, name in enumerate(PHASES)}
    figures["logprobs"] = figures["logprobs_old"] + figures["logprobs_ref"]
    figures["other"] = max(statistics.median(c[5] - sum(c[:5]) for c in cycles)
                           for cycles in timed)
    figures["memory_rank0"] = result["memory_rank0"]
    figures["rewards_losses"] = result["rewards_losses"]
    return figures


def run_trl(args):
    out = os.path.join(args.work_dir, "trl.json")
    if os.path.exists(out):
        os.remove(out)
    if not os.path.exists(RL_PYTHON):
        raise BenchError(f"{RL_PYTHON} is missing (grpo_peers.py's docstring)")
    command = [RL_PYTHON, os.path.join(BENCH_DIR, "grpo_peers.py"), "--json", out]
    for name in ("prompts_per_rank", "num_generations", "prompt_length",
                 "max_completion_length", "iterations", "warmup", "num_iterations"):
        command += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    print(f"# TRL: {short(command)}",
          flush=True)
    try:
        done = subprocess.run(command, timeout=args.timeout + 120, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    except subprocess.TimeoutExpired:
        raise BenchError("grpo_peers.py timed out")
    for line in done.stdout.splitlines():
        if not line.startswith("{"):
            print(f"trl| {line}", flush=True)
    if not os.path.exists(out):
        raise BenchError(f"grpo_peers.py exit status {done.returncode}, no JSON: "
                         f"{done.stdout.strip()[-800:]}")
    with open(out) as handle:
        record = json.load(handle)
    if "error" in record:
        raise BenchError(f"grpo_peers.py: {record['error']}")
    return record


def versions():
    import numpy
    out = {"python": sys.version.split()[0], "numpy": numpy.__version__}
    head = subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", REPO_ROOT, "status", "--porcelain",
                            "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
    out["zplan"] = head + (" (+ uncommitted changes)" if dirty else "")
    mpi = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout
    out["open_mpi"] = (mpi.splitlines() or ["?"])[0].split()[-1]
    return out


def ratio(a, b):
    return a / b if a and b else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--policy-plan", help=argparse.SUPPRESS)
    parser.add_argument("--reference-plan", help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", help=argparse.SUPPRESS)
    parser.add_argument("--prompts-per-rank", type=int, default=1, help="K (default 1)")
    parser.add_argument("--num-generations", type=int, default=4, help="G (default 4)")
    parser.add_argument("--prompt-length", type=int, default=32, help="P (default 32)")
    parser.add_argument("--max-completion-length", type=int, default=16, help="M (default 16)")
    parser.add_argument("--iterations", type=int, default=3,
                        help="timed iterations after the warm-up (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up iterations (default 1)")
    parser.add_argument("--num-iterations", type=int, default=1,
                        help="mu: optimizer steps per generation batch; > 1 adds the old "
                             "log-probs (default 1)")
    parser.add_argument("--peers", choices=["zrun", "trl", "both"], default="both",
                        help="zrun: zplan only; trl: grpo_peers.py only; both (default)")
    parser.add_argument("--zcc", default=os.path.join(REPO_ROOT, "build", "bin", "zcc"))
    parser.add_argument("--work-dir", default=os.path.join(REPO_ROOT, "build", "grpo-bench"))
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--json", metavar="OUT", help="also write the JSON line to OUT")
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return 0
    import zrun_bench  # CpuMonitor: the CPU other processes took while a side ran
    if args.max_completion_length < 1 or args.num_iterations < 1 or args.iterations < 1:
        parser.error("--max-completion-length, --num-iterations and --iterations must be >= 1")
    os.makedirs(args.work_dir, exist_ok=True)
    config = {"world": WORLD, "prompts_per_rank": args.prompts_per_rank,
              "num_generations": args.num_generations, "prompt_length": args.prompt_length,
              "max_completion_length": args.max_completion_length,
              "num_iterations": args.num_iterations, "beta": BETA, "lr": LR,
              "warmup": args.warmup, "timed_iterations": args.iterations}
    record = {"bench": "grpo", "config": config, "versions": versions()}
    status = 0

    def finish():
        line = json.dumps(record)
        print(line, flush=True)
        if args.json:
            with open(args.json, "w") as handle:
                handle.write(line + "\n")
        return status

    v = record["versions"]
    print(f"# zplan {v['zplan']}, python {v['python']}, numpy {v['numpy']}, Open MPI "
          f"{v['open_mpi']}, cores {os.cpu_count()}, load {os.getloadavg()[0]:.2f} before",
          flush=True)
    print(f"# {WORLD} ranks, 1 thread each; K={args.prompts_per_rank} prompts/rank x "
          f"G={args.num_generations}, P={args.prompt_length}, M={args.max_completion_length}, "
          f"beta={BETA}, lr={LR}, num_iterations={args.num_iterations}; {args.warmup} warm-up + "
          f"{args.iterations} timed iterations", flush=True)
    zplan = trl = None
    if args.peers in ("zrun", "both"):
        try:
            manifest = ensure_model()
            print(f"# model: llama-156m, {manifest['parameters']:,} parameters fp32 "
                  f"(bench/.models/llama-156m/plain.onnx)", flush=True)
            plans, commands, reports = compile_plans(args)
            collectives = count_collectives(args, plans, reports)
            for mismatch in collectives["report_mismatches"]:
                print(f"note: collectives counted from the plan differ from zcc's report: "
                      f"{mismatch}", flush=True)
            load, monitor = os.getloadavg()[0], zrun_bench.CpuMonitor()
            zplan = run_zplan(args, plans)
            zplan["collectives"] = collectives
            zplan["load_before"] = load
            zplan["load_after"] = os.getloadavg()[0]
            zplan["other_cpu"] = monitor.other_fraction()
            zplan["zcc"] = {name: quoted(c) for name, c in commands.items()}
            record["zplan"] = zplan
        except BenchError as exc:
            print(f"grpo_bench: zplan failed: {exc}", flush=True)
            record["zplan"] = {"error": str(exc)}
            status = 1
    if args.peers in ("trl", "both"):
        try:
            load, monitor = os.getloadavg()[0], zrun_bench.CpuMonitor()
            trl = run_trl(args)
            trl["load_before"] = load
            trl["load_after"] = os.getloadavg()[0]
            trl["other_cpu"] = monitor.other_fraction()
            record["trl"] = trl
        except BenchError as exc:
            print(f"grpo_bench: TRL failed: {exc}", flush=True)
            record["trl"] = {"error": str(exc)}
            status = 1

    if zplan:
        c = zplan["collectives"]
        print(f"# zplan collectives per iteration, counted from the plan: {c['total']} "
              f"({c['bytes'] / MiB:.2f} MiB): "
              + ", ".join(f"{r['plan']} {r['program']} {r['per_run']} x {r['runs']}"
                          for r in c["programs"] if r["per_run"])
              + f"; programs with none: "
              + ", ".join(f"{r['plan']} {r['program']} x {r['runs']}"
                          for r in c["programs"] if not r["per_run"]), flush=True)
        print(f"# zplan host collectives per iteration (runtime, between programs; from its "
              f"code paths): {c['host_total']}: " + ", ".join(f"{k} {v}" for k, v in
                                                            c["host"].items()), flush=True)
        print(f"# zplan memory after the run, rank 0: policy {zplan['memory_rank0']['policy']:,} B, "
              f"reference {zplan['memory_rank0']['reference']:,} B", flush=True)
    if trl:
        print(f"# TRL: torch {trl['versions'].get('torch')}, transformers "
              f"{trl['versions'].get('transformers')}, trl {trl['versions'].get('trl')}, deepspeed "
              f"{trl['versions'].get('deepspeed')}, accelerate {trl['versions'].get('accelerate')}",
              flush=True)

    rows = [("iteration (s)", "iteration", "iteration_s"),
            ("generate (s)", "generate", "generate_s"),
            ("logprobs (s)", "logprobs", "logprobs_s"),
            ("  old", "logprobs_old", "logprobs_old_s"),
            ("  ref", "logprobs_ref", "logprobs_ref_s"),
            ("train (s)", "train", "train_s"),
            ("score (s)", "score", "score_s"),
            ("other (s)", "other", "other_s")]
    print()
    print(f"{'per iteration':<30}{'zplan':>12}{'TRL+DS-Z3':>12}{'TRL/zplan':>11}")
    ratios = {}
    for label, zkey, tkey in rows:
        z = zplan[zkey] if zplan else None
        t = trl[tkey] if trl else None
        r = ratio(t, z) if zkey not in ("score", "other") else None
        if r is not None and not label.startswith(" "):
            ratios[zkey] = r
        print(f"{label:<30}{'' if z is None else f'{z:.3f}':>12}"
              f"{'' if t is None else f'{t:.3f}':>12}{'' if r is None else f'{r:.2f}x':>11}")
    if zplan or trl:
        zc = zplan["collectives"] if zplan else None
        tc = trl["collectives"] if trl else None
        lines = [("collectives (plan)", zc and zc["total"], None),
                 ("collectives (plan + host)", zc and zc["total"] + zc["host_total"],
                  tc and tc["total"]),
                 ("collective MiB", zc and zc["bytes"] / MiB, tc and tc["bytes"] / MiB)]
        for label, z, t in lines:
            r = ratio(t, z)
            if r is not None:
                ratios["collectives" if label.startswith("collectives") else "collective_bytes"] = r
            fmt = (lambda v: f"{v:.1f}") if "MiB" in label else (lambda v: f"{v}")
            print(f"{label:<30}{'' if z is None else fmt(z):>12}{'' if t is None else fmt(t):>12}"
                  f"{'' if r is None else f'{r:.2f}x':>11}")
        if zc and tc:
            ratios["collectives_plan_only"] = ratio(tc["total"], zc["total"])
    for name, side in (("zplan", zplan), ("TRL", trl)):
        if side:
            busy = side["other_cpu"] >= zrun_bench.BUSY_FRACTION
            print(f"# {name} side: load average (1 min) {side['load_before']:.2f} before, "
                  f"{side['load_after']:.2f} after; other processes used "
                  f"{side['other_cpu'] * 100:.0f}% of the {os.cpu_count()} CPUs while it ran"
                  f"{' -- the machine was busy: its times are inflated' if busy else ''}")
    print("# zplan's collectives are counted from the plan (and the runtime's host calls); "
          "TRL's are every torch.distributed call on rank 0, counted at run time")
    record["ratios_trl_over_zplan"] = ratios
    return finish()


if __name__ == "__main__":
    sys.exit(main())
