#!/usr/bin/env python3
"""zrun benchmark: forward time and per-rank memory on CPU, with baselines.

One model with real random weights, llama-medium from make_shaped_models.py
(Llama's graph at 8 layers, hidden 1024, 155.7M float32 parameters), and one
input_ids array (1x128 by default). zcc compiles one plan per world size N
(1, 2, 4); each trial runs

    mpirun -np N zrun PLAN run --input input_ids=IDS --output logits=OUT \\
        --repeat 5 --stats                      (OPENBLAS_NUM_THREADS=1)

and takes the `run time` zrun prints (the last of the 5 runs) and every
rank's `peak RSS` line. The figures are the median over the trials (3).

  1. check: onnxruntime runs the model, and zrun's logits at every N are
     within 1e-4 x max|logit| of onnxruntime's and the same bit for bit as
     N=1's (sharding moves weights; it must not change arithmetic);
  2. forward time: zrun at N=1 against onnxruntime with 1 intra-op thread
     on the same model and input, measured the same way: per trial, 5
     back-to-back runs in one session (after one warm-up when the session
     is made), the last one timed; the trials interleave with zrun's so
     both see the same machine;
  3. the cost of sharding on one machine: zrun at N against zrun at N=1;
  4. peak RSS per rank against P/N + arena + a constant, P being the
     model's parameter bytes.

Exits 1 when a run fails, a check fails, or zrun's output cannot be read.

    python3 bench/zrun_bench.py                    # about a minute on 2 cores
    python3 bench/zrun_bench.py --zcc /other/build/bin/zcc --zrun /other/build/bin/zrun

See bench/README.md ("zrun_bench.py").
"""

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

# Import the sibling generator without leaving a __pycache__ in the tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_shaped_models  # noqa: E402

REPO_ROOT = make_shaped_models.REPO_ROOT
DEFAULT_ZCC = os.path.join(REPO_ROOT, "build", "bin", "zcc")
DEFAULT_ZRUN = os.path.join(REPO_ROOT, "build", "bin", "zrun")
MODEL = "llama-medium"
INPUT_SEED = 20261130
# zrun's logits against onnxruntime's, relative to max |logit| (as
# test/e2e/parity.py).
LOGITS_TOLERANCE = 1e-4
# Rank RSS = P/N + arena + C: C may move by at most this fraction of P
# between world sizes (the P/N term moves by 0.75 P from N=1 to N=4).
CONSTANT_TOLERANCE = 0.05
# Other processes' share of the CPUs above which the output says the
# machine was busy.
BUSY_FRACTION = 0.10

MiB = 1 << 20
RUN_TIME = re.compile(r"^zrun: run time ([0-9.]+) s$", re.M)
STATS = re.compile(r"^zrun: rank (\d+): peak RSS (\d+) B, arena (\d+) B, "
                   r"shards (\d+) B, persistent (\d+) B$", re.M)


class BenchError(Exception):
    pass


#===------------------------------------------------------------------------===#
# The machine
#===------------------------------------------------------------------------===#

class CpuMonitor:
    """How much CPU other processes used while this bench ran.

    /proc/stat's busy time of all CPUs, less the CPU time of this process
    and of its children (mpirun and its ranks, zcc: every one is waited for,
    so its time is in RUSAGE_CHILDREN), over wall time x CPUs.
    """

    def __init__(self):
        self.cpus = os.cpu_count() or 1
        self.start = self.sample()

    @staticmethod
    def sample():
        with open("/proc/stat") as handle:
            fields = [int(value) for value in handle.readline().split()[1:]]
        user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
        busy = (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
        own = sum(getattr(resource.getrusage(who), field)
                  for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                  for field in ("ru_utime", "ru_stime"))
        return time.monotonic(), busy, own

    def other_fraction(self):
        """Other processes' CPU time / (wall time x CPUs) since the start."""
        wall, busy, own = (end - begin for end, begin in
                           zip(self.sample(), self.start))
        return max(0.0, busy - own) / (wall * self.cpus) if wall > 0 else 0.0


def cpu_name():
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def command_output(command):
    try:
        return subprocess.run(command, capture_output=True, text=True,
                              timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def linked_blas(binary):
    """The BLAS library `binary` loads, from ldd."""
    for line in command_output(["ldd", binary]).splitlines():
        if "blas" in line:
            return line.split("=>")[-1].split("(")[0].strip()
    return "unknown"


def describe_build(binary):
    revision = command_output(["git", "-C", REPO_ROOT, "describe", "--always",
                               "--dirty"]).strip() or "unknown"
    built = time.strftime("%Y-%m-%d %H:%M:%S",
                          time.localtime(os.path.getmtime(binary)))
    return f"{binary} (built {built}; source tree {revision})"


#===------------------------------------------------------------------------===#
# Runs
#===------------------------------------------------------------------------===#

def mpirun(world):
    # No binding: the machine's cores are shared, and onnxruntime (the
    # baseline) is not bound either. --oversubscribe: N may exceed the cores.
    command = ["mpirun", "-np", str(world), "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    return command


def zrun_environment():
    return dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")


def run(command, timeout, env=None):
    """stdout of `command`; BenchError when it fails or times out."""
    try:
        completed = subprocess.run(command, capture_output=True, text=True,
                                   timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise BenchError(f"timed out after {timeout:g} s: {' '.join(command)}")
    if completed.returncode != 0:
        raise BenchError(f"exit status {completed.returncode}: {' '.join(command)}"
                         f"\n    {completed.stderr.strip() or completed.stdout.strip()}")
    return completed.stdout


def run_zrun(zrun, plan, world, ids_path, logits_path, repeat, timeout):
    """One measurement: (seconds of the last run, {rank: stats})."""
    command = mpirun(world) + [zrun, plan, "run", "--input", f"input_ids={ids_path}",
                               "--output", f"logits={logits_path}",
                               "--repeat", str(repeat), "--stats"]
    stdout = run(command, timeout, env=zrun_environment())
    times = RUN_TIME.findall(stdout)
    stats = {int(m[0]): dict(rss=int(m[1]), arena=int(m[2]), shards=int(m[3]),
                             persistent=int(m[4]))
             for m in STATS.findall(stdout)}
    if len(times) != 1 or sorted(stats) != list(range(world)):
        raise BenchError(f"cannot read zrun's output (want one 'run time' line "
                         f"and {world} 'rank' lines): {' '.join(command)}\n"
                         f"{stdout}")
    return float(times[0]), stats


def logits_error(logits, reference):
    """max |logits - reference| / max |reference|."""
    if logits.shape != reference.shape:
        raise BenchError(f"zrun's logits are {logits.shape}, onnxruntime's "
                         f"{reference.shape}")
    return float(np.abs(logits - reference).max()) / float(np.abs(reference).max())


#===------------------------------------------------------------------------===#
# Output
#===------------------------------------------------------------------------===#

def ms(seconds):
    return f"{seconds * 1e3:8.1f} ms"


def mib(count):
    return f"{count / MiB:8.1f} MiB"


def spread(values):
    return f"{min(values) * 1e3:.1f}..{max(values) * 1e3:.1f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--zcc", default=DEFAULT_ZCC)
    parser.add_argument("--zrun", default=DEFAULT_ZRUN)
    parser.add_argument("--cache-dir", default=make_shaped_models.DEFAULT_CACHE_DIR,
                        help="where the model lives (built if missing)")
    parser.add_argument("--work-dir",
                        help="plans, input and logits (default: a temporary "
                             "directory, removed at the end)")
    parser.add_argument("--sequence", type=int, default=128,
                        help="input_ids is 1 x this (default 128)")
    parser.add_argument("--worlds", default="1,2,4",
                        help="world sizes, the first is the baseline (default 1,2,4)")
    parser.add_argument("--repeat", type=int, default=5,
                        help="zrun --repeat per measurement (default 5)")
    parser.add_argument("--trials", type=int, default=3,
                        help="measurements per world size; medians are "
                             "printed (default 3)")
    parser.add_argument("--timeout", type=float, default=600,
                        help="seconds one zcc or zrun run may take (default 600)")
    args = parser.parse_args()
    worlds = [int(w) for w in args.worlds.split(",")]
    if worlds[0] != 1 or min(worlds) < 1:
        parser.error("--worlds must start with 1 (the baseline)")
    if args.repeat < 1 or args.trials < 1 or args.sequence < 1:
        parser.error("--repeat, --trials and --sequence must be at least 1")
    for tool in (args.zcc, args.zrun):
        if not os.access(tool, os.X_OK):
            sys.exit(f"zrun_bench: error: not found or not executable: {tool} "
                     f"(build it, or pass --zcc/--zrun)")
    if shutil.which("mpirun") is None:
        sys.exit("zrun_bench: error: mpirun is not on PATH")

    work_dir = args.work_dir or tempfile.mkdtemp(prefix="zrun_bench-")
    os.makedirs(work_dir, exist_ok=True)
    try:
        return bench(args, worlds, work_dir)
    except BenchError as error:
        print(f"zrun_bench: error: {error}", file=sys.stderr)
        return 1
    finally:
        if not args.work_dir:
            shutil.rmtree(work_dir, ignore_errors=True)


def bench(args, worlds, work_dir):
    monitor = CpuMonitor()
    with open("/proc/loadavg") as handle:
        load_before = " ".join(handle.read().split()[:3])
    import onnx
    import onnxruntime as ort

    model_path = make_shaped_models.ensure_models(args.cache_dir, [MODEL])[MODEL]
    _, cfg, seed = make_shaped_models.WEIGHTED_MODELS[MODEL]
    with open(make_shaped_models.model_paths(args.cache_dir, MODEL)[3]) as handle:
        parameters = json.load(handle)["parameters"]
    itemsize = np.dtype(cfg["dtype"]).itemsize
    parameter_bytes = parameters * itemsize

    ids = np.random.default_rng(INPUT_SEED).integers(
        0, cfg["vocab"], size=(1, args.sequence), dtype=np.int64)
    ids_path = os.path.join(work_dir, "input_ids.npy")
    np.save(ids_path, ids)

    print(f"# model: {MODEL} ({model_path}): {cfg['layers']} layers, hidden "
          f"{cfg['hidden']}, {cfg['heads']} heads ({cfg['kv_heads']} kv), "
          f"intermediate {cfg['intermediate']}, vocab {cfg['vocab']}, "
          f"{cfg['dtype']}, random weights (seed {seed})")
    print(f"# P = {parameters:,} parameters = {parameter_bytes:,} B "
          f"({parameter_bytes / MiB:.1f} MiB); input_ids 1x{args.sequence} "
          f"(seed {INPUT_SEED})")
    print(f"# zcc:  {describe_build(args.zcc)}")
    print(f"# zrun: {describe_build(args.zrun)}")
    mpi_version = command_output(["mpirun", "--version"]).splitlines()
    print(f"# machine: {os.cpu_count()} CPUs ({cpu_name()}); load average "
          f"before: {load_before}")
    print(f"# zrun: OPENBLAS_NUM_THREADS=1 (and --threads 1, the default), "
          f"OpenBLAS {linked_blas(args.zrun)}; "
          f"{mpi_version[0] if mpi_version else 'mpirun'}, "
          f"{' '.join(mpirun('N')[1:])}")
    print(f"# onnxruntime {ort.__version__} (CPUExecutionProvider, 1 intra-op "
          f"thread, 1 inter-op thread, sequential); numpy {np.__version__}; "
          f"onnx {onnx.__version__}; Python {platform.python_version()}")
    print(f"# method: per trial, zrun --repeat {args.repeat} in one process and "
          f"{args.repeat} back-to-back onnxruntime runs in one session (after "
          f"one warm-up when it is created); each takes its last run's time; "
          f"medians of {args.trials} trials, interleaved", flush=True)

    # onnxruntime: the reference logits (its warm-up run).
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    try:
        session = ort.InferenceSession(model_path, options,
                                       providers=["CPUExecutionProvider"])
        reference = session.run(["logits"], {"input_ids": ids})[0]
    except Exception as error:  # onnxruntime raises its own types
        raise BenchError(f"onnxruntime cannot run {model_path}: {error}")
    if not np.all(np.isfinite(reference)):
        raise BenchError("onnxruntime's logits are not all finite")
    print(f"check: onnxruntime runs the model: logits "
          f"{'x'.join(map(str, reference.shape))}, max|logit| "
          f"{np.abs(reference).max():.4f}")

    plans = {}
    for world in worlds:
        plans[world] = os.path.join(work_dir, f"{MODEL}-{world}.zplan")
        print(f"# compiling N={world} ...", file=sys.stderr, flush=True)
        run([args.zcc, model_path, f"--input-shape=input_ids=1x{args.sequence}",
             f"--world-size={world}", "-o", plans[world]], args.timeout)

    ort_times = []
    times = {world: [] for world in worlds}
    stats = {world: [] for world in worlds}
    errors = {world: [] for world in worlds}
    failures = []
    first_logits = None
    identical = True
    for trial in range(args.trials):
        # onnxruntime as zrun --repeat: back-to-back runs, the last timed.
        for _ in range(args.repeat):
            begin = time.perf_counter()
            session.run(["logits"], {"input_ids": ids})
            seconds = time.perf_counter() - begin
        ort_times.append(seconds)
        for world in worlds:
            print(f"# trial {trial + 1}/{args.trials}: zrun N={world} ...",
                  file=sys.stderr, flush=True)
            logits_path = os.path.join(work_dir, f"logits-{world}-{trial}.npy")
            seconds, ranks = run_zrun(args.zrun, plans[world], world, ids_path,
                                      logits_path, args.repeat, args.timeout)
            times[world].append(seconds)
            stats[world].append(ranks)
            logits = np.load(logits_path)
            os.remove(logits_path)
            errors[world].append(logits_error(logits, reference))
            if first_logits is None:
                first_logits = logits
            elif not np.array_equal(logits, first_logits):
                identical = False
                failures.append(
                    f"zrun N={world} trial {trial + 1}: logits differ from N=1's "
                    f"by up to {float(np.abs(logits - first_logits).max()):.3e}")
    other = monitor.other_fraction()

    # Checks.
    for world in worlds:
        error = max(errors[world])
        ok = error <= LOGITS_TOLERANCE
        print(f"check: zrun N={world} logits vs onnxruntime: max|diff| / "
              f"max|logit| = {error:.2e} (limit {LOGITS_TOLERANCE:g}, worst of "
              f"{args.trials}) {'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"zrun N={world}: logits error {error:.2e} over "
                            f"{LOGITS_TOLERANCE:g} x max|logit|")
    print(f"check: zrun logits at every N and trial identical bit for bit to "
          f"N=1's: {'ok' if identical else 'FAIL'}")
    print()

    # 1. Forward time against onnxruntime.
    ort_median = statistics.median(ort_times)
    zrun_times = {world: statistics.median(times[world]) for world in worlds}
    base = zrun_times[1]
    print(f"Forward time, 1x{args.sequence}, one rank vs onnxruntime (1 thread each)")
    header = f"{'':<26} {'median':>11} {'min..max ms':>16} {'zrun/ort':>9}"
    print(header)
    print("-" * len(header))
    print(f"{'onnxruntime, 1 thread':<26} {ms(ort_median):>11} "
          f"{spread(ort_times):>16} {'':>9}")
    print(f"{'zrun N=1':<26} {ms(base):>11} {spread(times[1]):>16} "
          f"{base / ort_median:>9.3f}")
    print()

    # 2. The cost of sharding on one machine.
    cpus = os.cpu_count() or 1
    print(f"Cost of sharding on one machine ({cpus} cores), zrun N ranks vs 1")
    header = (f"{'N':>3} {'ranks/core':>10} {'median':>11} {'min..max ms':>16} "
              f"{'/N=1':>7} {'ideal':>6} {'/ideal':>7} {'/ort':>7}")
    print(header)
    print("-" * len(header))
    for world in worlds:
        ratio = zrun_times[world] / base
        ideal = max(1.0, world / cpus)
        print(f"{world:>3} {world / cpus:>10.1f} {ms(zrun_times[world]):>11} "
              f"{spread(times[world]):>16} {ratio:>7.3f} {ideal:>6.1f} "
              f"{ratio / ideal:>7.3f} {zrun_times[world] / ort_median:>7.3f}")
    print(f"note: every rank runs the whole forward on the same input (the "
          f"plan shards weights, not work), so N ranks do N times the work of "
          f"one; ideal = max(1, N/cores) is /N=1 with no overhead at all. "
          f"This machine has {cpus} cores: N > {cpus} oversubscribes (ranks "
          f"share cores). These ratios measure the overhead of sharding "
          f"(gathers, waits, the comm thread) on one machine, not scaling.")
    print()

    # 3. Peak RSS per rank.
    print(f"Peak RSS per rank (max over ranks, median of {args.trials} trials); "
          f"P = {parameter_bytes / MiB:.1f} MiB; C = RSS - P/N - arena")
    header = (f"{'N':>3} {'rank':>4} {'RSS':>12} {'shards+pers':>12} {'arena':>12} "
              f"{'P/N':>12} {'RSS/RSS(1)':>11} {'C':>12}")
    print(header)
    print("-" * len(header))
    constants = {}
    for world in worlds:
        peaks = []
        for ranks in stats[world]:
            rank = max(ranks, key=lambda r: ranks[r]["rss"])
            peaks.append(dict(ranks[rank], rank=rank))
        peaks.sort(key=lambda entry: entry["rss"])
        median = peaks[len(peaks) // 2]
        rss = median["rss"]
        share = parameter_bytes / world
        constants[world] = rss - share - median["arena"]
        if world == 1:
            rss_1 = rss
        print(f"{world:>3} {median['rank']:>4} {mib(rss):>12} "
              f"{mib(median['shards'] + median['persistent']):>12} "
              f"{mib(median['arena']):>12} {mib(share):>12} "
              f"{rss / rss_1:>11.3f} {mib(constants[world]):>12}")
    print("rank: the rank with the largest RSS (rank 0 also stages the logits "
          "it writes). C: the binary, libraries, MPI, plan, input and output.")
    drift = max(constants.values()) - min(constants.values())
    ok = drift <= CONSTANT_TOLERANCE * parameter_bytes
    print(f"check: RSS(N) = P/N + arena + C with C constant: C moves by "
          f"{drift / MiB:.1f} MiB across N (limit {CONSTANT_TOLERANCE:g} x P = "
          f"{CONSTANT_TOLERANCE * parameter_bytes / MiB:.1f} MiB) "
          f"{'ok' if ok else 'FAIL'}")
    if not ok:
        failures.append(f"rank RSS does not follow P/N + arena + C: C moves by "
                        f"{drift / MiB:.1f} MiB across N")
    print()

    busy = other >= BUSY_FRACTION
    print(f"note: other processes used {other * 100:.0f}% of the {cpus} CPUs "
          f"while this bench ran"
          f"{' -- the machine was busy; times are inflated and noisy' if busy else ''}")
    if failures:
        for failure in failures:
            print(f"zrun_bench: error: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
