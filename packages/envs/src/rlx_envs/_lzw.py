"""Decompression of UNIX ``compress`` (``.Z``) files, which the standard library cannot read.

UCI serves the Statlog (Shuttle) training set only as ``shuttle.trn.Z``. The format: a
3-byte header (``1f 9d``, then max code width and block-mode flag), then LZW codes packed
least-significant bit first, starting 9 bits wide. ``compress`` writes codes in groups of 8
(``width`` bytes); when the width grows or a CLEAR code resets the table, the rest of the
current group is padding, which the decoder must skip as ``ncompress`` does.
"""

from __future__ import annotations

MAGIC = b"\x1f\x9d"
_CLEAR = 256


def unlzw(data: bytes) -> bytes:
    """The decompressed bytes of a ``.Z`` file; ValueError if ``data`` is not one or is corrupt."""
    if len(data) < 3 or data[:2] != MAGIC:
        raise ValueError("not a UNIX compress (.Z) file: it does not start with bytes 1f 9d")
    max_width = data[2] & 0x1F
    block_mode = bool(data[2] & 0x80)
    if not 9 <= max_width <= 16:
        raise ValueError(f"corrupt .Z file: maximum code width {max_width} is outside 9..16")
    body = data[3:] + b"\x00\x00"  # a code may straddle three bytes; pad for the last one
    total_bits = (len(data) - 3) * 8
    first_free = 257 if block_mode else 256
    table_limit = 1 << max_width

    table: list[bytes] = [bytes((i,)) for i in range(256)] + [b""] * (first_free - 256)
    width, group_start, position = 9, 0, 0
    previous: bytes | None = None
    out: list[bytes] = []

    def skip_to_group_end() -> int:
        group_bits = width * 8
        used = position - group_start
        return group_start + -(-used // group_bits) * group_bits

    while True:
        if len(table) > (1 << width) - 1 and width < max_width:
            position = group_start = skip_to_group_end()
            width += 1
        if position + width > total_bits:
            break
        byte = position >> 3
        window = body[byte] | body[byte + 1] << 8 | body[byte + 2] << 16
        code = (window >> (position & 7)) & ((1 << width) - 1)
        position += width

        if code == _CLEAR and block_mode:
            position = group_start = skip_to_group_end()
            width = 9
            del table[first_free:]
            previous = None
            continue
        if code < len(table):
            entry = table[code]
        elif code == len(table) and previous is not None:
            entry = previous + previous[:1]  # the KwKwK case: the code being defined
        else:
            raise ValueError(f"corrupt .Z file: code {code} at bit {position - width}")
        out.append(entry)
        if previous is not None and len(table) < table_limit:
            table.append(previous + entry[:1])
        previous = entry
    return b"".join(out)
