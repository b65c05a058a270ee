"""Flips single bits in a plan and its weights file and runs zrun on each.

    corrupt_files.py --zrun ZRUN --work DIR --plan G.zplan --input NAME=FILE.npy
                     --output NAME --seed S --count N --ranks R

For each of the two files (weights, plan), N times: copies the plan and its
weights into a fresh directory, flips one random bit (fixed seed) of that
file, and runs `mpirun -np R zrun PLAN run --input ... --output NAME=...`.
A flip is refused when zrun exits non-zero, prints exactly one
`zrun: error:` line, which says the file is damaged (INTEGRITY), and leaves
no output file (and no temporary) behind.

Prints, per file, one line `FILE: K of N flips refused`, then for each kind
of error line (numbers and quoted names elided) how many flips gave it, and
every flip that was not refused with its output. Exits 1 if any was not.
"""
import argparse
import concurrent.futures
import os
import random
import re
import shutil
import subprocess
import sys


# What a refusal for a damaged file says; anything else (a shape mismatch,
# a crash report) means the damage got past the checks.
INTEGRITY = re.compile(r"checksum|corrupt|not a zplan weights file|"
                       r"format version|another plan|truncated")


def kind_of(line):
    """An error line without what varies between flips."""
    line = re.sub(r"'[^']*'", "'...'", line)
    line = re.sub(r"\d+", "N", line)
    return re.sub(r"Nx[0-9a-fN]+", "0x...", line)


def run_case(args, target, case, position, bit):
    directory = os.path.join(args.work, f"{target}-{case}")
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    plan = os.path.join(directory, os.path.basename(args.plan))
    shutil.copyfile(args.plan, plan)
    shutil.copyfile(args.plan + ".weights", plan + ".weights")
    path = plan + ".weights" if target == "weights" else plan
    with open(path, "r+b") as file:
        file.seek(position)
        byte = file.read(1)[0]
        file.seek(position)
        file.write(bytes([byte ^ (1 << bit)]))
    output = os.path.join(directory, "out.npy")
    command = ["mpirun", "-np", str(args.ranks), "--oversubscribe",
               "--allow-run-as-root", args.zrun, plan, "run",
               "--input", args.input, "--output", f"{args.output}={output}"]
    result = subprocess.run(command, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=120)
    errors = [line for line in result.stdout.splitlines()
              if "zrun: error:" in line]
    left = sorted(set(os.listdir(directory)) -
                  {os.path.basename(plan), os.path.basename(plan) + ".weights"})
    refused = (result.returncode != 0 and len(errors) == 1 and not left and
               INTEGRITY.search(errors[0]) is not None)
    description = (f"{target} byte {position} bit {bit}: exit "
                   f"{result.returncode}, {len(errors)} error lines, "
                   f"left {left}\n{result.stdout}")
    shutil.rmtree(directory, ignore_errors=True)
    return target, refused, errors, description


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zrun", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--plan", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--ranks", type=int, default=2)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)

    generator = random.Random(args.seed)
    cases = []
    for target in ("weights", "plan"):
        path = args.plan + ".weights" if target == "weights" else args.plan
        size = os.path.getsize(path)
        for case in range(args.count):
            cases.append((target, case, generator.randrange(size),
                          generator.randrange(8)))

    # mpirun mostly waits on process start-up: run a few at once.
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda case: run_case(args, *case), cases))

    failed = False
    for target in ("weights", "plan"):
        mine = [r for r in results if r[0] == target]
        refused = sum(1 for r in mine if r[1])
        print(f"{target}: {refused} of {len(mine)} flips refused")
        kinds = {}
        for _, ok, errors, _ in mine:
            if ok:
                kinds[kind_of(errors[0])] = kinds.get(kind_of(errors[0]), 0) + 1
        for kind, count in sorted(kinds.items()):
            print(f"  {count:3d}  {kind}")
        for _, ok, _, description in mine:
            if not ok:
                failed = True
                print("NOT REFUSED: " + description)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
