//! A JSON reader for what tidy reads of `cargo metadata`: the whole grammar, no more, so that
//! xtask keeps depending on the standard library only.

use crate::Result;

/// A JSON value; numbers are kept as their text, which tidy never reads.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<Value>),
    Object(Vec<(String, Value)>),
}

impl Value {
    /// The value of `key`, when this is an object that has it.
    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(members) => members
                .iter()
                .find(|(name, _)| name == key)
                .map(|(_, value)| value),
            _ => None,
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(text) => Some(text),
            _ => None,
        }
    }

    pub(crate) fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }
}

/// Parses one JSON document.
pub(crate) fn parse(text: &str) -> Result<Value> {
    let mut parser = Parser {
        bytes: text.as_bytes(),
        at: 0,
    };
    let value = parser.value()?;
    parser.skip_whitespace();
    if parser.at != parser.bytes.len() {
        return Err(parser.error("the end of the document"));
    }
    Ok(value)
}

struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn error(&self, expected: &str) -> String {
        format!(
            "cargo metadata: invalid JSON at byte {}: expected {expected}",
            self.at
        )
    }

    fn skip_whitespace(&mut self) {
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    /// Consumes `byte` after any whitespace, or fails.
    fn expect(&mut self, byte: u8) -> Result {
        self.skip_whitespace();
        if self.bytes.get(self.at) == Some(&byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.error(&format!("`{}`", byte as char)))
        }
    }

    fn value(&mut self) -> Result<Value> {
        self.skip_whitespace();
        match self.bytes.get(self.at) {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => self.string().map(Value::String),
            Some(b'n') => self.word("null", Value::Null),
            Some(b't') => self.word("true", Value::Bool(true)),
            Some(b'f') => self.word("false", Value::Bool(false)),
            Some(b'-' | b'0'..=b'9') => {
                let start = self.at;
                while self
                    .bytes
                    .get(self.at)
                    .is_some_and(|b| b"+-.eE0123456789".contains(b))
                {
                    self.at += 1;
                }
                let number = String::from_utf8_lossy(&self.bytes[start..self.at]);
                Ok(Value::Number(number.into_owned()))
            }
            _ => Err(self.error("a value")),
        }
    }

    fn word(&mut self, word: &str, value: Value) -> Result<Value> {
        if self.bytes[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(value)
        } else {
            Err(self.error(&format!("`{word}`")))
        }
    }

    /// A list of items between `open` and `close`, separated by commas.
    fn items(&mut self, open: u8, close: u8, mut item: impl FnMut(&mut Self) -> Result) -> Result {
        self.expect(open)?;
        self.skip_whitespace();
        if self.bytes.get(self.at) == Some(&close) {
            self.at += 1;
            return Ok(());
        }
        loop {
            item(self)?;
            self.skip_whitespace();
            match self.bytes.get(self.at) {
                Some(b',') => self.at += 1,
                Some(&byte) if byte == close => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return Err(self.error(&format!("`,` or `{}`", close as char))),
            }
        }
    }

    fn object(&mut self) -> Result<Value> {
        let mut members = Vec::new();
        self.items(b'{', b'}', |parser| {
            parser.skip_whitespace();
            let key = parser.string()?;
            parser.expect(b':')?;
            members.push((key, parser.value()?));
            Ok(())
        })?;
        Ok(Value::Object(members))
    }

    fn array(&mut self) -> Result<Value> {
        let mut items = Vec::new();
        self.items(b'[', b']', |parser| {
            items.push(parser.value()?);
            Ok(())
        })?;
        Ok(Value::Array(items))
    }

    fn string(&mut self) -> Result<String> {
        self.expect(b'"')?;
        let mut text = Vec::new();
        loop {
            let Some(&byte) = self.bytes.get(self.at) else {
                return Err(self.error("the end of a string"));
            };
            self.at += 1;
            match byte {
                b'"' => break,
                b'\\' => {
                    let Some(&escape) = self.bytes.get(self.at) else {
                        return Err(self.error("an escape"));
                    };
                    self.at += 1;
                    let decoded = match escape {
                        b'"' | b'\\' | b'/' => escape as char,
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return Err(self.error("an escape")),
                    };
                    text.extend_from_slice(decoded.encode_utf8(&mut [0; 4]).as_bytes());
                }
                _ => text.push(byte),
            }
        }
        String::from_utf8(text).map_err(|_| self.error("UTF-8 text"))
    }

    /// The character of `\uXXXX` (the `\u` consumed), joining a surrogate pair.
    fn unicode_escape(&mut self) -> Result<char> {
        let high = self.hex4()?;
        let code = if (0xD800..0xDC00).contains(&high) {
            if !self.bytes[self.at..].starts_with(b"\\u") {
                return Err(self.error("the second half of a surrogate pair"));
            }
            self.at += 2;
            let low = self.hex4()?;
            0x10000 + ((high - 0xD800) << 10) + (low.wrapping_sub(0xDC00) & 0x3FF)
        } else {
            high
        };
        char::from_u32(code).ok_or_else(|| self.error("a Unicode scalar value"))
    }

    fn hex4(&mut self) -> Result<u32> {
        let digits = self
            .bytes
            .get(self.at..self.at + 4)
            .and_then(|digits| std::str::from_utf8(digits).ok())
            .and_then(|digits| u32::from_str_radix(digits, 16).ok())
            .ok_or_else(|| self.error("four hexadecimal digits"))?;
        self.at += 4;
        Ok(digits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_reads_escapes_and_refuses_malformed_text() {
        let value =
            parse(r#"{"a": ["x\"y\\\u00e9\ud83d\ude00", 1.5e3, true, null], "b": {}}"#).unwrap();
        let items = value.get("a").and_then(Value::as_array).unwrap();
        assert_eq!(items[0].as_str(), Some("x\"y\\\u{e9}\u{1f600}"));
        assert_eq!(items[1], Value::Number("1.5e3".to_string()));
        assert_eq!(value.get("b"), Some(&Value::Object(Vec::new())));
        for malformed in [r#"{"a": 1"#, r#"{"a" 1}"#, r#"["\x"]"#, "[1,]", "[] []"] {
            assert!(parse(malformed).is_err(), "{malformed}");
        }
    }
}
