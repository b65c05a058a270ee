#!/usr/bin/env python3
"""Offload (zcc --offload-optimizer, --offload-params, docs/offload.md):
peak RSS and step time against the same plan without offload, in one run
(issue 25).

Runs with the interpreter of bench/.venv-peers (torch and transformers, to
export the model; made by `python3 bench/train_peers.py --setup`):

    bench/.venv-peers/bin/python bench/offload_bench.py
    bench/.venv-peers/bin/python bench/offload_bench.py --size small --trials 1

What it does:

  model   bench/train_vs_torch.py's transformers LlamaForCausalLM, random
          init, exported once (default: large, 33.7M parameters, whose AdamW
          moments are 270 MB per rank at world size 1).
  plans   zcc --mode train --world-size 1, batch 4 x 128, --bucket-size
          8MiB (groups of about one layer), at the default persistence
          threshold (DeepSpeed's: the norms stay whole on the device, every
          matrix is a shard), eleven ways: none (every buffer on the
          device), --offload-optimizer cpu, --offload-optimizer nvme,
          --offload-params nvme, both on cpu (all-cpu, whose updates run on
          the host), the same with the updates staged through the device
          (all-cpu-staged, --host-optimizer-step=false), the shards on cpu
          and the moments on nvme (mixed: the updates on the host over
          moments staged through host memory) and the same staged through
          the device (mixed-staged), both on nvme
          (all-nvme), the same run with zrun --nvme-io direct
          (all-nvme-direct: O_DIRECT, around the page cache), and both on
          nvme under --memory-budget 256MiB (all-nvme-budget; 96MiB for the
          small model), with --offload-dir WORK/nvme.
  runs    `mpirun -np 1 zrun PLAN train --steps S --stats --threads 1`,
          trials alternating the plans. Each trial reports:
            - rank 0's peak RSS (zrun --stats, getrusage);
            - the median step time after --warmup steps (from the progress
              lines).
          The loss logs of all must be byte-identical, else the script
          exits 1.
  limit   The state that does not fit: none and all-nvme-budget run 2
          steps in a memory cgroup (v1; needs root) whose limit lies
          halfway between the two plans' peak RSS. The plan without offload
          must fail (the kernel ends it), and all-nvme-budget must train.

  peer    DeepSpeed ZeRO-3 (DS_ACCELERATOR=cpu, gloo, one rank, one
          thread; the bench venv's version) on the same model, weights and
          batches, with the same offload configs: none,
          offload_optimizer cpu, offload_optimizer + offload_param cpu, and
          both nvme (nvme_path WORK/ds-nvme). A config DeepSpeed refuses or
          fails on is printed with its error, not skipped silently.
          (--no-peer leaves it out.)

Prints, per plan, the medians over trials and the ratios against none:
RSS saved against the bytes offloaded (zcc's memory dump), the bytes the
tier copies move per step (zcc's and zrun --stats'), and step time; then
DeepSpeed's step time and peak RSS per config, and zrun's step against
DeepSpeed's for the same offload.
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

import json  # noqa: E402
import resource  # noqa: E402

import train_peers  # noqa: E402  (step_seconds, launch_ranks)
import train_vs_torch  # noqa: E402  (the model and its export)

# Each plan's offload flags.
PLANS = {
    "none": [],
    "cpu": ["--offload-optimizer=cpu"],
    "nvme": ["--offload-optimizer=nvme"],
    "params-nvme": ["--offload-params=nvme"],
    "all-cpu": ["--offload-optimizer=cpu", "--offload-params=cpu"],
    # The same with the update staged through the device instead of run on
    # the host (the baseline of the host-side step).
    "all-cpu-staged": ["--offload-optimizer=cpu", "--offload-params=cpu",
                       "--host-optimizer-step=false"],
    # The shards in host memory and the moments in nvme: the update runs on
    # the host over the moments staged through host memory; and the same
    # staged through the device instead (its baseline).
    "mixed": ["--offload-params=cpu", "--offload-optimizer=nvme"],
    "mixed-staged": ["--offload-params=cpu", "--offload-optimizer=nvme",
                     "--host-optimizer-step=false"],
    "all-nvme": ["--offload-optimizer=nvme", "--offload-params=nvme"],
    # The same plan, its file read and written around the page cache
    # (ZRUN_FLAGS).
    "all-nvme-direct": ["--offload-optimizer=nvme", "--offload-params=nvme"],
    # The same under a device budget (BUDGETS): the schedule then releases
    # each fetched copy after the forward and fetches it again for the
    # backward, as DeepSpeed's offload does, instead of keeping it.
    "all-nvme-budget": ["--offload-optimizer=nvme", "--offload-params=nvme"],
}
BUDGETS = {"small": "96MiB", "large": "256MiB"}
# zrun flags of a plan's runs beside its zcc flags.
ZRUN_FLAGS = {"all-nvme-direct": ["--nvme-io", "direct"]}
TIERS = tuple(PLANS)


def compile_plan(args, tier):
    """(plan path, bytes offloaded, bytes the tier copies move per step)."""
    plan = os.path.join(args.work_dir, f"{args.size}-{tier}.zplan")
    command = [args.zcc, os.path.join(args.work_dir, f"{args.size}.onnx"),
               "--mode=train", "--world-size=1", f"--bucket-size={args.bucket_size}",
               f"--input-shape=input_ids={args.rows}x{args.seq}",
               "--dump=memory", "-o", plan] + PLANS[tier]
    if tier.endswith("-budget"):
        command.append(f"--memory-budget={BUDGETS[args.size]}")
    if any("nvme" in flag for flag in PLANS[tier]):
        command.append("--offload-dir=" + os.path.join(args.work_dir, "nvme"))
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"FAIL: {' '.join(command)}\n{done.stderr.strip()}")
    offloaded = sum(int(bytes_) for bytes_ in re.findall(
        r"^offloaded to \w+ \(.*\): (\d+) B", done.stdout, re.M))
    copies = re.search(r"^tier copies per run: (.*)$", done.stdout, re.M)
    per_step = 0
    if copies:
        for name, bytes_ in re.findall(r"(\w+) (\d+) B", copies.group(1)):
            if name in ("train_micro_step", "optimizer_step"):
                per_step += int(bytes_)
    return plan, offloaded, per_step


def run_zrun(args, plan, steps, tag, cgroup=None, timeout=None, extra=()):
    """(returncode, output, peak RSS, step seconds, loss log)."""
    loss_log = os.path.join(args.work_dir, f"offload-{tag}.loss")
    zrun = [args.zrun, plan, "train", "--data", args.data, "--steps", str(steps),
            "--lr", "1e-3", "--seed", "0", "--stats", "--threads", "1",
            "--loss-log", loss_log] + list(extra)
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
    copied = sum(int(bytes_) for bytes_ in re.findall(
        r"^zrun: per (?:micro-step: .*, |optimizer step: )tier copies (\d+) B",
        output, re.M))
    return (process.returncode, output, int(rss.group(1)) if rss else 0,
            seconds, loss_log, copied)


# DeepSpeed's offload configs, and the zrun plan that offloads the same.
DS_CONFIGS = {
    "none": ({}, "none"),
    "optimizer-cpu": ({"offload_optimizer": {"device": "cpu"}}, "cpu"),
    "all-cpu": ({"offload_optimizer": {"device": "cpu"},
                 "offload_param": {"device": "cpu"}}, "all-cpu"),
    "all-nvme": ({"offload_optimizer": {"device": "nvme", "nvme_path": "NVME"},
                  "offload_param": {"device": "nvme", "nvme_path": "NVME"}},
                 "all-nvme"),
}


def exposed_copies(args, tier, repeat=5):
    """The forward (the plan's infer program) with --trace, `repeat` runs:
    per run after the first, the milliseconds of tier copies on the comm
    thread, of tier_waits on the compute thread (the copying not hidden
    behind compute), and of the whole run."""
    import numpy as np
    ids = os.path.join(args.work_dir, "offload-ids.npy")
    tokens = np.fromfile(args.data, dtype=np.uint16)
    np.save(ids, next(train_vs_torch.batches(args, tokens, 1)))
    trace = os.path.join(args.work_dir, f"offload-{tier}-trace.json")
    command = ["mpirun", "-np", "1", "--bind-to", "none", args.zrun,
               os.path.join(args.work_dir, f"{args.size}-{tier}.zplan"), "run",
               "--input", f"input_ids={ids}", "--repeat", str(repeat),
               "--threads", "1", "--trace", trace] + ZRUN_FLAGS.get(tier, [])
    if os.geteuid() == 0:
        command.insert(1, "--allow-run-as-root")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    done = subprocess.run(command, capture_output=True, text=True, env=env,
                          timeout=args.timeout)
    if done.returncode != 0:
        sys.exit(f"FAIL: {' '.join(command)}\n{(done.stdout + done.stderr)[-1500:]}")
    events = [e for e in json.load(open(trace))["traceEvents"]
              if e.get("ph") == "X" and e["args"].get("run", 1) > 1]
    runs = repeat - 1
    copies = sum(e["dur"] for e in events if e["name"] == "tier_fetch") / runs
    waits = sum(e["dur"] for e in events if e["name"] == "tier_wait") / runs
    spans = {}
    for e in events:
        begin, end = spans.get(e["args"]["run"], (e["ts"], e["ts"]))
        spans[e["args"]["run"]] = (min(begin, e["ts"]), max(end, e["ts"] + e["dur"]))
    whole = statistics.median(end - begin for begin, end in spans.values())
    return copies / 1e3, waits / 1e3, whole / 1e3


def ds_worker(args):
    """One DeepSpeed rank: ZeRO-3 with args.ds_config's offload, the same
    model, weights and batches as zrun's; writes WORK/ds-CONFIG-1-0.json."""
    import numpy as np
    import torch
    import deepspeed
    args.threads = 1
    model = train_vs_torch.load_llama(args, args.size)
    model.train()
    deepspeed.init_distributed(dist_backend="gloo")
    offload, _ = DS_CONFIGS[args.ds_config]
    offload = json.loads(json.dumps(offload).replace(
        "NVME", os.path.join(args.work_dir, "ds-nvme")))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3,
                                  betas=train_peers.BETAS, eps=train_peers.EPS,
                                  weight_decay=train_peers.WEIGHT_DECAY)
    config = {
        "train_micro_batch_size_per_gpu": args.rows,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": 0,
        "fp16": {"enabled": False}, "bf16": {"enabled": False},
        "zero_optimization": dict({"stage": 3}, **offload),
        # torch's AdamW with offload (DeepSpeed's CPU Adam is an op built
        # on first use); the same update as zrun's.
        "zero_force_ds_cpu_optimizer": False,
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer,
                                           config=config)
    tokens = np.fromfile(args.data, dtype=np.uint16)
    losses, seconds = [], []
    for batch in train_vs_torch.batches(args, tokens, args.steps):
        ids = torch.from_numpy(batch)
        begin = time.perf_counter()
        loss = engine(input_ids=ids, labels=ids).loss
        engine.backward(loss)
        engine.step()
        losses.append(loss.item())
        seconds.append(time.perf_counter() - begin)
    result = {"losses": losses, "seconds": seconds,
              "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    with open(os.path.join(args.work_dir, f"ds-{args.ds_config}-1-0.json"),
              "w") as handle:
        json.dump(result, handle)


def run_deepspeed(args, name, port):
    """(step seconds median, peak RSS, error) of one DeepSpeed config."""
    os.makedirs(os.path.join(args.work_dir, "ds-nvme"), exist_ok=True)
    worker = ["--ds-worker", name, "--size", args.size, "--steps", str(args.steps),
              "--rows", str(args.rows), "--seq", str(args.seq), "--data", args.data,
              "--work-dir", args.work_dir]
    results, error = train_peers.launch_ranks(
        sys.executable, __file__, worker, 1, port, args.work_dir, f"ds-{name}",
        args.timeout)
    if error:
        return None, None, error
    result = results[0]
    return (statistics.median(result["seconds"][args.warmup:]), result["peak_rss"],
            None)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="large", choices=sorted(train_vs_torch.SIZES))
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--bucket-size", default="8MiB",
                        help="zcc --bucket-size for every plan (default: about "
                             "one layer of the large model, so that a layer's "
                             "copy can overlap the layer before)")
    parser.add_argument("--no-peer", action="store_true",
                        help="leave DeepSpeed out")
    parser.add_argument("--ds-worker", choices=sorted(DS_CONFIGS),
                        help=argparse.SUPPRESS)
    train_vs_torch.add_run_arguments(parser)
    args = parser.parse_args()
    if args.ds_worker:
        args.ds_config = args.ds_worker
        ds_worker(args)
        return 0
    os.makedirs(os.path.join(args.work_dir, "nvme"), exist_ok=True)
    # train_vs_torch.prepare reads these.
    args.threads = 1
    count = train_vs_torch.prepare(args, args.size)
    print(f"model: {args.size} ({count / 1e6:.1f}M parameters), batch "
          f"{args.rows}x{args.seq}, {args.steps} steps, 1 rank, 1 thread")

    plans, offloaded, planned = {}, {}, {}
    for tier in TIERS:
        plans[tier], offloaded[tier], planned[tier] = compile_plan(args, tier)
        print(f"{tier}: offloaded {offloaded[tier]} B, tier copies "
              f"{planned[tier]} B per step (zcc --dump memory)")

    rss = {tier: [] for tier in TIERS}
    step = {tier: [] for tier in TIERS}
    logs, counted = {}, {}
    for trial in range(args.trials):
        for tier in TIERS:
            code, output, peak, seconds, log, copied = run_zrun(
                args, plans[tier], args.steps, f"{tier}-{trial}",
                extra=ZRUN_FLAGS.get(tier, []))
            if code != 0:
                sys.exit(f"FAIL: {tier} trial {trial}\n{output.strip()[-1500:]}")
            rss[tier].append(peak)
            step[tier].append(statistics.median(seconds[args.warmup:]))
            logs[tier] = open(log).read()
            counted[tier] = copied
            print(f"trial {trial} {tier:>11}: peak RSS {peak / 2**20:8.1f} MiB, "
                  f"step {step[tier][-1] * 1e3:7.1f} ms")
    for tier in TIERS:
        if logs[tier] != logs["none"]:
            sys.exit(f"FAIL: the {tier} plan's loss log differs from none's")
        if counted[tier] != planned[tier]:
            sys.exit(f"FAIL: {tier}: zrun --stats counted {counted[tier]} B of "
                     f"tier copies per step, zcc planned {planned[tier]} B")
    print("loss logs: byte-identical across " + ", ".join(TIERS))
    print("tier copies per step: zrun --stats equal to zcc's dump for every plan")

    print(f"\n| plan | offloaded MiB | peak RSS MiB | RSS saved MiB | "
          f"saved / offloaded | copies MiB per step | step ms | step vs none |")
    print("|---|---|---|---|---|---|---|---|")
    base_rss = statistics.median(rss["none"])
    base_step = statistics.median(step["none"])
    for tier in TIERS:
        peak = statistics.median(rss[tier])
        saved = base_rss - peak
        share = saved / offloaded[tier] if offloaded[tier] else 0.0
        seconds = statistics.median(step[tier])
        print(f"| {tier} | {offloaded[tier] / 2**20:.1f} | {peak / 2**20:.1f} | "
              f"{saved / 2**20:.1f} | {share:.3f} | {planned[tier] / 2**20:.1f} | "
              f"{seconds * 1e3:.1f} | {seconds / base_step:.3f} |")
    print()
    for host, what in (("all-cpu", "the optimizer step on the host"),
                       ("mixed", "the optimizer step on the host over moments "
                                 "staged from nvme")):
        staged = host + "-staged"
        ours, theirs = statistics.median(step[host]), statistics.median(step[staged])
        print(f"{what} ({host}) against the same state staged through the device "
              f"({staged}): step {ours * 1e3:.1f} ms against {theirs * 1e3:.1f} ms, "
              f"{ours / theirs:.3f}x; tier copies per step "
              f"{planned[host] / 2**20:.1f} MiB against {planned[staged] / 2**20:.1f}")
    buffered, direct = (statistics.median(step[tier])
                        for tier in ("all-nvme", "all-nvme-direct"))
    print(f"the nvme tier's file around the page cache (all-nvme-direct, zrun "
          f"--nvme-io direct) against through it (all-nvme): step "
          f"{direct * 1e3:.1f} ms against {buffered * 1e3:.1f} ms, "
          f"{direct / buffered:.3f}x")

    # How much of the copying the schedule hides: the forward of each plan
    # that offloads shards, traced (zrun run --trace). A tier_wait lasts as
    # long as its copy is not done when the compute thread reaches it.
    print("\nexposed copy time, forward (the plan's infer program, "
          f"{args.rows}x{args.seq}, 4 traced runs after a first):")
    print("| plan | tier copies ms per run | exposed (tier_wait) ms | "
          "hidden | forward ms |")
    print("|---|---|---|---|---|")
    for tier in ("none", "params-nvme", "all-cpu", "all-nvme", "all-nvme-direct",
                 "all-nvme-budget"):
        copies, waits, whole = exposed_copies(args, tier)
        hidden = f"{1 - waits / copies:.2f}" if copies else "-"
        print(f"| {tier} | {copies:.2f} | {waits:.2f} | {hidden} | {whole:.1f} |")

    if not args.no_peer:
        import deepspeed
        print(f"\nDeepSpeed {deepspeed.__version__} ZeRO-3 (DS_ACCELERATOR=cpu, "
              f"1 rank, 1 thread), the same model, weights and batches, "
              f"{args.steps} steps:")
        print("| offload | DeepSpeed step ms | DeepSpeed peak RSS MiB | "
              "zrun plan | zrun step / DeepSpeed's |")
        print("|---|---|---|---|---|")
        for index, (name, (_, plan)) in enumerate(DS_CONFIGS.items()):
            seconds, peak, error = run_deepspeed(args, name, 29600 + index)
            if error:
                print(f"| {name} | failed: {error[:300]} | | {plan or '-'} | |")
                continue
            ratio = (f"{statistics.median(step[plan]) / seconds:.3f}"
                     if plan else "-")
            print(f"| {name} | {seconds * 1e3:.1f} | {peak / 2**20:.1f} | "
                  f"{plan or '-'} | {ratio} |")

    # The state that does not fit: a memory cgroup (v1, root) whose limit
    # lies halfway between the two plans' peak RSS. (An address-space limit,
    # prlimit --as, does not show it: the plan without offload then gets its
    # state and arena and fails inside OpenBLAS, which retries a failed
    # buffer allocation forever.)
    limit = int((statistics.median(rss["none"]) +
                 statistics.median(rss["all-nvme-budget"])) / 2)
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
              f"{statistics.median(rss['none']) / 2**20:.0f} MiB, all-nvme-budget "
              f"{statistics.median(rss['all-nvme-budget']) / 2**20:.0f} MiB)")
        for tier in ("none", "all-nvme-budget"):
            code, output, _, _, _, _ = run_zrun(args, plans[tier], 2,
                                                f"limit-{tier}", cgroup=group)
            last = next((line for line in output.splitlines()
                         if "trained" in line or "error" in line or "signal" in line),
                        output.strip().splitlines()[-1] if output.strip() else "")
            print(f"  {tier}: exit {code}: {last.strip()}")
            if tier == "none" and code == 0:
                # Made for the large model: the small one's peaks lie too
                # close for the limit to separate them (its RSS is mostly
                # shared libraries, which the cgroup may not charge to it).
                if args.size != "large":
                    print("  the plan without offload trained under the limit at this "
                          "size: the check shows nothing here")
                    continue
                sys.exit("FAIL: the plan without offload trained under the limit")
            if tier == "all-nvme-budget" and code != 0:
                sys.exit(f"FAIL: the all-nvme-budget plan did not train under the limit\n"
                         f"{output.strip()[-1500:]}")
    finally:
        os.rmdir(group)
    return 0


if __name__ == "__main__":
    sys.exit(main())
