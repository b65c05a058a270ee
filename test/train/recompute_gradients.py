"""Activation checkpointing must not change the gradients.

Compiles one fixture for training twice on N ranks with
--persistence-threshold 0: without a budget (nothing recomputed) and under
--memory-budget BUDGET (which must make zplan-recompute recompute blocks),
runs `mpirun -np N zrun PLAN gradients` on the same input_ids for both, and
checks:
  - the budget plan's report says blocks were recomputed, and the plain
    one's says nothing of recomputation;
  - the budget plan runs clean under zrun --check (no read of a released
    or not yet gathered parameter);
  - the loss and every parameter's gradient agree to 1e-6 (relative to the
    largest magnitude of that gradient; recomputation repeats the same
    kernels on the same inputs, so they are expected to be bitwise equal,
    and the line says whether they are);
  - the budget plan's peak per rank (resident + arena, --dump memory) is
    lower than the plain plan's.
--zcc-flag FLAG (repeatable) goes to both compiles, e.g. --param-dtype=bf16:
a mixed-precision plan reads each parameter through an f32 cast of its bf16
copy, which a recomputed block must recompute too (else the forward's cast
lives across the gap).
Prints one `ok` line per check and exits non-zero at the first failure.
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys

import numpy as np


def mpirun(world):
    command = ["mpirun", "-np", str(world), "--oversubscribe"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    return command


def fail(message):
    print("FAIL " + message)
    sys.exit(1)


def compile_plan(args, out, name, budget):
    dumps = out / (name + "-dumps")
    command = [args.zcc, args.model, "--mode", "train",
               "--world-size", str(args.world),
               "--input-shape", "input_ids=4x64",
               "--persistence-threshold", "0",
               "--dump", "report,memory", "--dump-dir", str(dumps),
               "-o", str(out / (name + ".zplan"))]
    if budget:
        command += ["--memory-budget", budget]
    command += args.zcc_flag
    subprocess.run(command, check=True)
    report = (dumps / "report.txt").read_text()
    memory = (dumps / "memory.txt").read_text()
    total = int(re.search(r"^total per rank: (\d+) B", memory, re.M).group(1))
    return report, total


def gradients(args, out, name, ids, check=False):
    directory = out / (name + "-gradients")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    subprocess.run(mpirun(args.world) + [
        args.zrun, str(out / (name + ".zplan")), "gradients",
        "--input", "input_ids=" + str(ids), "--output-dir", str(directory)] +
        (["--check"] if check else []),
        check=True, env=env)
    files = {}
    for line in (directory / "gradients.txt").read_text().splitlines():
        param, file = line.split("\t")
        files[param] = np.load(directory / file)
    files["loss"] = np.load(directory / "loss.npy")
    return files


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zcc", required=True)
    parser.add_argument("--zrun", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--budget", required=True)
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--out", required=True)
    parser.add_argument("--zcc-flag", action="append", default=[])
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    label = pathlib.Path(args.model).stem

    plain_report, plain_total = compile_plan(args, out, "plain", None)
    budget_report, budget_total = compile_plan(args, out, "budget", args.budget)
    if "recompute:" in plain_report:
        fail(label + ": the plan without a budget recomputes")
    match = re.search(r"^recompute: (\d+) of (\d+) blocks recomputed.*$",
                      budget_report, re.M)
    if not match or int(match.group(1)) == 0:
        fail(label + ": --memory-budget " + args.budget +
             " recomputes nothing")
    print("ok " + label + " " + match.group(0))
    if budget_total >= plain_total:
        fail("%s: peak per rank %d B with recompute, not below %d B without"
             % (label, budget_total, plain_total))
    print("ok %s peak per rank %d B with recompute < %d B without"
          % (label, budget_total, plain_total))

    ids = out / "input_ids.npy"
    np.save(ids, np.random.default_rng(0).integers(0, 256, (4, 64)))
    plain = gradients(args, out, "plain", ids)
    # --check: a recomputed op that read a released gathered copy would fail.
    budget = gradients(args, out, "budget", ids, check=True)
    if sorted(plain) != sorted(budget):
        fail(label + ": the two runs wrote different gradient files")
    worst, bitwise = 0.0, True
    for name in sorted(plain):
        a, b = plain[name], budget[name]
        if a.shape != b.shape:
            fail("%s: %s has shape %s vs %s" % (label, name, a.shape, b.shape))
        bitwise = bitwise and np.array_equal(a, b)
        scale = max(float(np.max(np.abs(a))), 1e-30)
        error = float(np.max(np.abs(a - b))) / scale if a.size else 0.0
        worst = max(worst, error)
        if error > 1e-6:
            fail("%s: %s differs by %g (relative)" % (label, name, error))
    print("ok %s %d gradients and the loss agree (max-rel-err %g, %s)"
          % (label, len(plain) - 1, worst,
             "bitwise" if bitwise else "not bitwise"))


if __name__ == "__main__":
    main()
