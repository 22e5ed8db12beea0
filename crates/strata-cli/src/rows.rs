//! How table values cross the command line: text (arguments, CSV cells) and JSON in,
//! JSON objects and TSV lines out.
//!
//! Text, per field type: `u64` / `i64` decimal integers, `f64` anything Rust parses as a
//! float (`1.5`, `-2e10`, `inf`, `NaN`), `bool` `true` / `false` / `1` / `0` (any case),
//! `str` taken as is, `bytes` hex digits (optional `0x`). NULL (nullable fields only) is
//! `null` or `\N` in arguments, and an empty cell or `\N` in CSV (where `null` also
//! stands for NULL in fields that are not strings). A non-nullable `str` field takes
//! every spelling literally.
//!
//! JSON, per field type: numbers for `u64` / `i64` / `f64` (an `f64` also takes the
//! strings `"NaN"`, `"inf"`, `"-inf"`, which JSON numbers cannot spell), strings for
//! `str`, hex strings for `bytes`, `true` / `false` for `bool`, `null` for NULL.
//!
//! Output: JSON objects with the fields in schema order (bytes as hex strings, floats
//! that JSON cannot hold as the strings above); TSV with `\N` for NULL, strings escaped
//! as in key-value output (so each row stays on one line), bytes as hex.

use strata::table::schema::{Field, FieldType, Schema};
use strata::table::value::Value;

use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::bytes::{escape, parse_hex, to_hex};

/// Where a text value comes from (decides how NULL is spelled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextSource {
    /// A command-line argument: `null` or `\N` is NULL.
    Arg,
    /// A CSV cell: an empty cell or `\N` is NULL; so is `null` outside strings.
    Csv,
}

/// The value `text` stands for in `field`. The error names the field and its type.
pub fn parse_text(field: &Field, text: &str, src: TextSource) -> Result<Value, String> {
    let null_spelling = match src {
        TextSource::Arg => text == "null" || text == "\\N",
        TextSource::Csv => text.is_empty() || text == "\\N" || (text == "null" && field.ty != FieldType::Str),
    };
    if null_spelling {
        if field.nullable {
            return Ok(Value::Null);
        }
        // A non-nullable string takes any text; so do bytes for an empty CSV cell.
        let literal = field.ty == FieldType::Str || (field.ty == FieldType::Bytes && text.is_empty());
        if !literal {
            return Err(format!(
                "field '{}' ({}) is not nullable, got {}",
                field.name,
                field.ty,
                if text.is_empty() {
                    "an empty value".to_string()
                } else {
                    text.to_string()
                }
            ));
        }
    }
    let bad = |why: &str| format!("field '{}' expects {}, got {}{why}", field.name, field.ty, quote(text));
    let t = text.trim();
    match field.ty {
        FieldType::U64 => t.parse().map(Value::U64).map_err(|e| bad(&format!(" ({e})"))),
        FieldType::I64 => t.parse().map(Value::I64).map_err(|e| bad(&format!(" ({e})"))),
        FieldType::F64 => t.parse().map(Value::F64).map_err(|_| bad("")),
        FieldType::Bool => match t.to_ascii_lowercase().as_str() {
            "true" | "1" => Ok(Value::Bool(true)),
            "false" | "0" => Ok(Value::Bool(false)),
            _ => Err(bad(" (use true, false, 1 or 0)")),
        },
        FieldType::Str => Ok(Value::Str(text.to_string())),
        FieldType::Bytes => parse_hex(t).map(Value::Bytes).map_err(|e| bad(&format!(" ({e})"))),
    }
}

/// `text` quoted for an error message (shortened when long).
fn quote(text: &str) -> String {
    format!("\"{}\"", shorten(&escape(text.as_bytes())))
}

/// `text`, cut after 40 characters.
fn shorten(text: &str) -> String {
    const MAX: usize = 40;
    if text.chars().count() > MAX {
        let head: String = text.chars().take(MAX).collect();
        format!("{head}...")
    } else {
        text.to_string()
    }
}

/// The value a JSON value stands for in `field`. The error names the field and its type.
pub fn from_json(field: &Field, j: &serde_json::Value) -> Result<Value, String> {
    use serde_json::Value as J;
    if j.is_null() {
        return if field.nullable {
            Ok(Value::Null)
        } else {
            Err(format!(
                "field '{}' ({}) is not nullable, got null",
                field.name, field.ty
            ))
        };
    }
    let bad = |why: &str| {
        format!(
            "field '{}' expects {}, got {} {}{why}",
            field.name,
            field.ty,
            json_kind(j),
            shorten(&j.to_string())
        )
    };
    match (field.ty, j) {
        (FieldType::U64, J::Number(n)) => n.as_u64().map(Value::U64).ok_or_else(|| bad(" (not a u64)")),
        (FieldType::I64, J::Number(n)) => n.as_i64().map(Value::I64).ok_or_else(|| bad(" (not an i64)")),
        (FieldType::F64, J::Number(n)) => n.as_f64().map(Value::F64).ok_or_else(|| bad("")),
        (FieldType::F64, J::String(s)) => match s.as_str() {
            "NaN" | "nan" => Ok(Value::F64(f64::NAN)),
            "inf" | "+inf" | "Infinity" => Ok(Value::F64(f64::INFINITY)),
            "-inf" | "-Infinity" => Ok(Value::F64(f64::NEG_INFINITY)),
            _ => Err(bad(" (only \"NaN\", \"inf\" and \"-inf\" may be strings)")),
        },
        (FieldType::Str, J::String(s)) => Ok(Value::Str(s.clone())),
        (FieldType::Bytes, J::String(s)) => parse_hex(s).map(Value::Bytes).map_err(|e| bad(&format!(" ({e})"))),
        (FieldType::Bool, J::Bool(b)) => Ok(Value::Bool(*b)),
        _ => Err(bad("")),
    }
}

fn json_kind(j: &serde_json::Value) -> &'static str {
    use serde_json::Value as J;
    match j {
        J::Null => "null",
        J::Bool(_) => "boolean",
        J::Number(_) => "number",
        J::String(_) => "string",
        J::Array(_) => "array",
        J::Object(_) => "object",
    }
}

/// A row (in field order) from a JSON object: missing nullable fields are NULL.
pub fn row_from_json_object(
    schema: &Schema,
    obj: &serde_json::Map<String, serde_json::Value>,
) -> Result<Vec<Value>, String> {
    let mut row: Vec<Option<Value>> = vec![None; schema.fields.len()];
    for (name, j) in obj {
        let Some(pos) = schema.field_position(name) else {
            return Err(format!(
                "unknown field '{name}' (fields of table {}: {})",
                schema.name,
                field_names(schema)
            ));
        };
        row[pos] = Some(from_json(&schema.fields[pos], j)?);
    }
    schema
        .fields
        .iter()
        .zip(row)
        .map(|(f, v)| match v {
            Some(v) => Ok(v),
            None if f.nullable => Ok(Value::Null),
            None => Err(format!("field '{}' ({}) is missing and not nullable", f.name, f.ty)),
        })
        .collect()
}

/// A row from one line of JSON text that must hold an object.
pub fn row_from_json_text(schema: &Schema, text: &str) -> Result<Vec<Value>, String> {
    let j: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    match j {
        serde_json::Value::Object(obj) => row_from_json_object(schema, &obj),
        other => Err(format!("expected a JSON object, got {}", json_kind(&other))),
    }
}

/// The field names of `schema`, comma-separated.
pub fn field_names(schema: &Schema) -> String {
    let names: Vec<&str> = schema.fields.iter().map(|f| f.name.as_str()).collect();
    names.join(", ")
}

/// A value as JSON: non-finite floats as the strings `"NaN"`, `"inf"`, `"-inf"` (which
/// [`from_json`] reads back), bytes as a hex string.
struct JsonValue<'a>(&'a Value);

impl Serialize for JsonValue<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Null => s.serialize_none(),
            Value::U64(n) => s.serialize_u64(*n),
            Value::I64(n) => s.serialize_i64(*n),
            Value::F64(f) if f.is_nan() => s.serialize_str("NaN"),
            Value::F64(f) if f.is_infinite() => s.serialize_str(if *f > 0.0 { "inf" } else { "-inf" }),
            Value::F64(f) => s.serialize_f64(*f),
            Value::Str(v) => s.serialize_str(v),
            Value::Bytes(b) => s.serialize_str(&to_hex(b)),
            Value::Bool(b) => s.serialize_bool(*b),
        }
    }
}

/// A row as a JSON object, fields in schema order.
struct JsonRow<'a>(&'a Schema, &'a [Value]);

impl Serialize for JsonRow<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.1.len()))?;
        for (f, v) in self.0.fields.iter().zip(self.1) {
            m.serialize_entry(&f.name, &JsonValue(v))?;
        }
        m.end()
    }
}

/// A row as one JSON object, fields in schema order.
pub fn row_json(schema: &Schema, row: &[Value]) -> String {
    // Serializing to a string fails only for maps with non-string keys: never here.
    serde_json::to_string(&JsonRow(schema, row)).unwrap_or_default()
}

/// One value as a TSV cell.
pub fn value_tsv(v: &Value) -> String {
    match v {
        Value::Null => "\\N".into(),
        Value::U64(n) => n.to_string(),
        Value::I64(n) => n.to_string(),
        Value::F64(f) => format!("{f:?}"),
        Value::Str(s) => escape(s.as_bytes()),
        Value::Bytes(b) => to_hex(b),
        Value::Bool(b) => b.to_string(),
    }
}

/// A row as one TSV line (without the newline).
pub fn row_tsv(row: &[Value]) -> String {
    let cells: Vec<String> = row.iter().map(value_tsv).collect();
    cells.join("\t")
}

/// The TSV header line: the field names.
pub fn header_tsv(schema: &Schema) -> String {
    let names: Vec<&str> = schema.fields.iter().map(|f| f.name.as_str()).collect();
    names.join("\t")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(ty: FieldType, nullable: bool) -> Field {
        Field {
            name: "f".into(),
            ty,
            nullable,
        }
    }

    #[test]
    fn text_values_by_type() {
        let p = |ty, s| parse_text(&field(ty, false), s, TextSource::Arg);
        assert_eq!(p(FieldType::U64, "42"), Ok(Value::U64(42)));
        assert_eq!(p(FieldType::I64, "-7"), Ok(Value::I64(-7)));
        assert_eq!(p(FieldType::F64, "1.5"), Ok(Value::F64(1.5)));
        assert!(matches!(p(FieldType::F64, "NaN"), Ok(Value::F64(f)) if f.is_nan()));
        assert_eq!(p(FieldType::Bool, "1"), Ok(Value::Bool(true)));
        assert_eq!(p(FieldType::Bool, "FALSE"), Ok(Value::Bool(false)));
        assert_eq!(p(FieldType::Str, " a,b "), Ok(Value::Str(" a,b ".into())));
        assert_eq!(p(FieldType::Bytes, "0x00ff"), Ok(Value::Bytes(vec![0, 255])));
        // A non-nullable string takes "null" literally.
        assert_eq!(p(FieldType::Str, "null"), Ok(Value::Str("null".into())));
    }

    #[test]
    fn text_errors_name_field_and_type() {
        let e = parse_text(&field(FieldType::U64, false), "-1", TextSource::Arg).unwrap_err();
        assert!(e.starts_with("field 'f' expects u64, got \"-1\""), "{e}");
        let e = parse_text(&field(FieldType::Bool, false), "yes", TextSource::Arg).unwrap_err();
        assert!(e.contains("expects bool"), "{e}");
        let e = parse_text(&field(FieldType::Bytes, false), "abc", TextSource::Arg).unwrap_err();
        assert!(e.contains("odd number"), "{e}");
        let e = parse_text(&field(FieldType::I64, false), "null", TextSource::Arg).unwrap_err();
        assert!(e.contains("not nullable"), "{e}");
        let e = parse_text(&field(FieldType::I64, false), "", TextSource::Csv).unwrap_err();
        assert!(e.contains("not nullable, got an empty value"), "{e}");
    }

    #[test]
    fn null_spellings() {
        for ty in FieldType::ALL {
            let f = field(ty, true);
            assert_eq!(parse_text(&f, "null", TextSource::Arg), Ok(Value::Null));
            assert_eq!(parse_text(&f, "\\N", TextSource::Arg), Ok(Value::Null));
            assert_eq!(parse_text(&f, "", TextSource::Csv), Ok(Value::Null));
            assert_eq!(parse_text(&f, "\\N", TextSource::Csv), Ok(Value::Null));
        }
        let s = field(FieldType::Str, true);
        assert_eq!(parse_text(&s, "null", TextSource::Csv), Ok(Value::Str("null".into())));
        let s = field(FieldType::Str, false);
        assert_eq!(parse_text(&s, "", TextSource::Csv), Ok(Value::Str(String::new())));
        let b = field(FieldType::Bytes, false);
        assert_eq!(parse_text(&b, "", TextSource::Csv), Ok(Value::Bytes(vec![])));
    }

    #[test]
    fn json_values_round_trip() {
        let vals = [
            (FieldType::U64, Value::U64(u64::MAX)),
            (FieldType::I64, Value::I64(i64::MIN)),
            (FieldType::F64, Value::F64(-0.25)),
            (FieldType::F64, Value::F64(1e300)),
            (FieldType::F64, Value::F64(f64::INFINITY)),
            (FieldType::F64, Value::F64(f64::NEG_INFINITY)),
            (FieldType::Str, Value::Str("a\"b\\c\n日本".into())),
            (FieldType::Bytes, Value::Bytes(vec![0, 1, 254])),
            (FieldType::Bool, Value::Bool(true)),
        ];
        for (ty, v) in vals {
            let j: serde_json::Value = serde_json::to_value(JsonValue(&v)).unwrap();
            assert_eq!(from_json(&field(ty, false), &j), Ok(v.clone()), "{v}");
        }
        let j: serde_json::Value = serde_json::to_value(JsonValue(&Value::F64(f64::NAN))).unwrap();
        assert!(matches!(from_json(&field(FieldType::F64, false), &j), Ok(Value::F64(f)) if f.is_nan()));
        assert_eq!(serde_json::to_string(&JsonValue(&Value::F64(2.0))).unwrap(), "2.0");
    }

    #[test]
    fn json_type_errors() {
        let j = serde_json::json!("5");
        let e = from_json(&field(FieldType::U64, false), &j).unwrap_err();
        assert!(e.starts_with("field 'f' expects u64, got string \"5\""), "{e}");
        let e = from_json(&field(FieldType::U64, false), &serde_json::json!(-1)).unwrap_err();
        assert!(e.contains("not a u64"), "{e}");
        let e = from_json(&field(FieldType::I64, false), &serde_json::json!(1.5)).unwrap_err();
        assert!(e.contains("expects i64"), "{e}");
        let e = from_json(&field(FieldType::Bool, false), &serde_json::Value::Null).unwrap_err();
        assert!(e.contains("not nullable"), "{e}");
    }

    #[test]
    fn rows_from_json_objects() {
        let s = Schema::parse("table t (id u64, name str, note str null) primary key (id)").unwrap();
        assert_eq!(
            row_from_json_text(&s, r#"{"name":"x","id":3}"#),
            Ok(vec![Value::U64(3), Value::Str("x".into()), Value::Null])
        );
        let e = row_from_json_text(&s, r#"{"id":3}"#).unwrap_err();
        assert!(e.contains("field 'name' (str) is missing"), "{e}");
        let e = row_from_json_text(&s, r#"{"id":3,"name":"x","zz":1}"#).unwrap_err();
        assert!(e.contains("unknown field 'zz'") && e.contains("id, name, note"), "{e}");
        assert!(
            row_from_json_text(&s, "[1]")
                .unwrap_err()
                .contains("expected a JSON object")
        );
        assert!(row_from_json_text(&s, "{").unwrap_err().starts_with("invalid JSON"));
        let row = vec![Value::U64(3), Value::Str("x\ty".into()), Value::Null];
        assert_eq!(row_json(&s, &row), r#"{"id":3,"name":"x\ty","note":null}"#);
        assert_eq!(row_tsv(&row), "3\tx\\ty\t\\N");
        assert_eq!(header_tsv(&s), "id\tname\tnote");
    }
}
