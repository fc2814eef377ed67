//! A minimal reader of the Thrift compact protocol, for the few Parquet fields the loader checks
//! before the parquet crate sees a footer or a page header.
//!
//! The parquet crate sizes allocations from counts it reads (a schema element's `num_children`,
//! a page's `num_values`), so those counts are read here first and checked against the bytes
//! that must back them. The reader never allocates from a count: lists are walked, not
//! collected, and every length is checked against the bytes left.

/// The deepest nesting of structs and lists walked; real Parquet metadata nests a few levels.
const MAX_DEPTH: usize = 64;

/// A value type of the compact protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    True,
    False,
    Byte,
    I16,
    I32,
    I64,
    Double,
    Binary,
    List,
    Set,
    Map,
    Struct,
}

impl Kind {
    fn from_nibble(nibble: u8) -> Result<Self, String> {
        Ok(match nibble {
            1 => Kind::True,
            2 => Kind::False,
            3 => Kind::Byte,
            4 => Kind::I16,
            5 => Kind::I32,
            6 => Kind::I64,
            7 => Kind::Double,
            8 => Kind::Binary,
            9 => Kind::List,
            10 => Kind::Set,
            11 => Kind::Map,
            12 => Kind::Struct,
            other => return Err(format!("unknown thrift type {other}")),
        })
    }
}

/// A cursor over compact-protocol bytes.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, position: 0 }
    }

    /// The bytes read so far.
    pub(crate) fn position(&self) -> usize {
        self.position
    }

    /// The bytes left.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    fn byte(&mut self) -> Result<u8, String> {
        let byte = *self
            .bytes
            .get(self.position)
            .ok_or_else(|| "thrift data ends early".to_string())?;
        self.position += 1;
        Ok(byte)
    }

    fn skip_bytes(&mut self, count: usize) -> Result<(), String> {
        if count > self.remaining() {
            return Err(format!(
                "thrift field of {count} bytes exceeds the {} bytes left",
                self.remaining()
            ));
        }
        self.position += count;
        Ok(())
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let byte = self.byte()?;
            if shift == 63 && byte > 1 {
                return Err("thrift varint overflows 64 bits".to_string());
            }
            value |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("thrift varint longer than 10 bytes".to_string())
    }

    /// A zigzag-encoded integer (i16, i32 and i64 fields).
    pub(crate) fn integer(&mut self) -> Result<i64, String> {
        let raw = self.varint()?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    /// The next field's id and type, or `None` at the end of the struct.
    pub(crate) fn field(&mut self, last_id: &mut i16) -> Result<Option<Kind>, String> {
        let header = self.byte()?;
        if header == 0 {
            return Ok(None);
        }
        let delta = header >> 4;
        let kind = Kind::from_nibble(header & 0x0F)?;
        *last_id = if delta == 0 {
            i16::try_from(self.integer()?).map_err(|_| "thrift field id overflows".to_string())?
        } else {
            last_id.wrapping_add(i16::from(delta))
        };
        Ok(Some(kind))
    }

    /// A list or set header: its element type and size, the size checked against the bytes left
    /// (every element takes at least one byte).
    pub(crate) fn list(&mut self) -> Result<(Kind, usize), String> {
        let header = self.byte()?;
        let kind = Kind::from_nibble(header & 0x0F)?;
        let size = match header >> 4 {
            15 => self.varint()?,
            small => u64::from(small),
        };
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        if size > self.remaining() {
            return Err(format!(
                "thrift list of {size} elements exceeds the {} bytes left",
                self.remaining()
            ));
        }
        Ok((kind, size))
    }

    /// Skips one value of type `kind`.
    pub(crate) fn skip(&mut self, kind: Kind) -> Result<(), String> {
        self.skip_nested(kind, 0)
    }

    fn skip_nested(&mut self, kind: Kind, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("thrift data nests deeper than {MAX_DEPTH} levels"));
        }
        match kind {
            // In a struct, the value of a boolean field is in its header; list elements are read
            // by `skip_list`, which takes their byte.
            Kind::True | Kind::False => Ok(()),
            Kind::Byte => self.skip_bytes(1),
            Kind::I16 | Kind::I32 | Kind::I64 => self.varint().map(drop),
            Kind::Double => self.skip_bytes(8),
            Kind::Binary => {
                let len = usize::try_from(self.varint()?).unwrap_or(usize::MAX);
                self.skip_bytes(len)
            }
            Kind::List | Kind::Set => {
                let (element, size) = self.list()?;
                for _ in 0..size {
                    if matches!(element, Kind::True | Kind::False) {
                        self.skip_bytes(1)?;
                    } else {
                        self.skip_nested(element, depth + 1)?;
                    }
                }
                Ok(())
            }
            Kind::Map => {
                let size = usize::try_from(self.varint()?).unwrap_or(usize::MAX);
                if size == 0 {
                    return Ok(());
                }
                if size > self.remaining() {
                    return Err(format!(
                        "thrift map of {size} entries exceeds the {} bytes left",
                        self.remaining()
                    ));
                }
                let types = self.byte()?;
                let key = Kind::from_nibble(types >> 4)?;
                let value = Kind::from_nibble(types & 0x0F)?;
                for _ in 0..size {
                    for kind in [key, value] {
                        if matches!(kind, Kind::True | Kind::False) {
                            self.skip_bytes(1)?;
                        } else {
                            self.skip_nested(kind, depth + 1)?;
                        }
                    }
                }
                Ok(())
            }
            Kind::Struct => {
                let mut last = 0;
                while let Some(field) = self.field(&mut last)? {
                    self.skip_nested(field, depth + 1)?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fields_integers_and_skips_lists() {
        // Field 1 i32 = -3 (zigzag 5), field 2 list of 2 i32 [1, 2], field 3 binary "ab", stop.
        let bytes = [
            0x15, 0x05, 0x19, 0x25, 0x02, 0x04, 0x18, 0x02, b'a', b'b', 0x00,
        ];
        let mut reader = Reader::new(&bytes);
        let mut last = 0;
        assert_eq!(reader.field(&mut last), Ok(Some(Kind::I32)));
        assert_eq!((last, reader.integer()), (1, Ok(-3)));
        assert_eq!(reader.field(&mut last), Ok(Some(Kind::List)));
        assert_eq!(reader.skip(Kind::List), Ok(()));
        assert_eq!(reader.field(&mut last), Ok(Some(Kind::Binary)));
        assert_eq!(reader.skip(Kind::Binary), Ok(()));
        assert_eq!((last, reader.field(&mut last)), (3, Ok(None)));
        assert_eq!(reader.remaining(), 0);
    }

    #[test]
    fn refuses_a_list_longer_than_its_bytes() {
        // A list of i32 declaring 2**31 elements in four bytes.
        let bytes = [0xF5, 0x80, 0x80, 0x80, 0x80, 0x08];
        let error = Reader::new(&bytes).skip(Kind::List).unwrap_err();
        assert_eq!(
            error,
            "thrift list of 2147483648 elements exceeds the 0 bytes left"
        );
    }

    #[test]
    fn refuses_nesting_deeper_than_the_limit() {
        // Structs nested in field 1 of each other, never closed.
        let bytes = [0x1C; 200];
        let error = Reader::new(&bytes).skip(Kind::Struct).unwrap_err();
        assert_eq!(error, "thrift data nests deeper than 64 levels");
    }
}
