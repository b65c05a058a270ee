"""Ranks whose requests differ finish apart without a hang.

Run under mpirun -np 2 on a plan whose decode gathers (lockstep,
docs/generation.md section 8). Each rank generates its own rows; rank 0
asks for 2 new tokens, rank 1 for 6, then rank 0 stops at an EOS and rank 1
has none. The ranks agree on their running rows at the same steps, so rank 0
keeps taking part in decode's gathers until rank 1's rows finish. Greedy
tokens are a row's own: rank 0's 2 tokens are the first 2 of the same rows
generated for 6.
"""
import sys

import numpy as np

import zplan


def main():
    session = zplan.Session(sys.argv[1])
    rank = session.rank
    rows = session.generation_shape["batch"]
    prompts = np.random.default_rng(rank).integers(3, 256, size=(rows, 5))
    full = session.generate(prompts, max_new_tokens=6)
    mine = session.generate(prompts, max_new_tokens=2 if rank == 0 else 6)
    assert (mine == full[:, :mine.shape[1]]).all(), (mine, full)
    eos = int(full[0, 1]) if rank == 0 else None
    stopped = session.generate(prompts, max_new_tokens=6, eos=eos)
    if rank == 0:
        assert stopped[0, 1] == eos and (stopped[0, 2:] == eos).all(), stopped
    else:
        assert (stopped == full).all(), (stopped, full)
    everyone = zplan.gather_rows(mine[:, :2])
    if rank == 0:
        print(f"ok {everyone.shape[0]} rows; rank 0 asked for 2 tokens, rank 1 for 6; "
              f"rank 0 stopped at EOS {eos}", flush=True)


if __name__ == "__main__":
    main()
