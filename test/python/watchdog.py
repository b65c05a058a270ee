"""The collective watchdog (runtime/comm/Watchdog.h): one rank is stopped
(SIGSTOP) in the middle of a job, and every other rank must end the job,
non-zero, within --collective-timeout plus 5 s, printing the line that names
the collective and the stopped rank. While they wait, the live ranks must
not spin a core (MpiCommunicator's waitQuietly): their CPU time over the
wait is measured from /proc and must stay under a quarter of the wall time.

    watchdog.py --zcc ZCC --zrun ZRUN --model M.onnx --data TOKENS --out DIR
                --case train|generate|python-train|python-generate
                --ranks N --stop R [--timeout T] [--python PY]

Cases: `zrun PLAN train` (the rank is stopped after the job printed its
second step); `zrun PLAN generate` of 1,016 new tokens under --check (about
2 s; stopped at its first progress line, after the first token); and Python
loops of Session.train_step and Session.generate (after the third
iteration; the script is this file with --loop). Prints
`ok CASE N=.. stopped rank R: ended in X s (rc Y), ...` or `FAIL ...`
(exit 1). The stopped process is killed at the end whatever happens.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time

MPIRUN = ["mpirun", "--oversubscribe", "--allow-run-as-root"]
LINE = re.compile(r"error: \[rank (\d+)\] collective #\d+, (.*), did not complete within "
                  r"--collective-timeout ([\d.]+) s \(waited ([\d.]+) s\): (.*); ending every rank")


def loop(args):
    """The Python side of the python-* cases: iterate until stopped."""
    import numpy as np
    import zplan
    zplan.set_collective_timeout(args.timeout)
    session = zplan.Session(args.plan, lr=1e-3)
    rank = zplan.rank()
    for i in range(1000000):
        if args.case == "python-train":
            rows, cols = session.train_input_shape
            session.train_step(np.arange(rows * cols).reshape(rows, cols) % 200 + rank)
        else:
            session.generate(np.full((session.generation_shape["batch"], 4), 5 + rank),
                             max_new_tokens=8)
        if rank == 0:
            print(f"iteration {i + 1}", flush=True)


def rank_pids(marker):
    """rank -> pid of the processes whose command line holds `marker`."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
            if marker not in command or "mpirun" in command:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(e.split("=", 1) for e in f.read().decode(errors="replace").split("\0")
                           if "=" in e)
        except OSError:
            continue
        if "OMPI_COMM_WORLD_RANK" in env:
            found[int(env["OMPI_COMM_WORLD_RANK"])] = int(pid)
    return found


def cpu_seconds(pid):
    """User plus system CPU time of process `pid` (all its threads), in s."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # Fields 14 and 15 of proc(5), counted from the state (field 3) here.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zcc", default="zcc")
    parser.add_argument("--zrun", default="zrun")
    parser.add_argument("--model")
    parser.add_argument("--data")
    parser.add_argument("--out")
    parser.add_argument("--case", required=True,
                        choices=["train", "generate", "python-train", "python-generate"])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--stop", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=3.0)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--loop", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--plan", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.loop:
        return loop(args)

    os.makedirs(args.out, exist_ok=True)
    name = f"{args.case}-n{args.ranks}"
    plan = os.path.join(args.out, name + ".zplan")
    train = args.case in ("train", "python-train")
    # The zrun generate case needs a run long enough to be stopped in.
    max_len = "1024" if args.case == "generate" else "32"
    compile_flags = (["--mode", "train", "--input-shape", "input_ids=2x16"] if train else
                     ["--mode", "generate", "--batch", "2", "--max-seq-len", max_len,
                      "--prompt-len", "8", "--bucket-size", "16KiB", "--policy", "jit"])
    subprocess.run([args.zcc, args.model, "--world-size", str(args.ranks),
                    "--persistence-threshold", "0", "-o", plan] + compile_flags,
                   check=True, stdout=subprocess.DEVNULL)
    timeout = ["--collective-timeout", str(args.timeout)]
    if args.case == "train":
        command = [args.zrun, plan, "train", "--data", args.data, "--steps", "1000000",
                   "--log-every", "1"] + timeout
        ready = re.compile(r"step 2/")
    elif args.case == "generate":
        import numpy as np
        prompt = os.path.join(args.out, name + "-prompt.npy")
        np.save(prompt, np.full((2 * args.ranks, 8), 5, dtype=np.int64))
        command = [args.zrun, plan, "generate", "--prompt", prompt, "--output",
                   os.path.join(args.out, name + "-tokens.npy"), "--max-new-tokens", "1016",
                   "--check"] + timeout
        ready = re.compile(r"token 1/")
    else:
        command = [args.python, os.path.abspath(__file__), "--loop", "--case", args.case,
                   "--plan", plan, "--timeout", str(args.timeout)]
        ready = re.compile(r"iteration 3\b")
    # stdout and stderr together (zrun generate's progress is on stderr),
    # every line kept in the log, read by a thread so that the job's output
    # never blocks it while this process measures.
    err_path = os.path.join(args.out, name + ".err")
    job = subprocess.Popen(MPIRUN + ["-np", str(args.ranks)] + command,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=dict(os.environ, PYTHONUNBUFFERED="1"))
    is_ready = threading.Event()

    def read_output():
        with open(err_path, "w") as log:
            for line in job.stdout:
                log.write(line)
                log.flush()
                if ready.search(line):
                    is_ready.set()
        is_ready.set()

    reader = threading.Thread(target=read_output, daemon=True)
    reader.start()
    stopped = None
    cpu_share = None
    try:
        is_ready.wait()
        if job.poll() is None:
            pids = rank_pids(plan)
            if args.stop not in pids:
                print(f"FAIL {name}: no process of rank {args.stop} ({pids})")
                return 1
            stopped = pids[args.stop]
            os.kill(stopped, signal.SIGSTOP)
            began = time.monotonic()
            # The live ranks' CPU time over most of the wait: from when each
            # has surely reached the collective until shortly before the
            # deadline.
            live = [pid for rank, pid in pids.items() if rank != args.stop]
            window = (0.5, max(1.0, args.timeout - 0.5))
            time.sleep(window[0])
            try:
                used = [cpu_seconds(pid) for pid in live]
                time.sleep(window[1] - window[0])
                used = [cpu_seconds(pid) - u for pid, u in zip(live, used)]
                cpu_share = max(used) / (window[1] - window[0])
            except OSError:
                pass  # a rank ended early; the checks below say how
        if stopped is None:
            job.wait()
            print(f"FAIL {name}: the job ended (rc {job.returncode}) before it was ready")
            return 1
        try:
            rc = job.wait(timeout=args.timeout + 30)
        except subprocess.TimeoutExpired:
            print(f"FAIL {name}: still running {args.timeout + 30:.0f} s after rank "
                  f"{args.stop} was stopped")
            job.kill()
            return 1
        elapsed = time.monotonic() - began
    finally:
        for pid in ([stopped] if stopped else []) + list(rank_pids(plan).values()):
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
    # The live ranks' lines. (Open MPI continues a stopped rank before it
    # kills it, and its watchdog, long past its deadline, may print too.)
    reader.join(timeout=10)
    with open(err_path) as f:
        lines = [m for m in (LINE.search(l) for l in f)
                 if m and int(m.group(1)) != args.stop]
    if rc == 0:
        print(f"FAIL {name}: the job exited 0 with rank {args.stop} stopped")
        return 1
    if elapsed > args.timeout + 5:
        print(f"FAIL {name}: the job ended {elapsed:.1f} s after the stop, past "
              f"--collective-timeout {args.timeout} + 5 s")
        return 1
    # Each live rank names the stopped one among those missing from the
    # collective it waits in (on 4 ranks, one that got through collective k
    # waits in k+1 for the ranks still in k, too).
    def missing(match):
        return {int(r) for r in re.findall(r"\d+", match.group(5).split(" did not")[0])}
    if not lines or any(args.stop not in missing(m) or "did not arrive" not in m.group(5)
                        for m in lines):
        print(f"FAIL {name}: expected every live rank's line to name rank {args.stop} "
              f"as not arrived, got {[m.group(0) for m in lines]} (stderr in {err_path})")
        return 1
    if cpu_share is None or cpu_share > 0.25:
        print(f"FAIL {name}: the live ranks' CPU use while waiting was not measured or "
              f"exceeded a quarter of a core: {cpu_share}")
        return 1
    first = lines[0]
    print(f"ok {args.case} N={args.ranks} stopped rank {args.stop}: ended in {elapsed:.1f} s "
          f"(rc {rc}, deadline {args.timeout:g} s); {len(lines)} live rank(s) named it; "
          f"the busiest live rank used {100 * cpu_share:.0f}% of a core while waiting; rank "
          f"{first.group(1)}: '{first.group(2)}' waited {first.group(4)} s, {first.group(5)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
