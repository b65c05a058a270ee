"""Writes a batch of right-padded prompts for the generation tests.

prompts.npy int64 [B, Pmax] (ids drawn from a seeded generator in [3, 256),
padding 0) and lengths.npy int64 [B]; `--lengths 6,4,2` gives B and each
row's length, Pmax is the longest; `--int32` writes both as int32 (zrun
accepts that too). `--ranks N` writes the global batch of N ranks that each
generate len(lengths) rows (docs/generation.md section 8): N blocks of the
same lengths, the first exactly the rows a single block would hold, block k
drawn with seed + k, so that every rank's rows differ.
"""
import argparse

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", required=True, help="comma-separated row lengths")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--int32", action="store_true")
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--prompts", required=True)
    parser.add_argument("--prompt-lengths", required=True)
    args = parser.parse_args()
    block = np.array([int(v) for v in args.lengths.split(",")], dtype=np.int64)
    blocks = []
    for k in range(args.ranks):
        rng = np.random.default_rng(args.seed + k)
        blocks.append(rng.integers(3, args.vocab, size=(len(block), int(block.max())),
                                   dtype=np.int64))
    prompts = np.concatenate(blocks)
    lengths = np.tile(block, args.ranks)
    for row, length in enumerate(lengths):
        prompts[row, length:] = 0
    dtype = np.int32 if args.int32 else np.int64
    np.save(args.prompts, prompts.astype(dtype))
    np.save(args.prompt_lengths, lengths.astype(dtype))


if __name__ == "__main__":
    main()
