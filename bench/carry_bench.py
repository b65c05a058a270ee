#!/usr/bin/env python3
"""Predicted against measured: the carry and the prefetch placement on CPU ranks.

generate_bench.py's streamed rows on the small Llama fixture
(test/models/llama-opset17.onnx), where zcc's embedded cpu profile keeps the
cross-step prefetch: zcc --mode generate at N ranks under a budget that streams
most groups (64 KiB groups, every parameter sharded), three variants (streamed;
streamed-nocarry: --cross-step-prefetch=false; jit: --policy=jit under the same
budget), each compiled with the embedded profile and with each --profile given.
Each report's predicted decode tokens/s ratios (carry on/off, default/jit)
are printed next to the ratios zrun measures, decode tokens/s medians over
--rounds interleaved runs of every distinct plan (a plan that two profiles
compile byte for byte runs once per round).

    python3 bench/carry_bench.py --profile bench/profiles/cpu-2core.json
    python3 bench/carry_bench.py --offload-params cpu --budget 300KiB

With --offload-params the shards live in host memory (cpu) or in files under
a temporary directory (nvme), and every gather, the carried one included,
reads a staging copy fetched just before it (docs/offload.md). The budget
counts device bytes, so it is smaller than without offload for the same
streaming (the fixture's shards are 208 KiB a rank at N = 2).
"""

import argparse
import hashlib
import os
import re
import statistics
import subprocess
import sys
import tempfile

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)
from generate_bench import parse_zrun_summary, predicted_rates  # noqa: E402

MODEL = os.path.join(REPO_ROOT, "test", "models", "llama-opset17.onnx")
VARIANTS = {"streamed": [], "streamed-nocarry": ["--cross-step-prefetch=false"],
            "jit": ["--policy=jit"]}


def compile_plan(args, work, profile, variant):
    tag = os.path.splitext(os.path.basename(profile))[0] if profile else "embedded"
    plan = os.path.join(work, f"{tag}-{variant}.zplan")
    command = [args.zcc, MODEL, "--mode=generate", f"--batch={args.batch}",
               f"--max-seq-len={args.prompt_len + args.new_tokens}",
               f"--prompt-len={args.prompt_len}", f"--world-size={args.ranks}",
               "--persistence-threshold=0", "--bucket-size=64KiB",
               f"--memory-budget={args.budget}", "--hardware=cpu", "--dump=report",
               "-o", plan] + VARIANTS[variant]
    if profile:
        command.append(f"--hardware-profile={profile}")
    if args.offload_params != "none":
        command.append(f"--offload-params={args.offload_params}")
    if args.offload_params == "nvme":
        command.append(f"--offload-dir={os.path.join(work, 'nvme')}")
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    with open(plan, "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()
    carried = re.search(r"carried group \(default policy\): (.*)", done.stdout)
    return {"plan": plan, "digest": digest, "report": done.stdout,
            "predicted": predicted_rates(done.stdout),
            "carried": carried.group(1)[:60] if carried else "-"}


def decode_rate(args, plan, prompts):
    command = ["mpirun", "-np", str(args.ranks), "--oversubscribe", "--bind-to", "none",
               args.zrun, plan, "generate", "--prompt", prompts,
               "--max-new-tokens", str(args.new_tokens), "--output", plan + ".tokens.npy"]
    if os.geteuid() == 0:
        command.insert(1, "--allow-run-as-root")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    return parse_zrun_summary(done.stdout + done.stderr)["rate"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", action="append", default=[],
                        help="a calibrated profile to compare with the embedded one")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--batch", type=int, default=3)
    parser.add_argument("--prompt-len", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=24)
    parser.add_argument("--budget", default="440KiB")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--offload-params", choices=["none", "cpu", "nvme"], default="none")
    parser.add_argument("--zcc", default=os.path.join(REPO_ROOT, "build", "bin", "zcc"))
    parser.add_argument("--zrun", default=os.path.join(REPO_ROOT, "build", "bin", "zrun"))
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="carry-bench-")
    os.makedirs(os.path.join(work, "nvme"))
    prompts = os.path.join(work, "prompts.npy")
    lengths = ",".join(["6", "4", "2", "5", "3", "8", "1", "7"][:args.batch] * args.ranks)
    subprocess.run([sys.executable, os.path.join(REPO_ROOT, "test", "generate",
                                                 "make_prompts.py"),
                    "--lengths", lengths, "--prompts", prompts,
                    "--prompt-lengths", os.path.join(work, "lengths.npy")], check=True)
    print(f"# load {os.getloadavg()[0]:.2f} before; {args.ranks} ranks, batch {args.batch} "
          f"a rank, {args.new_tokens} new tokens, budget {args.budget}, {args.rounds} rounds, "
          f"offload-params {args.offload_params}")
    profiles = [None] + args.profile
    compiled = {(p, v): compile_plan(args, work, p, v) for p in profiles for v in VARIANTS}
    plans = {c["digest"]: c["plan"] for c in compiled.values()}
    rates = {digest: [] for digest in plans}
    for _ in range(args.rounds):
        for digest, plan in plans.items():
            rates[digest].append(decode_rate(args, plan, prompts))
    median = {digest: statistics.median(values) for digest, values in rates.items()}
    # Every plan computes the same tokens: a schedule moves bytes, not math.
    import numpy as np
    tokens = {digest: np.load(plan + ".tokens.npy") for digest, plan in plans.items()}
    first = next(iter(tokens.values()))
    if not all(np.array_equal(first, other) for other in tokens.values()):
        sys.exit("FAIL: the plans generated different tokens")
    print(f"# tokens: identical across the {len(tokens)} distinct plans")
    print(f"# load {os.getloadavg()[0]:.2f} after")
    for profile in profiles:
        name = profile or "embedded cpu profile"
        rows = {v: compiled[(profile, v)] for v in VARIANTS}
        streamed, nocarry, jit = (median[rows[v]["digest"]] for v in VARIANTS)
        print(f"{name}:")
        for variant, row in rows.items():
            spread = rates[row["digest"]]
            print(f"  {variant:17s} decode {median[row['digest']]:10,.0f} tok/s "
                  f"(min {min(spread):,.0f}, max {max(spread):,.0f}) plan {row['digest'][:8]}"
                  + (f"  carry: {row['carried']}" if variant == "streamed" else ""))
        print(f"  carry on/off: predicted {rows['streamed']['predicted'].get('carry', 0):.3f}x, "
              f"measured {streamed / nocarry:.3f}x")
        print(f"  default/jit:  predicted {rows['streamed']['predicted'].get('jit', 0):.3f}x, "
              f"measured {streamed / jit:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
