//! Rows to and from Arrow columns, for `Rows.to_arrow()` and `Table.replace_many` of a
//! `pyarrow.Table`: the cells move as raw column buffers (Arrow's layout: a validity
//! bitmap, fixed-width little-endian values, or int64 offsets into a data buffer), with
//! no Python object per cell. `strata/_arrow.py` does the pyarrow side.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use strata::table::schema::FieldType;
use strata::table::value::Value;

use crate::convert::FieldSpec;
use crate::errors;

/// One column from `_arrow.columns_of`: length, offset of the first value, validity
/// bitmap, values, int64 offsets (`str` and `bytes`).
type ColumnIn = (usize, usize, Option<Vec<u8>>, Vec<u8>, Option<Vec<u8>>);

/// True for a `pyarrow.Table` or `pyarrow.RecordBatch`.
pub fn is_arrow_table(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    let module: String = obj.get_type().getattr("__module__")?.extract()?;
    Ok(module.starts_with("pyarrow") && obj.hasattr("column_names")?)
}

fn kind(ty: FieldType) -> &'static str {
    ty.name()
}

/// The columns of a `pyarrow.Table` or `RecordBatch` for `fields` (matched by name, cast
/// to the fields' types), as raw buffers: `None` for a field the table lacks. Columns of
/// no field are refused, unless `ignore_other`. Returns the row count too.
pub fn arrow_columns(
    py: Python<'_>,
    table: &Bound<'_, PyAny>,
    fields: &[FieldSpec],
    ignore_other: bool,
) -> PyResult<(usize, Vec<Option<ColumnIn>>)> {
    let spec = PyList::empty(py);
    for f in fields {
        spec.append((f.text.as_str(), kind(f.ty)))?;
    }
    let helper = py.import("strata._arrow")?;
    let n: usize = table.getattr("num_rows")?.extract()?;
    let cols = if ignore_other {
        let kw = pyo3::types::PyDict::new(py);
        kw.set_item("ignore_other", true)?;
        helper.call_method("columns_of", (table, spec), Some(&kw))?
    } else {
        helper.call_method1("columns_of", (table, spec))?
    };
    let mut out = Vec::with_capacity(fields.len());
    for col in cols.try_iter()? {
        let col = col?;
        out.push(if col.is_none() { None } else { Some(col.extract()?) });
    }
    if out.len() != fields.len() {
        return Err(errors::schema(
            py,
            format!("{} columns for {} fields", out.len(), fields.len()),
        ));
    }
    Ok((n, out))
}

/// The rows of `n` rows of `columns` (from [`arrow_columns`]); needs no GIL. The error
/// is a `SchemaError`'s message.
pub fn decode_rows(n: usize, columns: &[Option<ColumnIn>], fields: &[FieldSpec]) -> Result<Vec<Vec<Value>>, String> {
    let mut rows: Vec<Vec<Value>> = (0..n).map(|_| Vec::with_capacity(fields.len())).collect();
    for (f, col) in fields.iter().zip(columns) {
        let Some((len, offset, validity, data, offsets)) = col else {
            rows.iter_mut().for_each(|r| r.push(Value::Null));
            continue;
        };
        let (len, offset) = (*len, *offset);
        if len != n {
            return Err(format!("column {}: {len} values for {n} rows", f.text));
        }
        let bad = || format!("column {}: buffers too short for {len} values", f.text);
        let bit = |buf: &[u8], i: usize| buf.get(i / 8).map(|b| b >> (i % 8) & 1 == 1);
        let word = |i: usize| -> Option<[u8; 8]> { data.get(i * 8..i * 8 + 8)?.try_into().ok() };
        let off = |i: usize| -> Option<usize> {
            let b: [u8; 8] = offsets.as_ref()?.get(i * 8..i * 8 + 8)?.try_into().ok()?;
            usize::try_from(i64::from_le_bytes(b)).ok()
        };
        for (i, row) in rows.iter_mut().enumerate() {
            let at = offset + i;
            if let Some(v) = validity
                && !bit(v, at).ok_or_else(bad)?
            {
                row.push(Value::Null);
                continue;
            }
            row.push(match f.ty {
                FieldType::U64 => Value::U64(u64::from_le_bytes(word(at).ok_or_else(bad)?)),
                FieldType::I64 => Value::I64(i64::from_le_bytes(word(at).ok_or_else(bad)?)),
                FieldType::F64 => Value::F64(f64::from_le_bytes(word(at).ok_or_else(bad)?)),
                FieldType::Bool => Value::Bool(bit(data, at).ok_or_else(bad)?),
                FieldType::Str | FieldType::Bytes => {
                    let (s, e) = (off(at).ok_or_else(bad)?, off(at + 1).ok_or_else(bad)?);
                    let b = data.get(s..e).ok_or_else(bad)?.to_vec();
                    if f.ty == FieldType::Bytes {
                        Value::Bytes(b)
                    } else {
                        Value::Str(
                            String::from_utf8(b).map_err(|_| format!("column {}: invalid UTF-8 at row {i}", f.text))?,
                        )
                    }
                }
            });
        }
    }
    Ok(rows)
}

/// The rows of a `pyarrow.Table` (or `RecordBatch`), columns matched to fields by name;
/// the decoding runs with the GIL released.
pub fn rows_from_arrow(py: Python<'_>, table: &Bound<'_, PyAny>, fields: &[FieldSpec]) -> PyResult<Vec<Vec<Value>>> {
    let (n, cols) = arrow_columns(py, table, fields, false)?;
    py.detach(|| decode_rows(n, &cols, fields))
        .map_err(|m| errors::schema(py, m))
}

/// A `pyarrow.Table` of `rows`.
pub fn arrow_from_rows<'py>(py: Python<'py>, rows: &[Vec<Value>], fields: &[FieldSpec]) -> PyResult<Bound<'py, PyAny>> {
    for row in rows {
        crate::convert::same_width(py, row, fields)?;
    }
    let names = PyList::empty(py);
    let cols = PyList::empty(py);
    for (c, f) in fields.iter().enumerate() {
        let n = rows.len();
        let mut validity = vec![0u8; n.div_ceil(8)];
        let mut nulls = 0usize;
        let mut data: Vec<u8> = Vec::new();
        let mut offsets: Vec<u8> = Vec::new();
        let var = matches!(f.ty, FieldType::Str | FieldType::Bytes);
        if var {
            offsets.extend_from_slice(&0i64.to_le_bytes());
        }
        if f.ty == FieldType::Bool {
            data = vec![0u8; n.div_ceil(8)];
        }
        for (i, row) in rows.iter().enumerate() {
            let v = &row[c];
            if v.is_null() {
                nulls += 1;
            } else {
                validity[i / 8] |= 1 << (i % 8);
            }
            match (f.ty, v) {
                (FieldType::U64, Value::U64(x)) => data.extend_from_slice(&x.to_le_bytes()),
                (FieldType::I64, Value::I64(x)) => data.extend_from_slice(&x.to_le_bytes()),
                (FieldType::F64, Value::F64(x)) => data.extend_from_slice(&x.to_le_bytes()),
                (FieldType::Bool, Value::Bool(true)) => data[i / 8] |= 1 << (i % 8),
                (FieldType::Str, Value::Str(s)) => data.extend_from_slice(s.as_bytes()),
                (FieldType::Bytes, Value::Bytes(b)) => data.extend_from_slice(b),
                (FieldType::U64 | FieldType::I64 | FieldType::F64, Value::Null) => data.extend_from_slice(&[0; 8]),
                (FieldType::Bool, Value::Bool(false)) | (_, Value::Null) => {}
                (_, v) => {
                    return Err(crate::convert::redefined(
                        py,
                        format!("stored value {v:?} does not fit field {:?}", f.text),
                    ));
                }
            }
            if var {
                offsets.extend_from_slice(&(data.len() as i64).to_le_bytes());
            }
        }
        names.append(f.text.as_str())?;
        let validity = (nulls > 0).then(|| PyBytes::new(py, &validity));
        let offsets = var.then(|| PyBytes::new(py, &offsets));
        cols.append(PyTuple::new(
            py,
            [
                kind(f.ty).into_pyobject(py)?.into_any(),
                n.into_pyobject(py)?.into_any(),
                validity.into_pyobject(py)?.into_any(),
                PyBytes::new(py, &data).into_any(),
                offsets.into_pyobject(py)?.into_any(),
            ],
        )?)?;
    }
    py.import("strata._arrow")?
        .call_method1("table_from_columns", (names, cols))
}
