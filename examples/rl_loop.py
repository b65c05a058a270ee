"""An RL-style loop on one plan: generate, score with a toy reward, train on the best.

Rejection-sampling fine-tuning in miniature, data parallel as TRL runs it:
each iteration every rank samples completions of its own prompts, rewards a
row by the share of its new tokens that are even ids (a stand-in for a real
reward model), and trains one micro-step on its own best rows, so each rank
trains on the completions it generated itself. The plan holds both modes
(docs/one-plan.md), so the weights generate() reads are the ones train_step
just updated, with no copy and no reload:

    zcc test/models/gpt2-opset17.onnx --mode train,generate --input-shape input_ids=2x16 \\
        --batch 8 --prompt-len 6 --max-seq-len 16 --world-size 2 -o rl.zplan
    PYTHONPATH=build/python mpirun -np 2 python3 examples/rl_loop.py rl.zplan --iterations 20
"""
import argparse

import numpy as np

import zplan

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("plan")
parser.add_argument("--iterations", type=int, default=20)
args = parser.parse_args()

session = zplan.Session(args.plan, lr=1e-3)
rows, row_tokens = session.train_input_shape  # this rank's micro-batch [B, T]
shape = session.generation_shape  # batch, prompt_len, max_seq_len, vocabulary
new_tokens = row_tokens - shape["prompt_len"]  # prompt + completion = one training row
rng = np.random.default_rng(session.rank)  # each rank its own prompts
for iteration in range(args.iterations):
    prompts = rng.integers(3, shape["vocabulary"], size=(shape["batch"], shape["prompt_len"]))
    completions = session.generate(prompts, max_new_tokens=new_tokens, temperature=1.0,
                                   top_k=50, seed=iteration)
    reward = (completions % 2 == 0).mean(axis=1)
    best = np.argsort(-reward, kind="stable")[:rows]  # this rank's best rows
    loss = session.train_step(np.concatenate([prompts, completions], axis=1)[best])
    # The rewards of every rank, for the log (one small all-gather).
    rewards = zplan.gather_rows(np.stack([reward, np.isin(np.arange(len(reward)), best)], 1))
    if session.rank == 0:
        trained = rewards[rewards[:, 1] > 0, 0]
        print(f"iteration {iteration + 1}: mean reward {rewards[:, 0].mean():.3f}, "
              f"trained on {trained.mean():.3f}, loss {loss:.4f}, "
              f"{session.memory['current_bytes']} B held", flush=True)
