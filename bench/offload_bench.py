#!/usr/bin/env python3
"""Optimizer-state offload (zcc --offload-optimizer, docs/offload.md): peak
RSS and step time against the same plan without offload, in one run
(issue 25).

Runs with the interpreter of bench/.venv-peers (torch and transformers, to
export the model; made by `python3 bench/train_peers.py --setup`):

    bench/.venv-peers/bin/python bench/offload_bench.py
    bench/.venv-peers/bin/python bench/offload_bench.py --size small --trials 1

What it does:

  model   bench/train_vs_torch.py's transformers LlamaForCausalLM, random
          init, exported once (default: large, 33.7M parameters, whose AdamW
          moments are 270 MB per rank at world size 1).
  plans   zcc --mode train --world-size 1, batch 4 x 128, three ways:
          none (every buffer on the device), --offload-optimizer cpu and
          --offload-optimizer nvme --offload-dir WORK/nvme.
  runs    `mpirun -np 1 zrun PLAN train --steps S --stats --threads 1`,
          trials alternating the three plans. Each trial reports:
            - rank 0's peak RSS (zrun --stats, getrusage);
            - the median step time after --warmup steps (from the progress
              lines).
          The loss logs of the three must be byte-identical, else the
          script exits 1.
  limit   The state that does not fit: each plan runs 2 steps in a memory
          cgroup (v1; needs root) whose limit lies halfway between the two
          plans' peak RSS. The plan without offload must fail (the kernel
          ends it), and the nvme plan must train.

Prints, per plan, the medians over trials and the ratios against none:
RSS saved against the moments' bytes (zcc's memory dump), and step time.
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

import train_peers  # noqa: E402  (step_seconds)
import train_vs_torch  # noqa: E402  (the model and its export)

TIERS = ("none", "cpu", "nvme")


def compile_plan(args, tier):
    plan = os.path.join(args.work_dir, f"{args.size}-{tier}.zplan")
    command = [args.zcc, os.path.join(args.work_dir, f"{args.size}.onnx"),
               "--mode=train", "--world-size=1",
               f"--input-shape=input_ids={args.rows}x{args.seq}",
               "--dump=memory", "-o", plan]
    if tier != "none":
        command.append(f"--offload-optimizer={tier}")
    if tier == "nvme":
        command.append("--offload-dir=" + os.path.join(args.work_dir, "nvme"))
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"FAIL: {' '.join(command)}\n{done.stderr.strip()}")
    offloaded = re.search(r"^offloaded to \w+ \(optimizer moments\): (\d+) B",
                          done.stdout, re.M)
    return plan, int(offloaded.group(1)) if offloaded else 0


def run_zrun(args, plan, steps, tag, cgroup=None, timeout=None):
    """(returncode, output, peak RSS, step seconds, loss log)."""
    loss_log = os.path.join(args.work_dir, f"offload-{tag}.loss")
    zrun = [args.zrun, plan, "train", "--data", args.data, "--steps", str(steps),
            "--lr", "1e-3", "--seed", "0", "--stats", "--threads", "1",
            "--loss-log", loss_log]
    command = ["mpirun", "-np", "1", "--bind-to", "none"] + zrun
    if os.geteuid() == 0:
        command.insert(1, "--allow-run-as-root")
    if cgroup:
        # The job (mpirun and its rank) in the memory cgroup.
        command = ["sh", "-c", f"echo $$ > {cgroup}/cgroup.procs && exec \"$@\"",
                   "sh"] + command
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    process = subprocess.Popen(command, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=env)
    try:
        output, _ = process.communicate(timeout=timeout or args.timeout)
    except subprocess.TimeoutExpired:
        subprocess.run(["pkill", "-KILL", "-P", str(process.pid)])
        process.kill()
        output, _ = process.communicate()
        output += f"\n(killed after {timeout or args.timeout} s)"
    rss = re.search(r"rank 0: peak RSS (\d+) B", output)
    seconds = train_peers.step_seconds(output, args.rows * args.seq)
    return (process.returncode, output, int(rss.group(1)) if rss else 0,
            seconds, loss_log)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="large", choices=sorted(train_vs_torch.SIZES))
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    train_vs_torch.add_run_arguments(parser)
    args = parser.parse_args()
    os.makedirs(os.path.join(args.work_dir, "nvme"), exist_ok=True)
    # train_vs_torch.prepare reads these.
    args.threads = 1
    count = train_vs_torch.prepare(args, args.size)
    print(f"model: {args.size} ({count / 1e6:.1f}M parameters), batch "
          f"{args.rows}x{args.seq}, {args.steps} steps, 1 rank, 1 thread")

    plans, moments = {}, {}
    for tier in TIERS:
        plans[tier], moments[tier] = compile_plan(args, tier)
    print(f"moments offloaded (zcc --dump memory): {moments['nvme']} B")

    rss = {tier: [] for tier in TIERS}
    step = {tier: [] for tier in TIERS}
    logs = {}
    for trial in range(args.trials):
        for tier in TIERS:
            code, output, peak, seconds, log = run_zrun(
                args, plans[tier], args.steps, f"{tier}-{trial}")
            if code != 0:
                sys.exit(f"FAIL: {tier} trial {trial}\n{output.strip()[-1500:]}")
            rss[tier].append(peak)
            step[tier].append(statistics.median(seconds[args.warmup:]))
            logs[tier] = open(log).read()
            print(f"trial {trial} {tier:>4}: peak RSS {peak / 2**20:8.1f} MiB, "
                  f"step {step[tier][-1] * 1e3:7.1f} ms")
    for tier in ("cpu", "nvme"):
        if logs[tier] != logs["none"]:
            sys.exit(f"FAIL: the {tier} plan's loss log differs from none's")
    print("loss logs: byte-identical across none, cpu and nvme")

    print(f"\n| plan | peak RSS MiB | RSS saved MiB | saved / moments | "
          f"step ms | step vs none |")
    print("|---|---|---|---|---|---|")
    base_rss = statistics.median(rss["none"])
    base_step = statistics.median(step["none"])
    for tier in TIERS:
        peak = statistics.median(rss[tier])
        saved = base_rss - peak
        share = saved / moments["nvme"] if moments["nvme"] else 0.0
        seconds = statistics.median(step[tier])
        print(f"| {tier} | {peak / 2**20:.1f} | {saved / 2**20:.1f} | {share:.3f} | "
              f"{seconds * 1e3:.1f} | {seconds / base_step:.3f} |")

    # The state that does not fit: a memory cgroup (v1, root) whose limit
    # lies halfway between the two plans' peak RSS. (An address-space limit,
    # prlimit --as, does not show it: the plan without offload then gets its
    # state and arena and fails inside OpenBLAS, which retries a failed
    # buffer allocation forever.)
    limit = int((statistics.median(rss["none"]) + statistics.median(rss["nvme"])) / 2)
    root = "/sys/fs/cgroup/memory"
    if not os.access(root, os.W_OK):
        print(f"\nmemory limit: skipped ({root} is not writable here)")
        return 0
    group = os.path.join(root, f"zplan-offload-bench-{os.getpid()}")
    os.makedirs(group, exist_ok=True)
    try:
        with open(os.path.join(group, "memory.limit_in_bytes"), "w") as handle:
            handle.write(str(limit))
        print(f"\nmemory cgroup limit {limit / 2**20:.0f} MiB (peak RSS: none "
              f"{statistics.median(rss['none']) / 2**20:.0f} MiB, nvme "
              f"{statistics.median(rss['nvme']) / 2**20:.0f} MiB)")
        for tier in ("none", "nvme"):
            code, output, _, _, _ = run_zrun(args, plans[tier], 2,
                                                   f"limit-{tier}", cgroup=group)
            last = next((line for line in output.splitlines()
                         if "trained" in line or "error" in line or "signal" in line),
                        output.strip().splitlines()[-1] if output.strip() else "")
            print(f"  {tier}: exit {code}: {last.strip()}")
            if tier == "none" and code == 0:
                sys.exit("FAIL: the plan without offload trained under the limit")
            if tier == "nvme" and code != 0:
                sys.exit(f"FAIL: the nvme plan did not train under the limit\n"
                         f"{output.strip()[-1500:]}")
    finally:
        os.rmdir(group)
    return 0


if __name__ == "__main__":
    sys.exit(main())
