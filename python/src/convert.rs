//! Python values to engine values and back: keys and values of the key-value API, and
//! table cells.
//!
//! Keys and values are `bytes`, `bytearray` or `str` (encoded as UTF-8) on the way in and
//! always `bytes` on the way out. Table cells follow the field's type: `u64`/`i64` take
//! `int` (not `bool`), `f64` takes `float` or `int`, `str` takes `str`, `bytes` takes
//! `bytes` or `bytearray`, `bool` takes `bool`, and `None` is null.

use std::borrow::Cow;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyMapping, PySequence, PyString, PyTuple,
};
use strata::table::schema::FieldType;
use strata::table::value::Value;

use crate::errors;

/// The bytes of a key or value argument, borrowed when it is `bytes` or `str`.
pub fn bytes_arg<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(b.as_bytes()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Cow::Borrowed(s.to_str()?.as_bytes()));
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(Cow::Owned(b.to_vec()));
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be bytes, bytearray or str, not {}",
        type_name(obj)
    )))
}

/// An optional scan bound (`None` = unbounded).
pub fn bound_arg(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Vec<u8>>> {
    match obj {
        Some(o) if !o.is_none() => Ok(Some(bytes_arg(o, what)?.into_owned())),
        _ => Ok(None),
    }
}

pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// One field as the conversions need it.
pub struct FieldSpec {
    pub name: Py<PyString>,
    pub text: String,
    pub ty: FieldType,
    pub nullable: bool,
}

/// A Python value for a cell of `field`.
pub fn to_value(py: Python<'_>, obj: &Bound<'_, PyAny>, field: &FieldSpec) -> PyResult<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    let bad = || {
        errors::schema(
            py,
            format!(
                "field {}: expected {}, got {} {}",
                field.text,
                field.ty.name(),
                type_name(obj),
                obj.repr().map(|r| r.to_string()).unwrap_or_default()
            ),
        )
    };
    let is_int = obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>();
    Ok(match field.ty {
        FieldType::U64 if is_int => Value::U64(obj.extract::<u64>().map_err(|_| bad())?),
        FieldType::I64 if is_int => Value::I64(obj.extract::<i64>().map_err(|_| bad())?),
        FieldType::F64 if is_int || obj.is_instance_of::<PyFloat>() => {
            Value::F64(obj.extract::<f64>().map_err(|_| bad())?)
        }
        FieldType::Str => match obj.cast::<PyString>() {
            Ok(s) => Value::Str(s.to_str()?.to_owned()),
            Err(_) => return Err(bad()),
        },
        FieldType::Bytes => {
            if let Ok(b) = obj.cast::<PyBytes>() {
                Value::Bytes(b.as_bytes().to_vec())
            } else if let Ok(b) = obj.cast::<PyByteArray>() {
                Value::Bytes(b.to_vec())
            } else {
                return Err(bad());
            }
        }
        FieldType::Bool => match obj.cast::<PyBool>() {
            Ok(b) => Value::Bool(b.is_true()),
            Err(_) => return Err(bad()),
        },
        _ => return Err(bad()),
    })
}

/// The Python object of a cell.
pub fn from_value<'py>(py: Python<'py>, v: &Value) -> Bound<'py, PyAny> {
    match v {
        Value::Null => py.None().into_bound(py),
        Value::U64(x) => PyInt::new(py, *x).into_any(),
        Value::I64(x) => PyInt::new(py, *x).into_any(),
        Value::F64(x) => PyFloat::new(py, *x).into_any(),
        Value::Str(s) => PyString::new(py, s).into_any(),
        Value::Bytes(b) => PyBytes::new(py, b).into_any(),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
    }
}

/// A row from a `dict` (by field name; absent nullable fields are null) or a sequence
/// (in field order).
pub fn to_row(py: Python<'_>, obj: &Bound<'_, PyAny>, fields: &[FieldSpec]) -> PyResult<Vec<Value>> {
    if let Some(d) = as_dict(obj)? {
        let d = &d;
        let mut row = Vec::with_capacity(fields.len());
        let mut used = 0;
        for f in fields {
            match d.get_item(f.name.bind(py))? {
                Some(v) => {
                    used += 1;
                    row.push(to_value(py, &v, f)?);
                }
                None if f.nullable => row.push(Value::Null),
                None => return Err(errors::schema(py, format!("missing field {}", f.text))),
            }
        }
        if used != d.len() {
            let known: Vec<&str> = fields.iter().map(|f| f.text.as_str()).collect();
            for k in d.keys() {
                let name = k.str()?.to_string();
                if !known.contains(&name.as_str()) {
                    return Err(errors::schema(py, format!("unknown field {name:?}")));
                }
            }
        }
        return Ok(row);
    }
    let items = sequence(obj, "a row")?;
    if items.len() != fields.len() {
        return Err(errors::schema(
            py,
            format!("row has {} values, the table {} fields", items.len(), fields.len()),
        ));
    }
    items.iter().zip(fields).map(|(v, f)| to_value(py, v, f)).collect()
}

/// A row as a `dict` keyed by field name.
pub fn row_to_dict<'py>(py: Python<'py>, row: &[Value], fields: &[FieldSpec]) -> PyResult<Bound<'py, PyDict>> {
    same_width(py, row, fields)?;
    let d = PyDict::new(py);
    for (v, f) in row.iter().zip(fields) {
        d.set_item(f.name.bind(py), from_value(py, v))?;
    }
    Ok(d)
}

/// `SchemaError`: a stored row does not match this handle's schema (`why`).
pub fn redefined(py: Python<'_>, why: String) -> PyErr {
    errors::schema(py, format!("{why}: the table was redefined; open it again"))
}

/// `row` has as many values as this handle knows fields, or the table was redefined.
pub fn same_width(py: Python<'_>, row: &[Value], fields: &[FieldSpec]) -> PyResult<()> {
    if row.len() == fields.len() {
        return Ok(());
    }
    let why = format!(
        "stored row has {} fields, this handle knows {}",
        row.len(),
        fields.len()
    );
    Err(redefined(py, why))
}

/// Key values (of a primary key or an index prefix): a scalar for a one-field key, or a
/// tuple or list of values.
pub fn key_values(py: Python<'_>, obj: &Bound<'_, PyAny>, fields: &[&FieldSpec], what: &str) -> PyResult<Vec<Value>> {
    let items: Vec<Bound<'_, PyAny>> = if obj.is_instance_of::<PyTuple>() || obj.is_instance_of::<PyList>() {
        sequence(obj, what)?
    } else {
        vec![obj.clone()]
    };
    if items.len() > fields.len() {
        return Err(errors::invalid(
            py,
            format!("{what} has {} values, the key {} fields", items.len(), fields.len()),
        ));
    }
    items.iter().zip(fields).map(|(v, f)| to_value(py, v, f)).collect()
}

fn sequence<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if let Ok(t) = obj.cast::<PyTuple>() {
        return Ok(t.iter().collect());
    }
    if let Ok(l) = obj.cast::<PyList>() {
        return Ok(l.iter().collect());
    }
    // Any other sequence but text and bytes, whose items would be characters.
    let text =
        obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() || obj.is_instance_of::<PyByteArray>();
    if !text && let Ok(seq) = obj.cast::<PySequence>() {
        return seq.try_iter()?.collect();
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be a mapping (a dict) or a sequence (a tuple or list), not {}",
        type_name(obj)
    )))
}

/// `obj` as a dict when it is a mapping: itself when a `dict`, else a copy of its
/// items (a `MappingProxyType`, a `UserDict`, any `collections.abc.Mapping`); `None`
/// when it is not a mapping.
pub fn as_dict<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyDict>>> {
    if let Ok(d) = obj.cast::<PyDict>() {
        return Ok(Some(d.clone()));
    }
    let Ok(m) = obj.cast::<PyMapping>() else {
        return Ok(None);
    };
    let d = PyDict::new(obj.py());
    d.update(m)?;
    Ok(Some(d))
}
