#!/usr/bin/env python3
"""Data-parallel generation: aggregate decode tokens/s of one global batch
split over the ranks, against today's replicated mode and against DeepSpeed
ZeRO-3 and FSDP2 given a different prompt per rank, and the cost of the
ranks' lockstep when one rank's rows finish early; on CPU ranks, in one run,
on generate_bench.py's ~156M-parameter Llama-style model.

    python3 bench/train_peers.py --setup           # once: bench/.venv-peers
    python3 bench/train_peers.py --setup-fsdp2     # once: bench/.venv-fsdp2
    bench/.venv-peers/bin/python bench/dp_generate_bench.py
    bench/.venv-peers/bin/python bench/dp_generate_bench.py --global-batch 32 --peers zrun

One global batch of G random prompts of P tokens (generate_bench's seed), M
new tokens, greedy, one thread per rank everywhere. Rows:

  ort-kv          onnxruntime with a KV cache, one process, all G rows: the
                  oracle the tokens are checked against.
  zrun-*-dp       zcc --batch G/N: each of N ranks generates its own G/N
                  rows (docs/generation.md section 8).
  zrun-*-repl     zcc --batch G, the prompt file every rank's G rows: each
                  rank computes the whole batch, as zrun did before data-
                  parallel generation (and as a ZeRO-3 user's ranks do when
                  they all get the same prompts); G tokens a step are useful.
  deepspeed-dp    DeepSpeed ZeRO-3 (DS_ACCELERATOR=cpu, gloo),
                  engine.module.generate on each rank's own G/N rows.
  fsdp2-dp        FSDP2 (fully_shard per layer and root), the same.
  zrun-lockstep   zrun streamed, data parallel at N = 2, with rank 0's rows
                  all one prompt and an EOS that row emits early and rank 1's
                  rows never: rank 0 keeps decoding for rank 1's rows, and
                  zrun's summary says how many agreements it took, what each
                  cost and how many decode runs rank 0 made after its rows
                  finished.

resident: no memory budget (every group gathered once per generation);
streamed: generate_bench's budget (shards + KV cache + 40% of the model +
64 MiB), so decode gathers most groups every token and the ranks agree.
Aggregate decode tokens/s = tokens decoded by every row of every rank /
the slowest rank's decode time (zrun's summary; the peers' worker timings).
Exits 1 when a row fails or its tokens differ from the oracle's.
"""

import argparse
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True
BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)
import generate_bench  # noqa: E402  (the model, onnxruntime and the peers' workers)
import train_peers  # noqa: E402

REPO_ROOT = train_peers.REPO_ROOT
LLAMA = generate_bench.LLAMA
MiB = 1 << 20


def kv_cache_bytes(rows, args):
    head_dim = LLAMA["hidden_size"] // LLAMA["num_attention_heads"]
    return (2 * LLAMA["num_hidden_layers"] * rows * LLAMA["num_key_value_heads"]
            * (args.prompt_len + args.new_tokens) * head_dim * 4)


def streamed_budget(args, manifest, world, rows):
    params = manifest["parameter_bytes"]
    return int(params / world + kv_cache_bytes(rows, args) + 0.4 * params + 64 * MiB)


def ort_oracle(prompt, args):
    """Greedy tokens of every row (onnxruntime, KV cache, one process)."""
    runner = generate_bench.KvCacheRunner(os.path.join(generate_bench.MODEL_DIR, "kv.onnx"))
    tokens, _, ttft, decode = generate_bench.greedy_loop(runner.step, prompt, args.new_tokens)
    return {"tokens": tokens, "ttft": ttft, "decode": decode}


def with_eos(tokens, eos):
    """`tokens` as a generation stopping at `eos` writes them."""
    out = tokens.copy()
    for row in out:
        hits = (row == eos).nonzero()[0]
        if hits.size:
            row[hits[0] + 1:] = eos
    return out


def run_zrun(args, manifest, tag, world, rows_per_rank, prompt, budget=None, eos=None):
    """zcc then mpirun zrun generate; returns (row, error)."""
    import numpy as np
    plan = os.path.join(args.work_dir, f"{tag}.zplan")
    compile_cmd = [args.zcc, os.path.join(generate_bench.MODEL_DIR, "plain.onnx"),
                   "--mode=generate", f"--batch={rows_per_rank}",
                   f"--max-seq-len={args.prompt_len + args.new_tokens}",
                   f"--prompt-len={args.prompt_len}", f"--world-size={world}",
                   "--hardware=cpu", "--dump=report", "-o", plan]
    if budget:
        compile_cmd.append(f"--memory-budget={budget}")
    done = subprocess.run(compile_cmd, capture_output=True, text=True, timeout=args.timeout)
    with open(plan + ".zcc.log", "w") as handle:
        handle.write(" ".join(compile_cmd) + "\n" + done.stdout + done.stderr)
    if done.returncode != 0:
        return None, f"zcc: {done.stderr.strip()[:300]}"
    report = [line.strip() for line in done.stdout.splitlines() if "lockstep" in line]
    prompt_path = os.path.join(args.work_dir, f"{tag}.prompt.npy")
    np.save(prompt_path, prompt)
    tokens_path = os.path.join(args.work_dir, f"{tag}.tokens.npy")
    if os.path.exists(tokens_path):
        os.remove(tokens_path)
    command = ["mpirun", "-np", str(world), "--oversubscribe", "--bind-to", "none",
               args.zrun, plan, "generate", "--prompt", prompt_path,
               "--max-new-tokens", str(args.new_tokens), "--output", tokens_path, "--stats"]
    if eos is not None:
        command += ["--eos", str(eos)]
    if os.geteuid() == 0:
        command.insert(1, "--allow-run-as-root")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env,
                              timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return None, f"zrun timed out after {args.timeout} s"
    output = done.stdout + done.stderr
    with open(os.path.join(args.work_dir, f"{tag}.log"), "w") as handle:
        handle.write(" ".join(command) + "\n" + output)
    if done.returncode != 0 or not os.path.exists(tokens_path):
        return None, f"zrun exit status {done.returncode}: {output.strip()[-400:]}"
    decode = re.search(r"zrun: decode ([\d,]+) tokens in ([\d.]+) s", output)
    ttft = re.search(r"time to first token ([\d.]+) s", output)
    lockstep = re.search(r"zrun: (lockstep: .*)", output)
    gathered = re.search(r"gathered per decode step: ([\d,]+) B", output)
    return {"tokens": np.load(tokens_path), "decode": float(decode.group(2)),
            "decoded": int(decode.group(1).replace(",", "")),
            "ttft": float(ttft.group(1)) if ttft else None,
            "lockstep": lockstep.group(1) if lockstep else "",
            "gathered": int(gathered.group(1).replace(",", "")) if gathered else None,
            "report": report}, None


def run_peer(args, name, world, prompt, rows_per_rank, port):
    import numpy as np
    np.save(os.path.join(args.work_dir, f"{name}-dp.prompt.npy"), prompt)
    row, error = generate_bench.run_peer(args, name, world, port,
                                         prompt_file=f"{name}-dp.prompt.npy",
                                         rows_per_rank=rows_per_rank, tag=f"{name}-dp")
    if error:
        return None, error
    row["decoded"] = prompt.shape[0] * (args.new_tokens - 1)
    return row, None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--global-batch", type=int, default=16,
                        help="G: rows of the global batch (a multiple of every N)")
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--peers", default="deepspeed,fsdp2,zrun")
    parser.add_argument("--zcc", default=os.path.join(REPO_ROOT, "build", "bin", "zcc"))
    parser.add_argument("--zrun", default=os.path.join(REPO_ROOT, "build", "bin", "zrun"))
    parser.add_argument("--deepspeed-python", default=generate_bench.DEEPSPEED_PYTHON
                        if os.path.exists(generate_bench.DEEPSPEED_PYTHON) else sys.executable)
    parser.add_argument("--fsdp2-python", default=generate_bench.FSDP2_PYTHON
                        if os.path.exists(generate_bench.FSDP2_PYTHON) else sys.executable)
    parser.add_argument("--work-dir", default=os.path.join(REPO_ROOT, "build", "dp-generate-bench"))
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()
    args.peers = args.peers.split(",")
    os.makedirs(args.work_dir, exist_ok=True)
    import numpy as np

    for line in generate_bench.environment(argparse.Namespace(
            peers=args.peers, deepspeed_python=args.deepspeed_python,
            fsdp2_python=args.fsdp2_python, zcc=args.zcc, zrun=args.zrun)):
        print(line)
    manifest = generate_bench.ensure_model()
    G, world = args.global_batch, 2
    if G % world:
        print(f"dp_generate_bench: error: --global-batch {G} is not a multiple of {world}",
              file=sys.stderr)
        return 1
    prompt = np.random.default_rng(generate_bench.PROMPT_SEED).integers(
        1, LLAMA["vocab_size"], size=(G, args.prompt_len), dtype=np.int64)
    print(f"# model: {manifest['parameters']:,} parameters; global batch G={G} x "
          f"P={args.prompt_len}, M={args.new_tokens} new tokens, greedy, one thread per rank",
          flush=True)

    print("# running ort-kv (oracle) ...", file=sys.stderr, flush=True)
    oracle = ort_oracle(prompt, args)
    rows, failures = {}, []

    def record(name, row, error, expected=None):
        if error:
            failures.append(f"{name}: {error}")
            print(f"# {name} failed: {error}", flush=True)
            return
        want = oracle["tokens"] if expected is None else expected
        got = row["tokens"]
        row["check"] = "same" if got.shape == want.shape and (got == want).all() else (
            f"DIFF in {int((got != want).sum()) if got.shape == want.shape else 'shape'}")
        if row["check"] != "same":
            failures.append(f"{name}: tokens {row['check']}")
        row["rate"] = row["decoded"] / row["decode"] if row.get("decode") else None
        rows[name] = row
        print(f"# {name}: {row['rate']:.2f} aggregate decode tok/s, tokens {row['check']}",
              flush=True)

    port = 29700 + os.getpid() % 200
    if "zrun" in args.peers:
        budget = streamed_budget(args, manifest, world, G // world)
        budget_repl = streamed_budget(args, manifest, world, G)
        runs = [("zrun-resident-dp N=1", 1, G, prompt, None),
                ("zrun-resident-repl N=2", world, G, np.tile(prompt, (world, 1)), None),
                ("zrun-resident-dp N=2", world, G // world, prompt, None),
                ("zrun-streamed-repl N=2", world, G, np.tile(prompt, (world, 1)), budget_repl),
                ("zrun-streamed-dp N=2", world, G // world, prompt, budget)]
        for name, n, per_rank, rank_prompts, row_budget in runs:
            print(f"# running {name} ...", file=sys.stderr, flush=True)
            row, error = run_zrun(args, manifest, name.replace(" ", "-").replace("=", ""),
                                  n, per_rank, rank_prompts, row_budget)
            if row and "repl" in name:
                # Every rank computed the same G rows: G of them are useful.
                block = row["tokens"][:G]
                if not all((row["tokens"][k * G:(k + 1) * G] == block).all()
                           for k in range(n)):
                    error = "ranks generated different tokens for the same rows"
                row["tokens"], row["decoded"] = block, row["decoded"] // n
            record(name, row, error)
    for peer in ("deepspeed", "fsdp2"):
        if peer in args.peers:
            print(f"# running {peer} data parallel N={world} ...", file=sys.stderr, flush=True)
            port += 1
            row, error = run_peer(args, peer, world, prompt, G // world, port)
            record(f"{peer}-dp N={world}", row, error)

    lockstep = None
    if "zrun" in args.peers:
        # Rank 0's rows: one prompt, which stops at an EOS it emits early;
        # rank 1's rows: the batch's own, none of which emits it.
        half = G // world
        early = prompt.copy()
        early[:half] = prompt[0]
        tokens = ort_oracle(early, args)["tokens"]
        late = set(tokens[half:].ravel().tolist())
        eos = next((int(t) for t in tokens[0, 1:8] if int(t) not in late), None)
        if eos is None:
            failures.append("zrun-lockstep: no token of row 0's first 8 is absent from "
                            "rank 1's rows")
        else:
            print("# running zrun-lockstep ...", file=sys.stderr, flush=True)
            row, error = run_zrun(args, manifest, "zrun-lockstep", world, half, early,
                                  streamed_budget(args, manifest, world, half), eos)
            if row:
                # Rank 0's rows stop after their EOS; rank 1's run to M.
                finished = int((tokens[0] == eos).nonzero()[0][0]) + 1
                row["decoded"] = (half * (finished - 1) + half * (args.new_tokens - 1))
            record("zrun-lockstep N=2", row, error, with_eos(tokens, eos) if row else None)
            lockstep = (eos, finished, rows.get("zrun-lockstep N=2"))

    print()
    print(f"aggregate decode tokens/s of the global batch (G={G} rows x {args.new_tokens - 1} "
          f"decode tokens / the slowest rank's decode time)")
    print(f"{'row':<24} {'TTFT':>8} {'decode tok/s':>13} {'gathered/step':>14}  tokens vs ort-kv")
    for name, row in rows.items():
        ttft = f"{row['ttft']:.2f} s" if row.get("ttft") else "n/a"
        gathered = f"{row['gathered'] / MiB:.1f} MiB" if row.get("gathered") is not None \
            else "n/a"
        print(f"{name:<24} {ttft:>8} {row['rate']:>13.2f} {gathered:>14}  {row['check']}")
    print()

    def ratio(a, b):
        if a in rows and b in rows and rows[a]["rate"] and rows[b]["rate"]:
            return rows[a]["rate"] / rows[b]["rate"]
        return None

    for a, b, what in (
            ("zrun-resident-dp N=2", "zrun-resident-repl N=2",
             "data parallel / replicated, resident, N=2 (goal >= 1.8)"),
            ("zrun-streamed-dp N=2", "zrun-streamed-repl N=2",
             "data parallel / replicated, streamed, N=2 (goal >= 1.8)"),
            ("zrun-resident-dp N=2", "zrun-resident-dp N=1", "resident, N=2 / N=1"),
            ("zrun-resident-dp N=2", "deepspeed-dp N=2", "zrun resident / DeepSpeed ZeRO-3"),
            ("zrun-streamed-dp N=2", "deepspeed-dp N=2", "zrun streamed / DeepSpeed ZeRO-3"),
            ("zrun-resident-dp N=2", "fsdp2-dp N=2", "zrun resident / FSDP2"),
            ("zrun-streamed-dp N=2", "fsdp2-dp N=2", "zrun streamed / FSDP2")):
        value = ratio(a, b)
        if value is not None:
            print(f"  {what}: {value:.2f}x")
    for name in ("zrun-streamed-dp N=2", "zrun-lockstep N=2", "zrun-resident-dp N=2"):
        if name in rows and rows[name].get("lockstep"):
            print(f"  {name}: {rows[name]['lockstep']}")
            for line in rows[name].get("report", []):
                print(f"    zcc report: {line}")
    if lockstep and lockstep[2]:
        eos, finished, row = lockstep
        print(f"  lockstep run: EOS {eos}; rank 0's rows finished after {finished} of "
              f"{args.new_tokens} tokens, rank 1's ran to {args.new_tokens}")
    for failure in failures:
        print(f"dp_generate_bench: error: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
