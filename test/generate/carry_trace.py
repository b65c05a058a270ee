"""What a `zrun generate --trace` file says about cross-step prefetch.

docs/generation.md section 6: prefill and each decode end with a carry_gather
of the group the next decode reads first, so that the gather overlaps the
tail of the program that issues it instead of stalling the next decode at
its start. For every rank and every decode run this reads:

- whether the run has a carry_gather (comm queue) that starts before the
  run's last compute event ends: it overlaps the run's own compute;
- the run's first wait (its first gather_wait or carry_wait): how long the
  decode's compute queue stood still at its start waiting for a gather
  (the event of a wait lasts as long as the exposed part of its gather).

Prints, for the lit tests and the measurements:

  decode runs: N (per rank)
  carry_gather overlapping its decode's compute: K of N
  first wait of decode: OP, mean D us, median M us (rank 0)
"""
import collections
import json
import statistics
import sys


def main():
    with open(sys.argv[1]) as f:
        trace = json.load(f)
    runs = collections.defaultdict(list)  # (rank, run) -> decode events
    for event in trace["traceEvents"]:
        if event.get("ph") == "X" and event["args"].get("program") == "decode":
            runs[(event["pid"], event["args"]["run"])].append(event)
    ranks = sorted({rank for rank, _ in runs})
    overlapping = 0
    first_waits = []
    for (rank, run), events in sorted(runs.items()):
        compute = [e for e in events if e["tid"] == 0]
        last_compute_end = max(e["ts"] + e["dur"] for e in compute)
        if any(
            e["name"] == "carry_gather" and e["ts"] < last_compute_end
            for e in events
        ):
            overlapping += 1
        waits = sorted(
            (e for e in compute if e["name"] in ("gather_wait", "carry_wait")),
            key=lambda e: e["args"]["instruction"],
        )
        if rank == 0 and waits:
            first_waits.append((waits[0]["name"], waits[0]["dur"]))
    count = len(runs) // max(len(ranks), 1)
    print(f"decode runs: {count} (per rank)")
    print(f"carry_gather overlapping its decode's compute: {overlapping} of {len(runs)}")
    if first_waits:
        names = sorted({name for name, _ in first_waits})
        durations = [d for _, d in first_waits]
        print(
            f"first wait of decode: {'/'.join(names)}, mean "
            f"{statistics.mean(durations):.1f} us, median "
            f"{statistics.median(durations):.1f} us (rank 0)"
        )


if __name__ == "__main__":
    main()
