#!/usr/bin/env python3
"""Compile-time benchmark: zcc's time and peak memory against the layer count.

For Llama-2-70B-shaped float32 graphs of 10, 20, 40 and 80 layers (bench/
make_shaped_models.py; zcc --no-weights never reads their sparse weights) and
each mode, runs

    zcc MODEL.onnx --mode infer|train --input-shape input_ids=1x2048 \\
        --world-size N --hardware h200 --no-weights --dump report --dump-dir DIR
    zcc MODEL.onnx --mode generate --batch 1 --max-seq-len 2048 \\
        --prompt-len 128 --world-size N --hardware h200 --no-weights ...

(no -o: nothing is written but the dumps) at N = 8 and 64, and measures each
compile's wall time and peak RSS (the child's own, from wait4). The baseline
of each row is the same mode and N at 10 layers, in the same run: the time
ratio against the layer ratio says whether compile time grows linearly
(issue 24 asks for at most linear growth, and 80 layers under 2 s for infer
and 5 s for train on this machine).

    python3 bench/compile_bench.py                 # all (~35 s on 2 cores)
    python3 bench/compile_bench.py --layers 10 --layers 20 --modes infer

Exits 1 when a compile fails.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_shaped_models  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = {10: "llama2-70b-10l-f32", 20: "llama2-70b-20l-f32",
         40: "llama2-70b-40l-f32", 80: "llama2-70b-f32"}
MODE_FLAGS = {
    "infer": ["--mode", "infer", "--input-shape", "input_ids=1x2048"],
    "train": ["--mode", "train", "--input-shape", "input_ids=1x2048"],
    "generate": ["--mode", "generate", "--batch", "1", "--max-seq-len", "2048",
                 "--prompt-len", "128"],
}


def compile_once(zcc, model, mode, world, dump_dir):
    """(seconds, peak RSS in bytes) of one zcc run; exits on failure."""
    command = [zcc, model] + MODE_FLAGS[mode] + [
        "--world-size", str(world), "--hardware", "h200", "--no-weights", "--dump", "report",
        "--dump-dir", dump_dir]
    started = time.monotonic()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.monotonic() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        sys.exit(f"compile_bench: {' '.join(command)} failed ({child.returncode}):\n"
                 f"{stderr.decode(errors='replace')[-2000:]}")
    return seconds, usage.ru_maxrss * 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--zcc", default=os.path.join(ROOT, "build", "bin", "zcc"))
    parser.add_argument("--cache-dir", default=make_shaped_models.DEFAULT_CACHE_DIR)
    parser.add_argument("--layers", type=int, action="append", choices=sorted(MODEL))
    parser.add_argument("--modes", action="append", choices=sorted(MODE_FLAGS))
    parser.add_argument("--worlds", type=int, action="append")
    args = parser.parse_args()
    layers = sorted(args.layers or MODEL)
    modes = args.modes or ["infer", "train", "generate"]
    worlds = args.worlds or [8, 64]
    paths = make_shaped_models.ensure_models(args.cache_dir, [MODEL[l] for l in layers])
    print(f"# compile_bench: zcc {args.zcc}; {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.2f} at start")
    print(f"{'mode':9s} {'N':>3s} {'layers':>6s} {'seconds':>8s} {'peak RSS MiB':>13s} "
          f"{'s/layer':>8s} {'time ratio':>11s} {'layer ratio':>12s}")
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        for mode in modes:
            for world in worlds:
                for count in layers:
                    seconds, rss = compile_once(args.zcc, paths[MODEL[count]], mode, world,
                                                os.path.join(scratch, f"{mode}-{world}-{count}"))
                    results[(mode, world, count)] = (seconds, rss)
                    base = results.get((mode, world, layers[0]))
                    ratio = seconds / base[0] if base else float("nan")
                    print(f"{mode:9s} {world:3d} {count:6d} {seconds:8.2f} {rss / 2**20:13.1f} "
                          f"{seconds / count:8.3f} {ratio:11.2f} {count / layers[0]:12.1f}",
                          flush=True)
    print("time ratio: this compile's time over the same mode and N at the fewest layers, "
          "in this run; growth is at most linear where it is at most the layer ratio.")
    print(f"# load {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
