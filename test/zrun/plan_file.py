"""Plan and weights files as zcc writes them, for tests that rewrite them.

A plan file is a serialized Plan whose last 10 bytes are its body_checksum
field: the checksum of every byte before it (runtime/plan/PlanFormat.h).
A weights file starts with a header recording the plan's identity (that
checksum) and a checksum per section, and ends the header with its own
checksum (runtime/plan/Weights.h). A test that changes a plan must seal it
again, and give it weights whose header names it, or zrun refuses both.

checksum() is runtime/support/Checksum.h in NumPy: the same function, bit
for bit.
"""
import struct

import numpy as np

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_MIX = 0xBF58476D1CE4E5B9
_FNV_PRIME = 0x100000001B3

# body_checksum: field 2047, wire type 1 (fixed64), as a varint tag.
_TRAILER_TAG = bytes([((2047 << 3 | 1) & 0x7F) | 0x80, (2047 << 3 | 1) >> 7])
TRAILER_BYTES = 10


def checksum(data):
    """The position-sensitive 64-bit checksum of `data` (bytes)."""
    data = bytes(data)
    words = len(data) // 8
    total = 0
    if words:
        with np.errstate(over="ignore"):
            word = np.frombuffer(data[:words * 8], dtype="<u8")
            index = np.arange(words, dtype=np.uint64)
            mixed = (word ^ (index * np.uint64(_GOLDEN))) * np.uint64(_MIX)
            total = int((mixed ^ (mixed >> np.uint64(31))).sum(dtype=np.uint64))
    total = (total + len(data) * _GOLDEN) & _MASK
    for byte in data[words * 8:]:
        total = ((total ^ byte) * _FNV_PRIME) & _MASK
    return total


def seal_plan(plan):
    """The bytes of a plan file for `plan` (a plan_pb2.Plan), and its
    identity. Stamps the constants' checksums, as zcc does."""
    plan.ClearField("body_checksum")
    for constant in plan.constants:
        constant.checksum = checksum(constant.data)
    body = plan.SerializeToString()
    identity = checksum(body)
    return body + _TRAILER_TAG + struct.pack("<Q", identity), identity


def weights_header_bytes(world_size):
    return 8 + 4 + 4 + 8 + 8 * world_size + 8 + 8


def copy_weights_for(source, destination, world_size, identity):
    """Copies the weights file `source` to `destination`, its header now
    naming the plan `identity` (and its header checksum updated)."""
    with open(source, "rb") as file:
        data = bytearray(file.read())
    size = weights_header_bytes(world_size)
    data[16:24] = struct.pack("<Q", identity)
    data[size - 8:size] = struct.pack("<Q", checksum(data[:size - 8]))
    with open(destination, "wb") as file:
        file.write(data)
