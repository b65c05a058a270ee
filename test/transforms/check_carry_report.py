"""Reads the generation section of zcc's report and checks that the carry
pays: exposed comm and decode time per token are lower with the carry than
without it, and tokens/s higher (the same compile's two replays). Prints
the figures, one line, for FileCheck."""

import re
import sys

UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


def seconds(number, unit):
    return float(number) * UNITS[unit]


text = open(sys.argv[1]).read()
match = re.search(
    r"exposed comm/token: ([0-9.]+) (s|ms|us) with the carry, ([0-9.]+) (s|ms|us) "
    r"without; decode/token ([0-9.]+) (s|ms|us) vs ([0-9.]+) (s|ms|us); "
    r"tokens/s ([0-9.]+) vs ([0-9.]+)", text)
if not match:
    sys.exit("no carry line in the report")
g = match.groups()
exposed_with, exposed_without = seconds(g[0], g[1]), seconds(g[2], g[3])
decode_with, decode_without = seconds(g[4], g[5]), seconds(g[6], g[7])
rate_with, rate_without = float(g[8]), float(g[9])
problems = []
if not exposed_with < exposed_without:
    problems.append("exposed comm/token not lower with the carry")
if not decode_with < decode_without:
    problems.append("decode/token not lower with the carry")
if not rate_with > rate_without:
    problems.append("tokens/s not higher with the carry")
# The carry hides part of one collective: it cannot save more than the
# difference in exposed comm.
if abs((decode_without - decode_with) - (exposed_without - exposed_with)) > 1e-8:
    problems.append("decode time saved differs from exposed comm saved")
if problems:
    sys.exit("; ".join(problems))
print("ok carry saves %.3f us of exposed comm per token (%.3f -> %.3f us)" %
      ((exposed_without - exposed_with) * 1e6, exposed_without * 1e6,
       exposed_with * 1e6))
