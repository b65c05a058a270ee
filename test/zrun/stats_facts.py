"""Compares the --stats lines of one plan run at two world sizes.

    stats_facts.py STATS_N1.txt STATS_N2.txt

Each file holds zrun's --stats output (`zrun: rank R: peak RSS X B, arena Y
B, shards Z B, persistent P B`). Prints, as exact fractions, each N=2 rank's
shard and persistent bytes over rank 0's at N=1, and whether each rank's
peak RSS covers the memory it reports holding.
"""
import fractions
import re
import sys

LINE = re.compile(r"^zrun: rank (\d+): peak RSS (\d+) B, arena (\d+) B, "
                  r"shards (\d+) B, persistent (\d+) B$")


def read_stats(path):
    ranks = {}
    with open(path) as file:
        for line in file:
            match = LINE.match(line.rstrip("\n"))
            if match:
                rank, rss, arena, shards, persistent = map(int, match.groups())
                ranks[rank] = dict(rss=rss, arena=arena, shards=shards,
                                   persistent=persistent)
    return ranks


def main():
    one, two = read_stats(sys.argv[1]), read_stats(sys.argv[2])
    print(f"ranks: {sorted(one)} at N=1, {sorted(two)} at N=2")
    for field in ("shards", "persistent"):
        ratios = ", ".join(
            f"{fractions.Fraction(two[rank][field], one[0][field])} on rank "
            f"{rank}" for rank in sorted(two))
        print(f"{field} ratio (N=2 / N=1): {ratios}")
    for label, ranks in (("N=1", one), ("N=2", two)):
        covered = ", ".join(
            f"rank {rank} {'yes' if r['rss'] >= r['arena'] + r['shards'] + r['persistent'] else 'no'}"
            for rank, r in sorted(ranks.items()))
        print(f"peak RSS covers arena + shards + persistent at {label}: "
              f"{covered}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
