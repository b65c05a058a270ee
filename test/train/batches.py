"""The batch selection of `zrun PLAN train` (runtime/train/BatchSampler.h), re-implemented in Python.

The oracle side of the training tests uses this one helper: the golden curves
made by scripts/export_fixtures.py --train-goldens read their rows through it,
and check_training.py checks the golden's stored offsets against it. Standard
library only.

splitmix64(x) is one output of Vigna's splitmix64 generator whose state was x
(Java's SplittableRandom uses the same mix): all arithmetic modulo 2**64,

    z = x + 0x9E3779B97F4A7C15
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB
    return z ^ (z >> 31)

so splitmix64(0) == 0xE220A8397B1DCDAF (the generator's first output from state
0). Row q (0 .. K*N*B-1) of optimizer step s (0-based) starts at token

    splitmix64(splitmix64(seed ^ (0x9E3779B97F4A7C15 * (s + 1))) + q) % (num_tokens - T)

(the multiplication first, as in C; every intermediate modulo 2**64) and holds
tokens[off : off + T]. Micro-step k on rank r takes rows
[(k*N + r)*B, (k*N + r + 1)*B).
"""

MASK64 = (1 << 64) - 1
GOLDEN_GAMMA = 0x9E3779B97F4A7C15


def splitmix64(x):
    z = (x + GOLDEN_GAMMA) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def row_offset(seed, step, row, num_tokens, seq_len):
    """Token offset of row `row` of optimizer step `step` (both 0-based)."""
    if num_tokens <= seq_len:
        raise ValueError(f"{num_tokens} tokens cannot hold a row of {seq_len}")
    base = splitmix64((seed ^ (GOLDEN_GAMMA * (step + 1))) & MASK64)
    return splitmix64((base + row) & MASK64) % (num_tokens - seq_len)


def step_offsets(seed, step, rows, num_tokens, seq_len):
    """Offsets of rows 0 .. rows-1 of one optimizer step."""
    return [row_offset(seed, step, q, num_tokens, seq_len) for q in range(rows)]


def micro_batch_rows(micro, rank, world, batch):
    """Row numbers q that micro-step `micro` on rank `rank` reads."""
    first = (micro * world + rank) * batch
    return list(range(first, first + batch))


def self_test():
    """Known answers of the generator; raises AssertionError on a mismatch."""
    # Vigna's splitmix64.c seeded with 0: the first three outputs.
    assert splitmix64(0) == 0xE220A8397B1DCDAF, hex(splitmix64(0))
    assert splitmix64(GOLDEN_GAMMA) == 0x6E789E6AA1B965F4, hex(splitmix64(GOLDEN_GAMMA))
    assert splitmix64((2 * GOLDEN_GAMMA) & MASK64) == 0x06C45D188009454F
    # Every (micro, rank) of K x N micro-batches of B rows covers 0..K*N*B-1 once.
    for k_steps, world, batch in ((1, 1, 4), (2, 2, 1), (1, 4, 1), (4, 1, 1), (2, 1, 2)):
        rows = [q for k in range(k_steps) for r in range(world)
                for q in micro_batch_rows(k, r, world, batch)]
        assert rows == list(range(k_steps * world * batch)), rows
