"""A small editor of Parquet footers and page headers, for tests that need corrupt files.

Parquet's metadata is Thrift, in the compact protocol. :class:`Struct` reads a struct into an
ordered list of fields and writes it back byte for byte, so a test can change one declared count
(a page's ``num_values``, a schema element's ``num_children``, a row group's ``num_rows``) and
leave the rest of the file as pyarrow wrote it. :class:`ParquetFile` splices an edited page
header into the file and shifts the offsets the footer holds past it.
"""

import struct

STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)


class _Reader:
    def __init__(self, data, position=0):
        self.data = data
        self.position = position

    def byte(self):
        value = self.data[self.position]
        self.position += 1
        return value

    def varint(self):
        value = shift = 0
        while True:
            byte = self.byte()
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    def integer(self):
        raw = self.varint()
        return (raw >> 1) ^ -(raw & 1)

    def take(self, count):
        value = self.data[self.position : self.position + count]
        self.position += count
        return bytes(value)


def _write_varint(out, value):
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


def _zigzag(value):
    return (value << 1) ^ (value >> 63)


def _read_value(reader, kind):
    if kind in (TRUE, FALSE):
        return kind == TRUE
    if kind == BYTE:
        return reader.byte()
    if kind in (I16, I32, I64):
        return reader.integer()
    if kind == DOUBLE:
        return reader.take(8)
    if kind == BINARY:
        return reader.take(reader.varint())
    if kind in (LIST, SET):
        header = reader.byte()
        size, element = header >> 4, header & 0x0F
        if size == 15:
            size = reader.varint()
        if element in (TRUE, FALSE):
            return (element, [reader.byte() == 1 for _ in range(size)])
        return (element, [_read_value(reader, element) for _ in range(size)])
    if kind == MAP:
        raise NotImplementedError("maps do not occur in the fields these tests edit")
    if kind == STRUCT:
        return Struct.read(reader)
    raise ValueError(f"unknown thrift type {kind}")


def _write_value(out, kind, value):
    if kind in (TRUE, FALSE):
        return
    if kind == BYTE:
        out.append(value)
    elif kind in (I16, I32, I64):
        _write_varint(out, _zigzag(value))
    elif kind == DOUBLE:
        out += value
    elif kind == BINARY:
        _write_varint(out, len(value))
        out += value
    elif kind in (LIST, SET):
        element, values = value
        if len(values) < 15:
            out.append(len(values) << 4 | element)
        else:
            out.append(0xF0 | element)
            _write_varint(out, len(values))
        for item in values:
            if element in (TRUE, FALSE):
                out.append(1 if item else 2)
            else:
                _write_value(out, element, item)
    elif kind == STRUCT:
        value.write(out)


class Struct:
    """A thrift struct: its fields in order, as ``[field_id, kind, value]`` lists."""

    def __init__(self, fields):
        self.fields = fields

    @classmethod
    def read(cls, reader):
        fields, last = [], 0
        while True:
            header = reader.byte()
            if header == STOP:
                return cls(fields)
            delta, kind = header >> 4, header & 0x0F
            last = last + delta if delta else reader.integer()
            fields.append([last, kind, _read_value(reader, kind)])

    def write(self, out):
        last = 0
        for field_id, kind, value in self.fields:
            if kind in (TRUE, FALSE):
                kind = TRUE if value else FALSE
            if 0 < field_id - last <= 15:
                out.append((field_id - last) << 4 | kind)
            else:
                out.append(kind)
                _write_varint(out, _zigzag(field_id))
            _write_value(out, kind, value)
            last = field_id
        out.append(STOP)

    def to_bytes(self):
        out = bytearray()
        self.write(out)
        return bytes(out)

    def __getitem__(self, field_id):
        for field in self.fields:
            if field[0] == field_id:
                return field[2]
        raise KeyError(field_id)

    def __setitem__(self, field_id, value):
        for field in self.fields:
            if field[0] == field_id:
                field[2] = value
                return
        raise KeyError(field_id)

    def get(self, field_id, default=None):
        try:
            return self[field_id]
        except KeyError:
            return default


# FileMetaData fields.
SCHEMA, NUM_ROWS, ROW_GROUPS = 2, 3, 4
# SchemaElement, RowGroup, ColumnChunk and ColumnMetaData fields.
NUM_CHILDREN = 5
RG_COLUMNS, RG_NUM_ROWS, RG_FILE_OFFSET, RG_TOTAL_COMPRESSED = 1, 3, 5, 6
CC_FILE_OFFSET, CC_META = 2, 3
CC_OFFSET_INDEX, CC_COLUMN_INDEX = 4, 6
CM_NUM_VALUES, CM_UNCOMPRESSED, CM_COMPRESSED = 5, 6, 7
CM_DATA_PAGE, CM_INDEX_PAGE, CM_DICTIONARY_PAGE = 9, 10, 11
# PageHeader fields.
PH_TYPE, PH_UNCOMPRESSED, PH_COMPRESSED = 1, 2, 3
PH_DATA, PH_DICTIONARY, PH_DATA_V2 = 5, 7, 8
DICTIONARY_PAGE = 2


class ParquetFile:
    """A Parquet file's bytes, footer parsed, to edit and write back."""

    def __init__(self, data):
        assert data[-4:] == b"PAR1"
        footer_len = struct.unpack("<I", data[-8:-4])[0]
        self.body = bytearray(data[: -8 - footer_len])
        self.footer = Struct.read(_Reader(data[-8 - footer_len : -8]))

    @classmethod
    def open(cls, path):
        with open(path, "rb") as file:
            return cls(file.read())

    def to_bytes(self):
        footer = self.footer.to_bytes()
        return bytes(self.body) + footer + struct.pack("<I", len(footer)) + b"PAR1"

    def save(self, path):
        with open(path, "wb") as file:
            file.write(self.to_bytes())

    def row_groups(self):
        return self.footer[ROW_GROUPS][1]

    def column_meta(self, row_group, column):
        return self.row_groups()[row_group][RG_COLUMNS][1][column][CC_META]

    def pages(self, row_group, column):
        """The ``(offset, header)`` of every page of a column chunk."""
        meta = self.column_meta(row_group, column)
        offset = meta.get(CM_DICTIONARY_PAGE) or meta[CM_DATA_PAGE]
        end = offset + meta[CM_COMPRESSED]
        pages = []
        while offset < end:
            reader = _Reader(self.body, offset)
            header = Struct.read(reader)
            pages.append((offset, header))
            offset = reader.position + header[PH_COMPRESSED]
        return pages

    def replace_header(self, offset, header):
        """Writes `header` over the page header at `offset`, shifting what follows."""
        old_len = _Reader(self.body, offset)
        Struct.read(old_len)
        old_len = old_len.position - offset
        new = header.to_bytes()
        delta = len(new) - old_len
        self.body[offset : offset + old_len] = new
        if delta:
            self._shift(offset, delta)

    def _shift(self, offset, delta):
        def moved(value):
            return value + delta if value > offset else value

        for group in self.row_groups():
            containing = False
            for chunk in group[RG_COLUMNS][1]:
                meta = chunk[CC_META]
                start = meta.get(CM_DICTIONARY_PAGE) or meta[CM_DATA_PAGE]
                if start <= offset < start + meta[CM_COMPRESSED]:
                    meta[CM_COMPRESSED] += delta
                    meta[CM_UNCOMPRESSED] += delta
                    containing = True
                for field in (CM_DATA_PAGE, CM_INDEX_PAGE, CM_DICTIONARY_PAGE):
                    if meta.get(field) is not None:
                        meta[field] = moved(meta[field])
                for field in (CC_FILE_OFFSET, CC_OFFSET_INDEX, CC_COLUMN_INDEX):
                    if chunk.get(field) is not None:
                        chunk[field] = moved(chunk[field])
            if group.get(RG_FILE_OFFSET) is not None:
                group[RG_FILE_OFFSET] = moved(group[RG_FILE_OFFSET])
            if containing and group.get(RG_TOTAL_COMPRESSED) is not None:
                group[RG_TOTAL_COMPRESSED] += delta

    def set_page_values(self, row_group, column, page, num_values):
        """Sets the ``num_values`` a page header declares."""
        offset, header = self.pages(row_group, column)[page]
        for inner in (PH_DATA, PH_DICTIONARY, PH_DATA_V2):
            if header.get(inner) is not None:
                header[inner][1] = num_values
        self.replace_header(offset, header)
