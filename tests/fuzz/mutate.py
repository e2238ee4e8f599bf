"""Byte mutations over valid request frames: bit flips, interesting bytes and ints written over the frame,
inserts, deletes and duplicated ranges. The size prefix is fixed up after the body changed (mostly), or left
as it was (then it says more or less than what follows)."""

from __future__ import annotations

import random
import struct

__all__ = ["mutate"]

_I32 = struct.Struct(">i")
_INTERESTING_8 = (0x00, 0x01, 0x7F, 0x80, 0xFF)
_INTERESTING_16 = (0, 1, 0x7FFF, 0x8000, 0xFFFF, 0x0100, 10_000)
# 10,000 and 10,001: at and just beyond Kafka's partitions per CreateTopics / CreatePartitions
_INTERESTING_32 = (0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 10_000, 10_001, 9_568_257, 0x00010000)


def mutate(frame: bytes, rng: random.Random, max_ops: int = 6) -> bytes:
    """A mutated copy of ``frame`` (size prefix + body)."""
    body = bytearray(frame[4:])
    for _ in range(rng.randrange(1, max_ops + 1)):
        n = len(body)
        op = rng.randrange(9)
        if n == 0:
            body += rng.randbytes(rng.randrange(1, 16))
            continue
        pos = rng.randrange(n)
        if op <= 2:  # flip one bit
            body[pos] ^= 1 << rng.randrange(8)
        elif op == 3:
            body[pos] = rng.choice(_INTERESTING_8)
        elif op == 4 and n >= 2:
            pos = rng.randrange(n - 1)
            body[pos:pos + 2] = rng.choice(_INTERESTING_16).to_bytes(2, "big")
        elif op == 5 and n >= 4:
            pos = rng.randrange(n - 3)
            body[pos:pos + 4] = rng.choice(_INTERESTING_32).to_bytes(4, "big")
        elif op == 6:  # insert random bytes
            body[pos:pos] = rng.randbytes(rng.randrange(1, 17))
        elif op == 7:  # delete a range
            del body[pos:pos + rng.randrange(1, 17)]
        else:  # duplicate a range
            end = min(n, pos + rng.randrange(1, 33))
            body[pos:pos] = body[pos:end]
    size = len(body) if rng.random() < 0.9 else int.from_bytes(frame[:4], "big", signed=True)
    return _I32.pack(size) + bytes(body)
