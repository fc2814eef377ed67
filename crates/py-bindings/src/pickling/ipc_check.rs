//! The check of an Arrow IPC stream before arrow-ipc's reader sees it: what that reader trusts
//! (messages and buffers inside the data, null counts within rows, buffers of whole and aligned
//! elements) is refused here with a message, rather than met as a panic there.

/// Walks the messages of an IPC stream and checks what arrow-ipc's reader trusts: every
/// message and body inside the data, and every buffer of a record batch or dictionary batch
/// inside its body (the reader slices them out of the body and panics on one outside it), every
/// node's null count within its rows, and every buffer of a fixed element width (offsets,
/// values, dictionary indices) a whole number of its elements, aligned to its width (arrow's
/// validation reads them as slices of that type, and asserts both).
/// Only the messages are read here; the data is not.
pub(super) fn check_ipc_stream(data: &[u8]) -> Result<(), String> {
    let mut at = 0usize;
    let mut schema: Option<arrow_ipc::Schema<'_>> = None;
    let word = |at: usize| -> Result<[u8; 4], String> {
        data.get(at..at + 4)
            .and_then(|bytes| bytes.try_into().ok())
            .ok_or_else(|| {
                format!(
                    "the stream ends at byte {} inside a message prefix",
                    data.len()
                )
            })
    };
    while at < data.len() {
        let mut prefix = word(at)?;
        at += 4;
        if prefix == [0xff; 4] {
            prefix = word(at)?;
            at += 4;
        }
        let meta_len = i32::from_le_bytes(prefix);
        if meta_len == 0 {
            return Ok(());
        }
        let meta = usize::try_from(meta_len)
            .ok()
            .and_then(|len| data.get(at..at.checked_add(len)?))
            .ok_or_else(|| {
                format!(
                    "a message at byte {at} declares {meta_len} bytes of metadata; {} remain",
                    data.len() - at
                )
            })?;
        at += meta.len();
        let message = arrow_ipc::root_as_message(meta)
            .map_err(|error| format!("invalid message at byte {at}: {error}"))?;
        let body = usize::try_from(message.bodyLength())
            .ok()
            .filter(|&body| body <= data.len() - at)
            .ok_or_else(|| {
                format!(
                    "a message declares a body of {} bytes; {} remain",
                    message.bodyLength(),
                    data.len() - at
                )
            })?;
        let body_start = at;
        at += body;
        // The element width of each buffer, in order, where the schema tells.
        let mut widths = Vec::new();
        // The values per row of each node, in order, where it is a fixed-size list's.
        let mut sizes = Vec::new();
        let batch = match message.header_type() {
            arrow_ipc::MessageHeader::Schema => {
                schema = message.header_as_schema();
                None
            }
            arrow_ipc::MessageHeader::RecordBatch => {
                if let Some(fields) = schema.and_then(|schema| schema.fields()) {
                    let _ = fields
                        .iter()
                        .try_for_each(|field| layout(field, false, &mut widths));
                    for field in fields {
                        list_sizes(field, false, &mut sizes);
                    }
                }
                message.header_as_record_batch()
            }
            arrow_ipc::MessageHeader::DictionaryBatch => {
                let dictionary = message.header_as_dictionary_batch();
                let id = dictionary.map(|dictionary| dictionary.id());
                let field = schema
                    .and_then(|schema| schema.fields())
                    .zip(id)
                    .and_then(|(fields, id)| fields.iter().find_map(|f| dictionary_field(f, id)));
                if let Some(field) = field {
                    let _ = layout(field, true, &mut widths);
                    list_sizes(field, true, &mut sizes);
                }
                dictionary.and_then(|dictionary| dictionary.data())
            }
            _ => None,
        };
        let Some(batch) = batch else {
            continue;
        };
        let mut sizes = sizes.into_iter();
        for node in batch.nodes().into_iter().flatten() {
            if node.length() < 0 || node.null_count() < 0 || node.null_count() > node.length() {
                return Err(format!(
                    "a column declares {} nulls in {} rows; expected between 0 and its rows",
                    node.null_count(),
                    node.length()
                ));
            }
            // arrow's validation multiplies a fixed-size list's rows by its size, and asserts
            // that the product does not overflow.
            if let Some(Some(size)) = sizes.next()
                && (size < 0 || node.length().checked_mul(i64::from(size)).is_none())
            {
                return Err(format!(
                    "a fixed-size list column declares {} rows of {size} values; expected a \
                     count of values that fits 64 bits",
                    node.length()
                ));
            }
        }
        for buffer in batch.buffers().into_iter().flatten() {
            let end = buffer.offset().checked_add(buffer.length());
            if buffer.offset() < 0 || buffer.length() < 0 || end.is_none_or(|end| end > body as i64)
            {
                return Err(format!(
                    "a buffer of {} bytes at offset {} lies outside the body of {body} bytes",
                    buffer.length(),
                    buffer.offset(),
                ));
            }
        }
        for (index, (buffer, width)) in batch
            .buffers()
            .into_iter()
            .flatten()
            .zip(widths)
            .enumerate()
        {
            // In range: checked above.
            let (offset, length) = (buffer.offset() as usize, buffer.length() as usize);
            // The format aligns every buffer of the stream to 8 bytes (the reader copies one
            // whose address is not aligned in memory).
            let aligned = (body_start + offset).is_multiple_of(width.min(8));
            if !length.is_multiple_of(width) || !aligned {
                return Err(format!(
                    "buffer {index} of a batch, of {length} bytes at offset {offset} of the body, \
                     does not hold whole elements of {width} bytes aligned as the format aligns \
                     them"
                ));
            }
        }
    }
    Ok(())
}

/// Appends the element width of each buffer `field` has in a record batch (or, with
/// `dictionary`, in its own dictionary batch), in the order of the IPC format: 1 where any
/// length and address do (validity bitmaps, bytes). `None` at a type whose buffers this walk
/// does not follow (string and binary views, unions, unknown types): the widths of the buffers
/// after it are not known, and those before it are checked.
fn layout(field: arrow_ipc::Field<'_>, dictionary: bool, widths: &mut Vec<usize>) -> Option<()> {
    use arrow_ipc::{DateUnit, IntervalUnit, Precision, Type};
    if !dictionary && let Some(encoding) = field.dictionary() {
        let bits = encoding.indexType().map_or(32, |index| index.bitWidth());
        widths.extend([1, bytes_of_bits(bits)?]);
        return Some(());
    }
    let children = |widths: &mut Vec<usize>| -> Option<()> {
        for child in field.children().into_iter().flatten() {
            layout(child, false, widths)?;
        }
        Some(())
    };
    match field.type_type() {
        Type::Null | Type::RunEndEncoded => {}
        Type::Bool | Type::FixedSizeBinary => widths.extend([1, 1]),
        Type::Int => widths.extend([1, bytes_of_bits(field.type_as_int()?.bitWidth())?]),
        Type::FloatingPoint => widths.extend([
            1,
            match field.type_as_floating_point()?.precision() {
                Precision::HALF => 2,
                Precision::SINGLE => 4,
                Precision::DOUBLE => 8,
                _ => return None,
            },
        ]),
        Type::Decimal => widths.extend([1, bytes_of_bits(field.type_as_decimal()?.bitWidth())?]),
        Type::Date => widths.extend([
            1,
            match field.type_as_date()?.unit() {
                DateUnit::DAY => 4,
                DateUnit::MILLISECOND => 8,
                _ => return None,
            },
        ]),
        Type::Time => widths.extend([1, bytes_of_bits(field.type_as_time()?.bitWidth())?]),
        Type::Timestamp | Type::Duration => widths.extend([1, 8]),
        Type::Interval => widths.extend([
            1,
            match field.type_as_interval()?.unit() {
                IntervalUnit::YEAR_MONTH => 4,
                IntervalUnit::DAY_TIME => 8,
                IntervalUnit::MONTH_DAY_NANO => 16,
                _ => return None,
            },
        ]),
        Type::Utf8 | Type::Binary => widths.extend([1, 4, 1]),
        Type::LargeUtf8 | Type::LargeBinary => widths.extend([1, 8, 1]),
        Type::List | Type::Map => {
            widths.extend([1, 4]);
            children(widths)?;
        }
        Type::LargeList => {
            widths.extend([1, 8]);
            children(widths)?;
        }
        // Offsets and sizes, each of the offsets' width.
        Type::ListView => {
            widths.extend([1, 4, 4]);
            children(widths)?;
        }
        Type::LargeListView => {
            widths.extend([1, 8, 8]);
            children(widths)?;
        }
        Type::FixedSizeList | Type::Struct_ => {
            widths.push(1);
            children(widths)?;
        }
        _ => return None,
    }
    if matches!(field.type_type(), Type::RunEndEncoded) {
        children(widths)?;
    }
    Some(())
}

/// Appends, for `field` and each of its children in the order of the nodes of a record batch
/// (or, with `dictionary`, of its own dictionary batch), the values per row where it is a
/// fixed-size list, `None` where it is not. A dictionary-encoded field has one node in a record
/// batch (its indices): its values' children are in the dictionary batch.
fn list_sizes(field: arrow_ipc::Field<'_>, dictionary: bool, sizes: &mut Vec<Option<i32>>) {
    if !dictionary && field.dictionary().is_some() {
        sizes.push(None);
        return;
    }
    sizes.push(field.type_as_fixed_size_list().map(|list| list.listSize()));
    for child in field.children().into_iter().flatten() {
        list_sizes(child, false, sizes);
    }
}

/// The field (at any depth) whose dictionary has `id`.
fn dictionary_field(field: arrow_ipc::Field<'_>, id: i64) -> Option<arrow_ipc::Field<'_>> {
    if field
        .dictionary()
        .is_some_and(|encoding| encoding.id() == id)
    {
        return Some(field);
    }
    field
        .children()
        .into_iter()
        .flatten()
        .find_map(|child| dictionary_field(child, id))
}

/// The bytes of an element of `bits` bits: 1, 2, 4, 8, 16 or 32 bytes; `None` otherwise.
fn bytes_of_bits(bits: i32) -> Option<usize> {
    match bits {
        8 | 16 | 32 | 64 | 128 | 256 => Some(bits as usize / 8),
        _ => None,
    }
}
