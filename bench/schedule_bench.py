#!/usr/bin/env python3
"""Schedule benchmark: zcc's default schedule against the jit baseline.

For each configuration below, runs

    zcc MODEL.onnx --input-shape input_ids=BxS --world-size N \\
        --memory-budget X --hardware h200 --dump report

and reads the report's table for the `infer` program. `--dump report` makes
zcc compile the model twice, once per policy, so both rows of a
configuration come from the same zcc run:

  default  zplan's schedule: one gather per parameter group and use segment,
           prefetched by the cost model under the memory budget;
  jit      the baseline, hook-based ZeRO-3 as DeepSpeed does it: gather right
           before each use, release right after, one group prefetched.

Every time in the table is zcc's simulation of its plan on the h200 profile
(two queues, roofline compute, ring all-gather); nothing runs on a GPU.
See bench/README.md for the columns and the budgets.

    python3 bench/schedule_bench.py                      # everything (~2-3 min on 2 cores)
    python3 bench/schedule_bench.py --only gpt2-small    # seconds
    python3 bench/schedule_bench.py --zcc /path/to/zcc --cache-dir /tmp/models

Exits 1 when zcc fails, or its report cannot be read, for any configuration.
"""

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time

# Import the sibling generator without leaving a __pycache__ in the tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_shaped_models  # noqa: E402

REPO_ROOT = make_shaped_models.REPO_ROOT
DEFAULT_ZCC = os.path.join(REPO_ROOT, "build", "bin", "zcc")
HARDWARE = "h200"
PROFILE_JSON = os.path.join(REPO_ROOT, "compiler", "analysis", "hardware",
                            HARDWARE + ".json")
# A compile slower than this is called out in the output (never cut short).
SLOW_COMPILE_SECONDS = 120

GIB = 1 << 30
# Budgets per rank. An H200 has 141 GB (131 GiB) of HBM. At N=8, 80 GiB is
# what a serving job might give to weights and activations, leaving ~50 GiB
# for the KV cache, the CUDA context and fragmentation. At N=64 the same
# cluster-wide 640 GiB is spread over 8x more ranks: 10 GiB each (scaling out
# is how a user frees per-rank memory). "jit-peak" is the iso-memory budget:
# the peak the jit baseline reached in the ROOMY row of the same model, input
# and N (rounded up to the report's precision), so default gets no more
# memory than the baseline needs.
ROOMY = {8: "80GiB", 64: "10GiB"}
JIT_PEAK = "jit-peak"

# (model, input shape, world size, budget, what the row shows)
CONFIGS = [
    ("gpt2-small", "8x1024", 8, ROOMY[8], "roomy"),
    ("gpt2-small", "8x1024", 8, JIT_PEAK,
     "iso-memory; peak is at the LM head (1.5 GiB logits), so no budget "
     "forces a re-gather"),
    ("gpt2-small", "8x1024", 64, ROOMY[64], "roomy"),
    ("gpt2-small", "1x128", 8, ROOMY[8], "roomy, short input"),
    ("gpt2-small", "1x128", 8, JIT_PEAK,
     "tight: the tied wte must be re-gathered for the LM head"),
    ("llama2-70b", "1x2048", 8, ROOMY[8], "roomy"),
    ("llama2-70b", "1x2048", 8, JIT_PEAK, "iso-memory"),
    ("llama2-70b", "1x2048", 64, ROOMY[64], "roomy"),
    ("llama2-70b", "1x2048", 64, JIT_PEAK, "iso-memory"),
]

#===------------------------------------------------------------------------===#
# Reading zcc's report (compiler/plan/Dumps.cpp, formatReport)
#===------------------------------------------------------------------------===#

SIZE_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
              "TiB": 1 << 40}
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
SIZE = r"[0-9.]+ (?:B|KiB|MiB|GiB|TiB)"
TIME = r"[0-9.]+ (?:s|ms|us)"
POLICY_ROW = re.compile(
    rf"^\s+(?P<policy>\S+)\s+(?P<gathered>{SIZE})\s+(?P<collectives>\d+)\s+"
    rf"(?P<peak>{SIZE})\s+(?P<simulated>{TIME})\s+(?P<exposed>{TIME})\s*$")
GROUP_ROW = re.compile(
    rf"^\s+@(?P<name>\S+): (?P<parameters>\d+) parameter\(s\), "
    rf"(?P<bytes>{SIZE}), (?:(?P<persistent>persistent)|gathered "
    rf"(?P<gathers>\d+) times?)")


def parse_size(text):
    """Bytes, and the half-unit of the last printed digit (its precision)."""
    number, unit = text.split()
    scale = SIZE_UNITS[unit]
    half_digit = 0.5 * scale * (10 ** -len(number.split(".")[1])
                                if "." in number else 1)
    return float(number) * scale, half_digit


def parse_seconds(text):
    number, unit = text.split()
    return float(number) * TIME_UNITS[unit]


class ReportError(Exception):
    pass


def parse_report(text):
    """The `infer` program's policy rows and the default policy's groups."""
    lines = text.splitlines()
    try:
        start = lines.index("program 'infer'")
    except ValueError:
        raise ReportError("no \"program 'infer'\" line in the report")
    policies = {}
    for line in lines[start + 2:]:
        match = POLICY_ROW.match(line)
        if not match:
            break
        gathered, _ = parse_size(match["gathered"])
        peak, peak_half_digit = parse_size(match["peak"])
        policies[match["policy"]] = {
            "gathered": gathered, "gathered_text": match["gathered"],
            "collectives": int(match["collectives"]),
            "peak": peak, "peak_text": match["peak"],
            "peak_upper": peak + peak_half_digit,
            "simulated": parse_seconds(match["simulated"]),
            "exposed": parse_seconds(match["exposed"]),
        }
    # zcc prints a note instead of the baseline row when the baseline fails.
    notes = [line for line in lines if line.startswith("// jit policy:") or
             line.startswith("// default policy:")]
    if notes:
        raise ReportError(notes[0])
    if set(policies) != {"default", "jit"}:
        raise ReportError("expected the default and jit rows, found "
                          f"{sorted(policies) or 'none'}")
    # zcc keeps the hook-distance placement under the default policy when its
    # cost model finds it faster than the prefetch pass's, and says so.
    policies["default"]["kept_hook"] = any(
        line.startswith("// placement:") for line in lines)
    groups = [match.groupdict() for match in map(GROUP_ROW.match, lines)
              if match]
    if not groups:
        raise ReportError("no group lines in the report")
    return policies, groups


#===------------------------------------------------------------------------===#
# Running zcc
#===------------------------------------------------------------------------===#

def run_zcc(zcc, model_path, shape, world_size, budget, timeout):
    command = [zcc, model_path, f"--input-shape=input_ids={shape}",
               f"--world-size={world_size}", f"--memory-budget={budget}",
               f"--hardware={HARDWARE}", "--dump=report"]
    begin = time.perf_counter()
    try:
        completed = subprocess.run(command, capture_output=True, text=True,
                                   timeout=timeout)
    except subprocess.TimeoutExpired:
        return command, None, time.perf_counter() - begin, \
            f"timed out after {timeout} s"
    seconds = time.perf_counter() - begin
    if completed.returncode != 0:
        return command, None, seconds, \
            f"exit status {completed.returncode}: {completed.stderr.strip()}"
    return command, completed.stdout, seconds, None


def load_profile():
    with open(PROFILE_JSON) as handle:
        profile = json.load(handle)
    return (profile["collective_bytes_per_second"],
            profile["collective_latency_seconds"])


def format_size(value):
    for unit in ("TiB", "GiB", "MiB", "KiB"):
        if value >= SIZE_UNITS[unit]:
            return f"{value / SIZE_UNITS[unit]:.2f} {unit}"
    return f"{value:.0f} B"


def ratio(numerator, denominator):
    return f"{numerator / denominator:.3f}" if denominator > 0 else "n/a"


def describe_build(zcc):
    """Which zcc this is: the repository revision and the binary's mtime."""
    try:
        revision = subprocess.run(
            ["git", "-C", REPO_ROOT, "describe", "--always", "--dirty"],
            capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        revision = "unknown"
    built = time.strftime("%Y-%m-%d %H:%M:%S",
                          time.localtime(os.path.getmtime(zcc)))
    return f"{zcc} (built {built}; source tree {revision or 'unknown'})"


#===------------------------------------------------------------------------===#
# Main
#===------------------------------------------------------------------------===#

def main():
    parser = argparse.ArgumentParser(
        description="zcc's default schedule against the jit baseline.")
    parser.add_argument("--zcc", default=DEFAULT_ZCC,
                        help="zcc binary (default: build/bin/zcc)")
    parser.add_argument("--cache-dir", default=make_shaped_models.DEFAULT_CACHE_DIR,
                        help="where the shaped models live (built if missing)")
    parser.add_argument("--only", action="append",
                        choices=sorted(make_shaped_models.MODELS),
                        help="run just this model's rows (repeatable)")
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds one zcc run may take before it counts "
                             "as a failure (default 1800)")
    args = parser.parse_args()

    if not os.access(args.zcc, os.X_OK):
        sys.exit(f"schedule_bench: error: zcc not found or not executable: "
                 f"{args.zcc} (build it, or pass --zcc)")
    configs = [c for c in CONFIGS if not args.only or c[0] in args.only]
    models = sorted({c[0] for c in configs})
    paths = make_shaped_models.ensure_models(args.cache_dir, models)
    bus_bytes_per_second, latency = load_profile()

    print(f"# zcc: {describe_build(args.zcc)}")
    print(f"# hardware profile {HARDWARE}: collectives {bus_bytes_per_second / 1e9:g} "
          f"GB/s bus bandwidth, {latency * 1e6:g} us latency "
          f"(from {os.path.relpath(PROFILE_JSON, REPO_ROOT)})")
    for name in models:
        with open(os.path.join(os.path.dirname(paths[name]), "manifest.json")) as f:
            manifest = json.load(f)
        print(f"# {name}: {manifest['parameters']:,} parameters, "
              f"{format_size(manifest['weights_bytes'])} of weights "
              f"({paths[name]})")
    print("#", flush=True)

    results = {}
    failures = []
    notes = []
    for model, shape, world_size, budget, purpose in configs:
        key = (model, shape, world_size)
        label = f"{model} {shape} N={world_size} budget={budget}"
        if budget == JIT_PEAK:
            reference = results.get(key + (ROOMY[world_size],))
            if reference is None:
                failures.append(f"{label}: skipped, its roomy row failed")
                continue
            # The smallest byte count the printed peak can stand for and
            # still be at least the true peak.
            budget_bytes = math.ceil(reference["policies"]["jit"]["peak_upper"])
            budget_arg = str(budget_bytes)
            budget_text = f"{format_size(budget_bytes)}=jit"
        else:
            budget_arg = budget
            budget_text = budget.replace("GiB", " GiB")
        print(f"# running {label} ...", file=sys.stderr, flush=True)
        command, stdout, seconds, error = run_zcc(
            args.zcc, paths[model], shape, world_size, budget_arg, args.timeout)
        if error is None:
            try:
                policies, groups = parse_report(stdout)
            except ReportError as exc:
                error = f"cannot read the report: {exc}"
        if error is not None:
            failures.append(f"{label}: {' '.join(command)}\n    {error}")
            continue
        if seconds > SLOW_COMPILE_SECONDS:
            notes.append(f"{label}: zcc took {seconds:.0f} s (over "
                         f"{SLOW_COMPILE_SECONDS} s); nothing was reduced")
        sharded = [g for g in groups if not g["persistent"]]
        results[key + (budget,)] = {
            "model": model, "shape": shape, "world_size": world_size,
            "budget": budget_text, "purpose": purpose, "seconds": seconds,
            "policies": policies, "sharded_groups": len(sharded),
            "persistent_groups": len(groups) - len(sharded),
            "default_regathered": [g["name"] for g in sharded
                                   if int(g["gathers"]) > 1],
        }

    if results:
        print_tables(list(results.values()), bus_bytes_per_second, latency)
    for note in notes:
        print(f"note: {note}")
    if failures:
        for failure in failures:
            print(f"schedule_bench: error: {failure}", file=sys.stderr)
        return 1
    return 0


def print_tables(rows, bus_bytes_per_second, latency):
    header = (f"{'model':<11} {'input':<7} {'N':>3} {'budget/rank':<15} "
              f"{'zcc s':>6} {'groups':>7}  {'policy':<8} {'gathered':>11} "
              f"{'coll':>5} {'regath':>6} {'peak/rank':>10} {'simulated':>12} "
              f"{'exposed':>12} {'sim/jit':>8} {'exp/jit':>8}")
    print(header)
    print("-" * len(header))
    for row in rows:
        default, jit = row["policies"]["default"], row["policies"]["jit"]
        first = (f"{row['model']:<11} {row['shape']:<7} {row['world_size']:>3} "
                 f"{row['budget']:<15} {row['seconds']:>6.2f} "
                 f"{row['sharded_groups']:>4}+{row['persistent_groups']:<2}")
        blank = " " * len(first)
        label = "default*" if default.get("kept_hook") else "default"
        for prefix, name, values in ((first, label, default),
                                     (blank, "jit", jit)):
            regathers = values["collectives"] - row["sharded_groups"]
            sim_ratio = ratio(values["simulated"], jit["simulated"])
            exp_ratio = ratio(values["exposed"], jit["exposed"])
            print(f"{prefix}  {name:<8} {values['gathered_text']:>11} "
                  f"{values['collectives']:>5} {regathers:>6} "
                  f"{values['peak_text']:>10} "
                  f"{values['simulated'] * 1e3:>9.3f} ms "
                  f"{values['exposed'] * 1e3:>9.3f} ms {sim_ratio:>8} {exp_ratio:>8}")
    print("budget X=jit: iso-memory, the jit peak of the roomy row of the same "
          "model, input and N. groups: sharded+persistent.")
    print("default*: zcc kept the hook-distance placement, which its cost model "
          "found faster than the prefetch pass's under that budget.")
    print("regath: collectives beyond one per sharded group. Times are zcc's "
          "simulation on the h200 profile; see bench/README.md.")
    print()

    # Where the time goes. The compute queue's busy time is the simulated
    # time less the exposed wait (it finishes last: every collective is
    # waited for by a later compute instruction). The comm queue's busy time
    # is the cost model's ring all-gather summed over the collectives. No
    # schedule of the same collectives can beat the larger of the two.
    header = (f"{'model':<11} {'input':<7} {'N':>3} {'budget/rank':<15} "
              f"{'compute':>11} {'comm dflt':>11} {'comm jit':>11} "
              f"{'bound':>11} {'dflt/bound':>10} {'jit/bound':>10}  regathered by default")
    print(header)
    print("-" * len(header))
    for row in rows:
        default, jit = row["policies"]["default"], row["policies"]["jit"]
        n = row["world_size"]

        def comm_seconds(values):
            return (values["collectives"] * latency + values["gathered"] *
                    (n - 1) / n / bus_bytes_per_second)

        compute = default["simulated"] - default["exposed"]
        jit_compute = jit["simulated"] - jit["exposed"]
        if abs(compute - jit_compute) > 1e-3 * compute + 2e-6:
            print(f"warning: {row['model']} {row['shape']} N={n}: the policies' "
                  f"compute differs ({compute * 1e3:.3f} ms vs "
                  f"{jit_compute * 1e3:.3f} ms); the bound below is suspect")
        bound = max(compute, min(comm_seconds(default), comm_seconds(jit)))
        print(f"{row['model']:<11} {row['shape']:<7} {n:>3} {row['budget']:<15} "
              f"{compute * 1e3:>8.3f} ms {comm_seconds(default) * 1e3:>8.3f} ms "
              f"{comm_seconds(jit) * 1e3:>8.3f} ms {bound * 1e3:>8.3f} ms "
              f"{ratio(default['simulated'], bound):>10} "
              f"{ratio(jit['simulated'], bound):>10}  "
              f"{', '.join('@' + g for g in row['default_regathered']) or '-'}")
    print()


if __name__ == "__main__":
    sys.exit(main())
