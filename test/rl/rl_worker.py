"""One mpirun of check_rl.py: every rank runs the cases of CASES.json.

A case is one of:
  logprobs  open PLAN (zcc --mode logprobs), score this rank's rows of the
            golden's input_ids, gather every rank's [N*B, T] log-probs and
            entropies; rank 0 writes OUT.npz (logprobs, entropy).
  step      open PLAN (an SGD plan with an RL loss) with lr LR, no momentum
            or weight decay, grad_accum K; run K micro-steps, micro-step k
            of rank r on global rows [(k*N + r)*B, (k*N + r + 1)*B) (zrun
            train's order), with the case's inputs; check the optimizer
            stepped; save a checkpoint to DIR; rank 0 writes OUT.npz (the
            window's loss, each micro-step's loss).
  window    a policy step plan and a reference logprobs plan open together:
            inside the accumulation window of the policy (between its
            micro-steps) the reference scores rows; its log-probs must be
            the same bits before and after the policy's optimizer step,
            and the reference runs with check=True (zrun --check: shard
            checksums verified). Rank 0 writes OUT.npz.
"""
import json
import sys

import numpy as np
import zplan

RL_INPUTS = ("completion_mask", "advantages", "old_logprobs", "ref_logprobs")


def my_rows(array, first, count):
    return np.ascontiguousarray(array[first:first + count])


def run_logprobs(case, golden, rank, world):
    with zplan.Session(case["plan"]) as session:
        ids = golden["input_ids"]
        rows = ids.shape[0] // world
        mine = my_rows(ids, rank * rows, rows)
        logp, entropy = session.logprobs(mine, entropy=True)
        masked = session.logprobs(mine, mask=golden["completion_mask"][rank * rows:(rank + 1) * rows])
        all_logp = zplan.gather_rows(logp)
        all_entropy = zplan.gather_rows(entropy)
        all_masked = zplan.gather_rows(masked)
    if rank == 0:
        np.savez(case["out"], logprobs=all_logp, entropy=all_entropy, masked=all_masked)


def step_inputs(case, golden):
    """The global inputs of the case: input_ids and the RL arrays, by name."""
    if case["kind"] == "dpo":
        pairs = golden["dpo_chosen_ids"].shape[0]
        return pairs, {
            "chosen": {"input_ids": golden["dpo_chosen_ids"],
                       "completion_mask": golden["dpo_chosen_mask"],
                       "ref_logprobs": golden["dpo_ref_chosen_logprobs"]},
            "rejected": {"input_ids": golden["dpo_rejected_ids"],
                         "completion_mask": golden["dpo_rejected_mask"],
                         "ref_logprobs": golden["dpo_ref_rejected_logprobs"]},
        }
    inputs = {"input_ids": golden["input_ids"],
              "completion_mask": golden["completion_mask"]}
    advantages = golden["advantages_token" if case["advantages"] == "token" else "advantages"]
    if case.get("zero_advantages"):
        advantages = np.zeros_like(advantages)
    inputs["advantages"] = advantages
    if case["old"]:
        inputs["old_logprobs"] = golden["old_logprobs"]
    if case["beta"] != 0:
        inputs["ref_logprobs"] = golden["ref_logprobs"]
    return inputs["input_ids"].shape[0], inputs


def micro_batch(case, inputs, first, count):
    """This micro-step's keyword arguments: rows [first, first+count) of
    every input; DPO: those pairs' chosen rows, then their rejected rows."""
    if case["kind"] == "dpo":
        return {name: np.concatenate([my_rows(inputs["chosen"][name], first, count),
                                      my_rows(inputs["rejected"][name], first, count)])
                for name in inputs["chosen"]}
    return {name: my_rows(array, first, count) for name, array in inputs.items()}


def run_step(case, golden, rank, world):
    k = case["grad_accum"]
    rows, inputs = step_inputs(case, golden)
    per_step = rows // (k * world)
    losses = []
    with zplan.Session(case["plan"], lr=case["lr"], grad_accum=k, weight_decay=0.0) as session:
        for micro in range(k):
            first = (micro * world + rank) * per_step
            batch = micro_batch(case, inputs, first, per_step)
            ids = batch.pop("input_ids")
            losses.append(session.train_step(ids, **batch))
        step = session.last_step
        if step is None:
            raise SystemExit(f"case {case['name']}: no optimizer step after {k} micro-steps")
        session.save(case["checkpoint"])
    if rank == 0:
        np.savez(case["out"], loss=np.float64(step["loss"]), micro_losses=np.array(losses))


def run_window(case, golden, rank, world):
    k = case["grad_accum"]
    rows, inputs = step_inputs(case, golden)
    per_step = rows // (k * world)
    ids = golden["input_ids"]
    ref_rows = ids.shape[0] // world
    scored = my_rows(ids, rank * ref_rows, ref_rows)
    with zplan.Session(case["plan"], lr=case["lr"], grad_accum=k, weight_decay=0.0) as policy, \
            zplan.Session(case["ref_plan"], check=True) as reference:
        before = reference.logprobs(scored)
        probe = my_rows(ids, 0, per_step)
        policy_before = policy.logprobs(probe)
        during = []
        for micro in range(k):
            first = (micro * world + rank) * per_step
            batch = micro_batch(case, inputs, first, per_step)
            policy.train_step(batch.pop("input_ids"), **batch)
            # Inside the window (and once after the optimizer step).
            during.append(reference.logprobs(scored))
        same = all(np.array_equal(before, d) for d in during)
        moved = not np.array_equal(policy_before, policy.logprobs(probe))
        flags = zplan.gather_rows(np.array([[int(same), int(moved)]]))
    if rank == 0:
        np.savez(case["out"], reference_unchanged=bool(flags[:, 0].all()),
                 policy_moved=bool(flags[:, 1].all()))


def main():
    cases = json.load(open(sys.argv[1]))
    golden = dict(np.load(cases["golden"], allow_pickle=False))
    rank, world = zplan.rank(), zplan.world_size()
    for case in cases["cases"]:
        if case["kind"] == "logprobs":
            run_logprobs(case, golden, rank, world)
        elif case["kind"] == "window":
            run_window(case, golden, rank, world)
        else:
            run_step(case, golden, rank, world)


if __name__ == "__main__":
    main()
