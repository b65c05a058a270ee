#!/usr/bin/env python3
"""Training schedule benchmark: communication and simulated time of one
training micro-step, zcc's default policy against the jit baseline.

For each configuration below, runs

    zcc MODEL.onnx --mode train --input-shape input_ids=BxS --world-size N \\
        [--memory-budget X] --hardware h200 --dump report

(no -o: no plan and no weights file is written) and reads the report's
tables for the `train_micro_step` and `optimizer_step` programs and the
line "all-gathered X psi, reduced Y psi per micro-step" of each policy
(psi = the model's parameter bytes). `--dump report` compiles the model once
per policy, so both rows of a configuration come from the same zcc run:

  default  zplan's schedule: a group gathered in the forward stays gathered
           for its backward uses when the budget allows (1 psi gathered per
           micro-step); under a tight budget some groups are gathered again;
  jit      the ZeRO-3 baseline (DeepSpeed, FSDP): gather before each use,
           release after, so every group is gathered in the forward and
           again in the backward (2 psi per micro-step).

Budgets: "none" (zcc's default: no limit) and "jit", the iso-memory budget:
the jit policy's train_micro_step peak in the budget-none row of the same
model, input and N (rounded up to the report's precision). The default
policy's own unconstrained peak is higher (it holds groups from forward to
backward), so at the jit budget it must re-gather some groups; the
`regath` column says how many collectives beyond one per group it issued.
Where the jit peak is not below default's own (the tiny fixtures, whose
activations dwarf their parameters) a note says so: that row is not tight.

Every time is zcc's simulation of its plan on the h200 profile (two
queues, roofline compute, ring collectives); nothing runs on a GPU. See
bench/README.md, "Training".

    python3 bench/train_schedule_bench.py                    # everything
    python3 bench/train_schedule_bench.py --only gpt2-small  # seconds
    python3 bench/train_schedule_bench.py --zcc /path/to/zcc

Exits 1 when zcc fails, or its report cannot be read, for any configuration.
"""

import argparse
import math
import os
import re
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_shaped_models  # noqa: E402
import schedule_bench  # noqa: E402

REPO_ROOT = make_shaped_models.REPO_ROOT
DEFAULT_ZCC = schedule_bench.DEFAULT_ZCC
HARDWARE = schedule_bench.HARDWARE
SLOW_COMPILE_SECONDS = 120
FIXTURE_DIR = os.path.join(REPO_ROOT, "test", "models")

NONE = "none"
JIT_PEAK = "jit"

# (model, input shape, world size, extra zcc flags). Every configuration is
# run at budget "none" and then at the jit peak of that run. The tiny
# fixtures run with --persistence-threshold 0: at the default threshold every
# one of their parameters stays whole and nothing is gathered.
TINY = ["--persistence-threshold=0"]
CONFIGS = [
    ("gpt2-opset17", "2x16", 2, TINY),
    ("llama-opset17", "2x16", 2, TINY),
    ("opt-opset17", "2x16", 2, TINY),
    ("gpt2-small", "1x128", 8, []),
    ("gpt2-small", "8x1024", 8, []),
    ("llama2-7b", "1x2048", 8, []),
    ("llama2-7b", "1x2048", 64, []),
    ("llama2-70b", "1x2048", 8, []),
    ("llama2-70b", "1x2048", 64, []),
]
SHAPED = set(make_shaped_models.MODELS) | set(make_shaped_models.ON_REQUEST_MODELS)

SIZE = schedule_bench.SIZE
TIME = schedule_bench.TIME
TRAFFIC_ROW = re.compile(
    r"^\s+(?P<policy>\S+)\s+all-gathered (?P<gathered>[0-9.]+) psi, reduced "
    rf"(?P<reduced>[0-9.]+) psi per micro-step \(psi = (?P<psi>{SIZE}) of "
    r"parameters\)\s*$")


def program_rows(lines, program):
    """The policy rows of `program`'s table in the report."""
    try:
        start = lines.index(f"program '{program}'")
    except ValueError:
        raise schedule_bench.ReportError(f"no \"program '{program}'\" line")
    rows = {}
    for line in lines[start + 2:]:
        match = schedule_bench.POLICY_ROW.match(line)
        if not match:
            break
        peak, half = schedule_bench.parse_size(match["peak"])
        rows[match["policy"]] = {
            "gathered": schedule_bench.parse_size(match["gathered"])[0],
            "collectives": int(match["collectives"]),
            "peak": peak, "peak_text": match["peak"], "peak_upper": peak + half,
            "simulated": schedule_bench.parse_seconds(match["simulated"]),
            "exposed": schedule_bench.parse_seconds(match["exposed"]),
        }
    if set(rows) != {"default", "jit"}:
        raise schedule_bench.ReportError(
            f"program '{program}': expected the default and jit rows, found "
            f"{sorted(rows) or 'none'}")
    return rows


def parse_train_report(text):
    lines = text.splitlines()
    notes = [line for line in lines if line.startswith("// jit policy:") or
             line.startswith("// default policy:")]
    if notes:
        raise schedule_bench.ReportError(notes[0])
    micro = program_rows(lines, "train_micro_step")
    optimizer = program_rows(lines, "optimizer_step")
    for line in lines:
        match = TRAFFIC_ROW.match(line)
        if match and match["policy"] in micro:
            micro[match["policy"]]["gathered_psi"] = float(match["gathered"])
            micro[match["policy"]]["reduced_psi"] = float(match["reduced"])
            micro[match["policy"]]["psi_text"] = match["psi"]
    for policy, row in micro.items():
        if "gathered_psi" not in row:
            raise schedule_bench.ReportError(f"no psi line for policy {policy}")
    groups = [m.groupdict() for m in map(schedule_bench.GROUP_ROW.match, lines) if m]
    if not groups:
        raise schedule_bench.ReportError("no group lines in the report")
    return micro, optimizer, groups


def run_zcc(zcc, model_path, shape, world_size, budget, extra, timeout):
    command = [zcc, model_path, "--mode=train", f"--input-shape=input_ids={shape}",
               f"--world-size={world_size}", f"--hardware={HARDWARE}",
               "--dump=report"] + extra
    if budget is not None:
        command.append(f"--memory-budget={budget}")
    begin = time.perf_counter()
    try:
        completed = subprocess.run(command, capture_output=True, text=True,
                                   timeout=timeout)
    except subprocess.TimeoutExpired:
        return command, None, time.perf_counter() - begin, f"timed out after {timeout} s"
    seconds = time.perf_counter() - begin
    if completed.returncode != 0:
        return command, None, seconds, \
            f"exit status {completed.returncode}: {completed.stderr.strip()[-2000:]}"
    return command, completed.stdout, seconds, None


def ratio(a, b):
    return f"{a / b:.3f}" if b > 0 else "n/a"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--zcc", default=DEFAULT_ZCC)
    parser.add_argument("--cache-dir", default=make_shaped_models.DEFAULT_CACHE_DIR)
    parser.add_argument("--only", action="append",
                        choices=sorted({c[0] for c in CONFIGS}),
                        help="run just this model's rows (repeatable)")
    parser.add_argument("--llama70b", default="llama2-70b",
                        choices=["llama2-70b", "llama2-70b-8l"],
                        help="the 70B graph: all 80 layers (default) or 8 "
                             "layers of 70B's shapes")
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()
    if not os.access(args.zcc, os.X_OK):
        sys.exit(f"train_schedule_bench: error: zcc not found or not executable: "
                 f"{args.zcc} (build it, or pass --zcc)")

    configs = []
    for model, shape, n, extra in CONFIGS:
        if args.only and model not in args.only:
            continue
        if model == "llama2-70b":
            model = args.llama70b
        configs.append((model, shape, n, extra))
    shaped = sorted({c[0] for c in configs if c[0] in SHAPED})
    paths = make_shaped_models.ensure_models(args.cache_dir, shaped)
    for model, *_ in configs:
        if model not in SHAPED:
            paths[model] = os.path.join(FIXTURE_DIR, model + ".onnx")

    print(f"# zcc: {schedule_bench.describe_build(args.zcc)}")
    print(f"# hardware profile {HARDWARE}; mode train, optimizer adamw; one "
          f"micro-step per optimizer step")
    print("#", flush=True)

    rows, failures, notes = [], [], []
    for model, shape, n, extra in configs:
        reference = None
        for budget in (NONE, JIT_PEAK):
            label = f"{model} {shape} N={n} budget={budget}"
            if budget == JIT_PEAK:
                if reference is None:
                    failures.append(f"{label}: skipped, its budget-none row failed")
                    continue
                budget_bytes = math.ceil(reference["jit"]["peak_upper"])
                budget_text = f"{schedule_bench.format_size(budget_bytes)}=jit"
                if budget_bytes >= reference["default"]["peak"]:
                    notes.append(
                        f"{label}: the jit peak is not below default's own "
                        f"({reference['default']['peak_text']}): this budget does "
                        f"not constrain default (see bench/README.md, Training)")
                budget_arg = str(budget_bytes)
            else:
                budget_arg, budget_text = None, "none"
            print(f"# running {label} ...", file=sys.stderr, flush=True)
            command, stdout, seconds, error = run_zcc(
                args.zcc, paths[model], shape, n, budget_arg, extra, args.timeout)
            if error is None:
                try:
                    micro, optimizer, groups = parse_train_report(stdout)
                except schedule_bench.ReportError as exc:
                    error = f"cannot read the report: {exc}"
            if error is not None:
                failures.append(f"{label}: {' '.join(command)}\n    {error}")
                continue
            if seconds > SLOW_COMPILE_SECONDS:
                notes.append(f"{label}: zcc took {seconds:.0f} s")
            if budget == NONE:
                reference = micro
            sharded = [g for g in groups if not g["persistent"]]
            rows.append(dict(model=model, shape=shape, n=n, budget=budget_text,
                             seconds=seconds, micro=micro, optimizer=optimizer,
                             sharded=len(sharded),
                             persistent=len(groups) - len(sharded),
                             regathered=[g["name"] for g in sharded
                                         if int(g["gathers"]) > 1]))
    print_table(rows)
    for note in notes:
        print(f"note: {note}")
    for failure in failures:
        print(f"train_schedule_bench: error: {failure}", file=sys.stderr)
    return 1 if failures else 0


def print_table(rows):
    header = (f"{'model':<14} {'input':<7} {'N':>3} {'budget/rank':<15} "
              f"{'zcc s':>6} {'groups':>7}  {'policy':<7} {'AG psi':>6} "
              f"{'RS psi':>6} {'coll':>5} {'regath':>6} {'peak/rank':>10} "
              f"{'micro-step':>12} {'exposed':>12} {'step':>12}  "
              f"{'psi/jit':>7} {'step/jit':>8} {'exp/jit':>8}")
    print(header)
    print("-" * len(header))
    for row in rows:
        micro, optimizer = row["micro"], row["optimizer"]
        jit = micro["jit"]
        first = (f"{row['model']:<14} {row['shape']:<7} {row['n']:>3} "
                 f"{row['budget']:<15} {row['seconds']:>6.1f} "
                 f"{row['sharded']:>4}+{row['persistent']:<2}")
        for prefix, policy in ((first, "default"), (" " * len(first), "jit")):
            values = micro[policy]
            step = values["simulated"] + optimizer[policy]["simulated"]
            jit_step = jit["simulated"] + optimizer["jit"]["simulated"]
            # Gathers plus reduce-scatters: one of each per group is the least.
            regathers = values["collectives"] - 2 * row["sharded"]
            print(f"{prefix}  {policy:<7} {values['gathered_psi']:>6.2f} "
                  f"{values['reduced_psi']:>6.2f} {values['collectives']:>5} "
                  f"{regathers:>6} {values['peak_text']:>10} "
                  f"{values['simulated'] * 1e3:>9.3f} ms "
                  f"{values['exposed'] * 1e3:>9.3f} ms {step * 1e3:>9.3f} ms  "
                  f"{ratio(values['gathered_psi'], jit['gathered_psi']):>7} "
                  f"{ratio(step, jit_step):>8} "
                  f"{ratio(values['exposed'], jit['exposed']):>8}")
        if row["regathered"]:
            shown = ", ".join("@" + g for g in row["regathered"][:6])
            more = len(row["regathered"]) - 6
            print(f"{'':<{len(first)}}  default re-gathered {len(row['regathered'])} "
                  f"group(s): {shown}{f' and {more} more' if more > 0 else ''}")
    print("AG psi / RS psi: bytes all-gathered / reduce-scattered per micro-step in "
          "units of the model's parameter bytes (zcc's report).")
    print("coll: collectives of train_micro_step (gathers + reduce-scatters); "
          "regath: coll minus 2 per sharded group.")
    print("micro-step, exposed: train_micro_step's simulated time and the time its "
          "compute waits for collectives; step: micro-step + optimizer_step.")
    print("budget X=jit: the jit policy's train_micro_step peak in the budget-none "
          "row. Times: zcc's simulation on the h200 profile.")
    print()


if __name__ == "__main__":
    sys.exit(main())
