"""How many values a Parquet file holds, read from its footer without pyarrow.

The footer (Thrift's compact protocol) counts every column chunk's values, lists'
items included: a column of lists can hold millions of values in a few bytes, so that
count, not the rows, bounds what reading the file builds. pyarrow's own accessor for it
(`RowGroupMetaData.column(i)`) aborts the whole process on some malformed metadata (a
C++ exception it does not turn into Python's), so the count is read here, with nothing
kept but a sum: any malformed footer is a ValueError.

FileMetaData field 4 is the row groups; RowGroup field 1 its column chunks; ColumnChunk
field 3 the ColumnMetaData, whose field 5 is num_values (parquet.thrift).
"""

from __future__ import annotations

from collections.abc import Iterator

MAGIC = b"PAR1"
# Thrift compact protocol types.
STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT, UUID = range(14)
# Deeper than Parquet's metadata ever nests: a hostile footer cannot recurse further.
MAX_DEPTH = 32
_FIXED = {BYTE: 1, DOUBLE: 8, UUID: 16}


def footer(data: bytes) -> bytes:
    """The footer of a Parquet file's bytes (its last 8 bytes give its length)."""
    if len(data) < 12 or data[-4:] != MAGIC:
        raise ValueError("the file does not end as a Parquet file does (PAR1)")
    size = int.from_bytes(data[-8:-4], "little")
    if size > len(data) - 12:
        raise ValueError("the footer's length is longer than the file")
    return data[-8 - size : -8]


def footer_size(data: bytes) -> int:
    return int.from_bytes(data[-8:-4], "little") if len(data) >= 12 else 0


def leaf_values(meta: bytes) -> int:
    """The values of every column chunk of every row group, added up."""
    reader = _Compact(meta)
    total = 0
    for field, kind in reader.fields():
        if field != 4 or kind != LIST:
            reader.skip(kind, 0)
            continue
        for _ in reader.items(STRUCT):  # the row groups
            for group_field, group_kind in reader.fields():
                if group_field != 1 or group_kind != LIST:
                    reader.skip(group_kind, 0)
                    continue
                for _ in reader.items(STRUCT):  # the column chunks
                    total += reader.chunk_values()
    return total


class _Compact:
    """A reader of Thrift's compact protocol over bytes: past their end is a ValueError,
    and every item it reads or skips takes at least a byte, so no loop outlasts them
    (a list that claims a billion items ends with the bytes)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def byte(self) -> int:
        if self.at >= len(self.data):
            raise ValueError("the Parquet footer ends too soon")
        self.at += 1
        return self.data[self.at - 1]

    def advance(self, count: int) -> None:
        self.at += count
        if self.at > len(self.data):
            raise ValueError("the Parquet footer ends too soon")

    def varint(self) -> int:
        value = 0
        for shift in range(0, 70, 7):
            byte = self.byte()
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
        raise ValueError("a number in the Parquet footer is too long")

    def zigzag(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def fields(self) -> Iterator[tuple[int, int]]:
        """(field id, type) of a struct's fields; the caller reads or skips each value."""
        last = 0
        while True:
            header = self.byte()
            kind = header & 0x0F
            if kind == STOP:
                return
            delta = header >> 4
            last = last + delta if delta else self.zigzag()
            yield last, kind

    def items(self, expected: int) -> Iterator[None]:
        """Each item of a list whose items are `expected`; the caller reads each."""
        header = self.byte()
        size = header >> 4
        if size == 15:
            size = self.varint()
        if header & 0x0F != expected:
            raise ValueError("a list in the Parquet footer holds what it should not")
        for _ in range(size):
            yield

    def chunk_values(self) -> int:
        """A ColumnChunk's num_values (0 when it has none), the rest skipped."""
        values = 0
        for field, kind in self.fields():
            if field != 3 or kind != STRUCT:
                self.skip(kind, 1)
                continue
            for meta_field, meta_kind in self.fields():
                if meta_field == 5 and meta_kind == I64:
                    values = self.zigzag()
                else:
                    self.skip(meta_kind, 2)
        if values < 0:
            raise ValueError("a column chunk of the Parquet footer has fewer than no values")
        return values

    def skip(self, kind: int, depth: int, in_list: bool = False) -> None:
        if depth > MAX_DEPTH:
            raise ValueError("the Parquet footer is nested too deeply")
        if kind in (TRUE, FALSE):
            self.advance(in_list)  # a struct's true/false is in its type; a list's takes a byte
        elif kind in _FIXED:
            self.advance(_FIXED[kind])
        elif kind in (I16, I32, I64):
            self.varint()
        elif kind == BINARY:
            self.advance(self.varint())
        elif kind in (LIST, SET):
            self._skip_list(depth)
        elif kind == MAP:
            self._skip_map(depth)
        elif kind == STRUCT:
            for _, field_kind in self.fields():
                self.skip(field_kind, depth + 1)
        else:
            raise ValueError(f"the Parquet footer holds an unknown type ({kind})")

    def _skip_list(self, depth: int) -> None:
        header = self.byte()
        size = header >> 4
        if size == 15:
            size = self.varint()
        for _ in range(size):
            self.skip(header & 0x0F, depth + 1, in_list=True)

    def _skip_map(self, depth: int) -> None:
        size = self.varint()
        if size:
            types = self.byte()
            for _ in range(size):
                self.skip(types >> 4, depth + 1, in_list=True)
                self.skip(types & 0x0F, depth + 1, in_list=True)
