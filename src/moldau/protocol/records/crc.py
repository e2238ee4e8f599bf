"""Checksums used by the record formats.

* RecordBatch v2: CRC-32C (Castagnoli) over attributes..end of batch (C-backed ``crc32c`` package).
* Legacy messages v0/v1: CRC-32 (IEEE, zlib) over magic..end of message.
* LZ4 frame descriptor: XXH32 (only ever over a handful of header bytes, so pure Python is fine).
"""

from __future__ import annotations

import zlib

from crc32c import crc32c as _crc32c

__all__ = ["crc32c", "crc32", "xxh32"]


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32C of ``data`` (unsigned), optionally continuing from ``value``."""
    return _crc32c(data, value)


def crc32(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32 (zlib / IEEE) of ``data`` (unsigned)."""
    return zlib.crc32(data, value) & 0xFFFFFFFF


_P1 = 2654435761
_P2 = 2246822519
_P3 = 3266489917
_P4 = 668265263
_P5 = 374761393
_M = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M


def xxh32(data: bytes | bytearray | memoryview, seed: int = 0) -> int:
    """XXH32 hash (reference algorithm). Meant for short inputs such as LZ4 frame descriptors."""
    b = bytes(data)
    n = len(b)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M
        v2 = (seed + _P2) & _M
        v3 = seed & _M
        v4 = (seed - _P1) & _M
        limit = n - 16
        while i <= limit:
            v1 = (_rotl((v1 + int.from_bytes(b[i:i + 4], "little") * _P2) & _M, 13) * _P1) & _M
            v2 = (_rotl((v2 + int.from_bytes(b[i + 4:i + 8], "little") * _P2) & _M, 13) * _P1) & _M
            v3 = (_rotl((v3 + int.from_bytes(b[i + 8:i + 12], "little") * _P2) & _M, 13) * _P1) & _M
            v4 = (_rotl((v4 + int.from_bytes(b[i + 12:i + 16], "little") * _P2) & _M, 13) * _P1) & _M
            i += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 4 <= n:
        h = (_rotl((h + int.from_bytes(b[i:i + 4], "little") * _P3) & _M, 17) * _P4) & _M
        i += 4
    while i < n:
        h = (_rotl((h + b[i] * _P5) & _M, 11) * _P1) & _M
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M
    h ^= h >> 13
    h = (h * _P3) & _M
    h ^= h >> 16
    return h
