"""Helpers shared by the training checks: launching zcc and mpirun + zrun, and
reporting a failure as one clear line.

Every check prints `ok ...` lines for FileCheck and, on the first failure, one
`FAIL ...` line naming the model, the configuration and what differed, then
exits 1. A failing zcc or zrun is reported with its command line and the last
lines of its stderr, so a missing `--mode train` or `zrun ... gradients` reads
as exactly that.
"""
import os
import shlex
import subprocess
import sys


class CheckFailure(Exception):
    """One failed expectation; the message is the whole report."""


def mpirun(world):
    command = ["mpirun", "-np", str(world), "--oversubscribe"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    return command


def run_tool(what, command, timeout=300):
    """Runs a command; raises CheckFailure naming `what` when it fails."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CheckFailure(f"{what}: timed out after {timeout} s: {shlex.join(command)}")
    except OSError as error:
        raise CheckFailure(f"{what}: cannot run {command[0]}: {error}")
    if done.returncode != 0:
        lines = (done.stderr.strip() or done.stdout.strip()).splitlines()
        # The tool's own `zcc: error:` / `zrun: error:` lines, not mpirun's footer.
        errors = [l.strip() for l in lines if "error" in l.lower() and "mpirun" not in l.lower()]
        tail = " | ".join(errors[:3] or [l.strip() for l in lines[-3:]])
        raise CheckFailure(f"{what}: exit status {done.returncode}: {tail}  "
                           f"[command: {shlex.join(command)}]")
    return done


def compile_train(zcc, model, plan, world, input_shape, threshold, extra=(), label=""):
    """zcc MODEL --mode train ... -o PLAN; threshold None keeps zcc's default."""
    command = [zcc, str(model), "--mode", "train", "--world-size", str(world),
               "--input-shape", input_shape]
    if threshold is not None:
        command += ["--persistence-threshold", str(threshold)]
    command += list(extra) + ["-o", str(plan)]
    run_tool(f"{label + ': ' if label else ''}zcc --mode train", command)


def main_wrapper(body):
    """Runs body(); turns a CheckFailure into `FAIL ...` and exit status 1."""
    try:
        body()
    except CheckFailure as failure:
        print(f"FAIL {failure}")
        sys.stdout.flush()
        sys.exit(1)
