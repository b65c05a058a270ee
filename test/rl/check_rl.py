"""The RL objectives against torch and TRL (docs/rl.md).

The golden (scripts/rl_goldens.py; torch autograd in float64 of TRL 1.16's
GRPOTrainer/DPOTrainer formulas on the Hugging Face model whose weights the
ONNX file holds, cross-checked against TRL's own loss code) gives a global
batch of 8 rows (4 DPO pairs), per-token log-probs and entropies, and for
each loss configuration the loss and every parameter's gradient.

For each world size N in --worlds and K = 2 micro-steps (K = 1 too with
--also-k1), at --persistence-threshold 0 (every parameter sharded):

  logprobs  zcc --mode logprobs (rows 8 / N per rank); every rank scores its
            rows; gathered: |ours - golden| <= 1e-5 for the log-probs and the
            entropies; with mask=completion_mask, zero exactly where it is 0.
  losses    for each config: zcc --mode train --optimizer sgd --loss grpo
            (--loss-type, --beta, --epsilon, --epsilon-high, --old-logprobs,
            --use-bias-correction-kl as the config says) or --loss dpo, at
            rows 8 / (N K) per micro-step; one optimizer step of SGD (lr LR,
            no momentum, no weight decay) over the K micro-steps of N ranks;
            `zrun export` of the checkpoint gives p1, and (p0 - p1) / LR is
            the step's gradient. Checked: the window's loss within 1e-5
            relative of the golden (TRL's normalization over the global
            batch); every parameter's gradient within 1e-4 of the golden
            tensor's max |g| + 1e-6 of the largest (check_gradients.py's
            bound): whole tensors for dapo_clip_kl_token, 32 seeded entries
            and the largest of each tensor for the other configs (the golden
            stays small).
  zero      dapo_plain and grpo_plain with advantages 0 and beta 0: p1 == p0
            bit for bit.
  window    a grpo policy and a --mode logprobs reference open in one
            process: inside the policy's accumulation window the
            reference's log-probs stay the same bits and it runs with
            check=True (its shard checksums verified); the policy's change.

Prints one `ok` line per check; the first failure prints FAIL and exits 1.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

LOGPROBS_TOL = 1e-5
LOSS_RTOL = 1e-5
GRAD_RTOL = 1e-4
GRAD_FLOOR = 1e-6
LR = 100.0  # large, so that (p0 - p1) / LR keeps the gradient's digits in f32
HERE = pathlib.Path(__file__).resolve().parent


class Failure(Exception):
    pass


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise Failure(f"{' '.join(map(str, command))} exited {result.returncode}:\n"
                      f"{result.stdout[-2000:]}{result.stderr[-4000:]}")
    return result


def initializers(path):
    model = onnx.load_model(str(path))
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def zcc_flags(config):
    if config["kind"] == "dpo":
        return ["--loss", "dpo", "--beta", str(config["beta"])]
    flags = ["--loss", "grpo", "--loss-type", config["loss_type"],
             "--beta", str(config["beta"]), "--epsilon", str(config["epsilon"]),
             "--epsilon-high", str(config["epsilon_high"])]
    if config["old"]:
        flags.append("--old-logprobs")
    if not config["kl_bias_correction"]:
        flags.append("--use-bias-correction-kl=false")
    return flags


def configs_of(golden):
    out = []
    for name in [str(c) for c in golden["configs"]]:
        out.append({"name": name, "kind": "grpo",
                    "loss_type": str(golden[f"{name}:loss_type"]),
                    "beta": float(golden[f"{name}:beta"]),
                    "epsilon": float(golden[f"{name}:epsilon"]),
                    "epsilon_high": float(golden[f"{name}:epsilon_high"]),
                    "old": bool(golden[f"{name}:old"]),
                    "advantages": str(golden[f"{name}:advantages"]),
                    "kl_bias_correction": bool(golden[f"{name}:kl_bias_correction"])})
    out.append({"name": "dpo", "kind": "dpo", "beta": float(golden["dpo:beta"])})
    return out


def compile_plan(args, out, world, rows, length, mode, flags, extra_shapes=()):
    command = [args.zcc, args.model, "--mode", mode, "--world-size", str(world),
               "--persistence-threshold", "0", "--input-shape", f"input_ids={rows}x{length}",
               "-o", str(out)] + list(flags)
    for shape in extra_shapes:
        command += ["--input-shape", shape]
    run(command)


def golden_gradient(golden, name, param):
    """(flat indices or None for the whole tensor, golden values there, the
    tensor's max |g|): scripts/rl_goldens.py stores whole tensors for one
    config and seeded entries plus the largest for the others."""
    whole = golden.get(f"{name}:grad:{param}")
    if whole is not None:
        whole = whole.astype(np.float64)
        return None, whole.reshape(-1), float(np.abs(whole).max())
    return (golden[f"{name}:gradidx:{param}"],
            golden[f"{name}:gradval:{param}"].astype(np.float64),
            float(golden[f"{name}:gradmax:{param}"]))


def check_gradient(label, golden, name, p0, p1):
    """Every parameter's step gradient (p0 - p1) / LR against the golden, at
    every stored entry, within GRAD_RTOL of the tensor's max |g| + GRAD_FLOOR
    of the largest; returns the worst ratio to the bound and its parameter."""
    params = [str(p) for p in golden["param_names"]]
    grads = {p: golden_gradient(golden, name, p) for p in params}
    largest = max(scale for _, _, scale in grads.values())
    worst = (0.0, None)
    for param in params:
        index, ref, scale = grads[param]
        ours = ((p0[param].astype(np.float64) - p1[param].astype(np.float64)) / LR).reshape(-1)
        if index is not None:
            ours = ours[index]
        bound = GRAD_RTOL * scale + GRAD_FLOOR * largest
        error = float(np.abs(ours - ref).max())
        if error > bound:
            raise Failure(f"{label}: gradient of {param}: max |ours - torch| {error:.3g} > "
                          f"bound {bound:.3g} (max |torch| {scale:.3g})")
        ratio = error / bound if bound else 0.0
        if ratio >= worst[0]:
            worst = (ratio, param)
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--golden", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--zcc", default="zcc")
    ap.add_argument("--zrun", default="zrun")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--worlds", default="1,2")
    ap.add_argument("--also-k1", action="store_true")
    args = ap.parse_args()
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    golden = dict(np.load(args.golden, allow_pickle=False))
    rows, length = golden["input_ids"].shape
    p0 = initializers(args.model)
    configs = configs_of(golden)
    try:
        for world in [int(w) for w in args.worlds.split(",")]:
            for k in ([1, 2] if args.also_k1 else [2]):
                check_world(args, work / f"n{world}k{k}", golden, configs, p0, world, k,
                            rows, length)
    except Failure as failure:
        print(f"FAIL {failure}")
        return 1
    return 0


def check_world(args, work, golden, configs, p0, world, k, rows, length):
    work.mkdir(parents=True, exist_ok=True)
    cases = []
    ref_plan = work / "ref.zplan"
    compile_plan(args, ref_plan, world, rows // world, length, "logprobs", [])
    cases.append({"kind": "logprobs", "name": "logprobs", "plan": str(ref_plan),
                  "out": str(work / "logprobs.npz")})
    per_step = rows // (world * k)
    step_cases = []
    for config in configs:
        case = dict(config)
        plan = work / f"{config['name']}.zplan"
        if config["kind"] == "dpo":
            pairs = golden["dpo_chosen_ids"].shape[0] // (world * k)
            compile_plan(args, plan, world, 2 * pairs, length, "train",
                         ["--optimizer", "sgd"] + zcc_flags(config))
        else:
            shapes = []
            if config["advantages"] == "token":
                shapes.append(f"advantages={per_step}x{length}")
            compile_plan(args, plan, world, per_step, length, "train",
                         ["--optimizer", "sgd"] + zcc_flags(config), shapes)
        case.update(plan=str(plan), grad_accum=k, lr=LR,
                    checkpoint=str(work / f"{config['name']}.ckpt"),
                    out=str(work / f"{config['name']}.npz"))
        step_cases.append(case)
    for name in ("grpo_plain", "dapo_plain"):
        base = next(c for c in step_cases if c["name"] == name)
        case = dict(base, name=f"{name}_zero", zero_advantages=True,
                    checkpoint=str(work / f"{name}_zero.ckpt"),
                    out=str(work / f"{name}_zero.npz"))
        step_cases.append(case)
    window = dict(next(c for c in step_cases if c["name"] == "grpo_clip_kl"),
                  kind="window", name="window", ref_plan=str(ref_plan),
                  out=str(work / "window.npz"))
    cases += step_cases + [window]
    # The worker tells a step case's loss by its "kind" (grpo, dpo).
    spec = work / "cases.json"
    spec.write_text(json.dumps({"golden": str(pathlib.Path(args.golden).resolve()),
                                "cases": cases}))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    run(["mpirun", "-np", str(world), "--oversubscribe", "--allow-run-as-root",
         args.python, str(HERE / "rl_worker.py"), str(spec)], env=env)
    label = f"N={world} K={k}"

    got = np.load(work / "logprobs.npz")
    for name in ("logprobs", "entropy"):
        error = float(np.abs(got[name] - golden[name]).max())
        if error > LOGPROBS_TOL:
            raise Failure(f"{label}: {name}: max |ours - torch| {error:.3g} > {LOGPROBS_TOL}")
        print(f"ok {label} {name}: max |ours - torch| {error:.2g}")
    masked = got["masked"]
    zero = golden["completion_mask"] == 0
    if not (np.all(masked[zero] == 0) and np.array_equal(masked[~zero], got["logprobs"][~zero])):
        raise Failure(f"{label}: logprobs(mask=completion_mask) is not the log-probs zeroed "
                      "where the mask is 0")
    print(f"ok {label} logprobs(mask=...): zero exactly where the mask is 0")

    for case in step_cases:
        exported = work / f"{case['name']}.onnx"
        run([args.zrun, case["plan"], "export", "--checkpoint", case["checkpoint"],
             "-o", str(exported), "--model", args.model])
        p1 = initializers(exported)
        result = np.load(case["out"])
        name = case["name"]
        if case.get("zero_advantages"):
            moved = [p for p in p0 if p in p1 and not np.array_equal(p0[p], p1[p])]
            if moved:
                raise Failure(f"{label}: {name}: advantages 0 and beta 0 moved {moved[:3]}")
            print(f"ok {label} {name}: advantages 0, beta 0: every parameter unchanged "
                  "bit for bit")
            continue
        loss = float(result["loss"])
        expected = float(golden[f"{name}:loss"])
        if abs(loss - expected) > LOSS_RTOL * max(abs(expected), 1e-3):
            raise Failure(f"{label}: {name}: loss {loss!r}, torch {expected!r}")
        ratio, worst = check_gradient(f"{label}: {name}", golden, name, p0, p1)
        print(f"ok {label} {name}: loss {loss:.6f} (torch {expected:.6f}); "
              f"worst gradient {worst} at {ratio:.2f} of the bound")

    window = np.load(work / "window.npz")
    if not bool(window["reference_unchanged"]):
        raise Failure(f"{label}: the reference's log-probs changed inside the policy's "
                      "accumulation window")
    if not bool(window["policy_moved"]):
        raise Failure(f"{label}: the policy's log-probs did not change after its step "
                      "(the window check would prove nothing)")
    print(f"ok {label} window: reference unchanged (check=True) while the policy stepped")


if __name__ == "__main__":
    sys.exit(main())
