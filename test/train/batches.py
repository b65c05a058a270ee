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

Rows (a 2-D .npy --data, runtime/train/RowSampler.h) are read in epochs of
E = R // G optimizer steps, G = K*N*B rows each (the R - E*G rows left at the
end of an epoch's order are dropped): global row q of step s is file row
order_e[p*G + q] with e, p = divmod(s, E), split over micro-steps and ranks as
above. order_e is range(R), or with --shuffle a Fisher-Yates permutation from
the end:

    key = splitmix64(seed ^ (0x9E3779B97F4A7C15 * (e + 1)))
    for i = R-1 down to 1: j = splitmix64(key + i) % (i + 1); swap order[i], order[j]
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


def epoch_order(seed, epoch, num_rows, shuffle):
    """The file rows of epoch `epoch` (0-based) in reading order."""
    order = list(range(num_rows))
    if shuffle:
        key = splitmix64((seed ^ (GOLDEN_GAMMA * (epoch + 1))) & MASK64)
        for i in range(num_rows - 1, 0, -1):
            j = splitmix64((key + i) & MASK64) % (i + 1)
            order[i], order[j] = order[j], order[i]
    return order


def step_rows(seed, shuffle, step, num_rows, global_rows):
    """The file rows of global rows q = 0 .. global_rows-1 of optimizer step
    `step` (0-based) of a row file of `num_rows` rows."""
    per_epoch = num_rows // global_rows
    if per_epoch == 0:
        raise ValueError(f"{num_rows} rows cannot fill a step of {global_rows}")
    epoch, position = divmod(step, per_epoch)
    order = epoch_order(seed, epoch, num_rows, shuffle)
    return order[position * global_rows:(position + 1) * global_rows]


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
    # Row files (RowSampler.h): the orders the C++ unit test also expects
    # (test/unit/TrainDataTest.cpp), and every epoch a permutation.
    assert epoch_order(5, 0, 10, True) == [7, 0, 9, 3, 2, 1, 6, 5, 8, 4]
    assert epoch_order(5, 1, 10, True) == [7, 8, 0, 4, 9, 2, 3, 5, 1, 6]
    assert epoch_order(7, 3, 6, True) == [2, 4, 5, 1, 0, 3]
    assert epoch_order(5, 0, 10, False) == list(range(10))
    for epoch in range(4):
        assert sorted(epoch_order(11, epoch, 37, True)) == list(range(37))
    # 10 rows, 4 a step: 2 steps an epoch, rows 8 and 9 (of the order) dropped.
    assert [step_rows(0, False, s, 10, 4) for s in range(3)] == [
        [0, 1, 2, 3], [4, 5, 6, 7], [0, 1, 2, 3]]
    assert step_rows(5, True, 3, 10, 4) == [9, 2, 3, 5]
