//! The text form of a [`Schema`]: [`Schema::parse`] and `Display`, used by the CLI.

use std::fmt;

use super::{Culprit, FieldType, IndexDef, IndexMaintenance, Schema, check_name};
use crate::error::{Error, Result};

impl Schema {
    /// Parses the text form used by the CLI.
    ///
    /// Grammar (keywords and type names are case-insensitive, names are case-sensitive,
    /// tokens are separated by whitespace, `(`, `)` and `,`):
    ///
    /// ```text
    /// table NAME ( FIELD TYPE [null] {, FIELD TYPE [null]} )
    ///   primary key ( FIELD {, FIELD} )
    ///   { index NAME [unique] ( FIELD {, FIELD} ) }
    ///   [delete key ( FIELD )]
    ///   [eager | deferred]
    /// ```
    ///
    /// `TYPE` is one of `u64`, `i64`, `f64`, `str`, `bytes`, `bool`; `null` makes the
    /// field nullable. The maintenance mode defaults to `deferred`. Example:
    ///
    /// ```text
    /// table users (id u64, name str, email str null, age i64, score f64, active bool,
    ///   photo bytes null) primary key (id) index by_email unique (email)
    ///   index by_age (age, name) deferred
    /// ```
    ///
    /// `Display` of a [`Schema`] prints this form on one line, and parsing it gives the
    /// schema back.
    ///
    /// ```
    /// use strata::table::schema::{IndexMaintenance, Schema};
    /// let s = Schema::parse(
    ///     "table users (id u64, name str, email str null, age i64, score f64, active bool, \
    ///      photo bytes null) primary key (id) index by_email unique (email) \
    ///      index by_age (age, name) deferred",
    /// )?;
    /// assert_eq!(s.fields.len(), 7);
    /// assert_eq!(s.index("by_age").map(|i| i.fields.clone()), Some(vec!["age".into(), "name".into()]));
    /// assert_eq!(s.maintenance, IndexMaintenance::Deferred);
    /// let err = Schema::parse("table t (a u32) primary key (a)").unwrap_err().to_string();
    /// assert!(err.contains("at position 12, found 'u32'"), "{err}");
    /// # Ok::<(), strata::Error>(())
    /// ```
    ///
    /// Errors: [`Error::InvalidArgument`] naming the offending token and its position
    /// (1-based character index into `text`), including every rule of
    /// [`Schema::validate`].
    pub fn parse(text: &str) -> Result<Schema> {
        Parser::new(text)?.schema()
    }
}

/// Prints the one-line text form accepted by [`Schema::parse`].
impl fmt::Display for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "table {} (", self.name)?;
        for (i, fd) in self.fields.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{} {}", fd.name, fd.ty)?;
            if fd.nullable {
                f.write_str(" null")?;
            }
        }
        write!(f, ") primary key ({})", self.primary_key.join(", "))?;
        for i in &self.indexes {
            write!(f, " index {}", i.name)?;
            if i.unique {
                f.write_str(" unique")?;
            }
            write!(f, " ({})", i.fields.join(", "))?;
        }
        if let Some(dk) = &self.delete_key {
            write!(f, " delete key ({dk})")?;
        }
        write!(f, " {}", self.maintenance)
    }
}

// ---------------------------------------------------------------------------------------
// Text parser.

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Open,
    Close,
    Comma,
    End,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Word(w) => write!(f, "'{w}'"),
            Tok::Open => f.write_str("'('"),
            Tok::Close => f.write_str("')'"),
            Tok::Comma => f.write_str("','"),
            Tok::End => f.write_str("end of text"),
        }
    }
}

/// Token positions of each part of the definition, to report validation errors.
#[derive(Default)]
struct Positions {
    table: usize,
    fields: Vec<usize>,
    pk: Vec<usize>,
    indexes: Vec<usize>,
    index_fields: Vec<Vec<usize>>,
    delete_key: Option<usize>,
}

struct Parser {
    /// Tokens with their 1-based character position.
    toks: Vec<(Tok, usize)>,
    next: usize,
}

fn parse_err(msg: String) -> Error {
    Error::InvalidArgument(format!("schema text: {msg}"))
}

impl Parser {
    fn new(text: &str) -> Result<Parser> {
        let mut toks = Vec::new();
        let mut chars = text.chars().enumerate().peekable();
        while let Some((i, c)) = chars.next() {
            let pos = i + 1;
            match c {
                '(' => toks.push((Tok::Open, pos)),
                ')' => toks.push((Tok::Close, pos)),
                ',' => toks.push((Tok::Comma, pos)),
                c if c.is_whitespace() => {}
                c if c.is_ascii_alphanumeric() || c == '_' => {
                    let mut w = String::from(c);
                    while let Some(&(_, c)) = chars.peek() {
                        if c.is_ascii_alphanumeric() || c == '_' {
                            w.push(c);
                            chars.next();
                        } else {
                            break;
                        }
                    }
                    toks.push((Tok::Word(w), pos));
                }
                c => return Err(parse_err(format!("unexpected character {c:?} at position {pos}"))),
            }
        }
        let end = text.chars().count() + 1;
        toks.push((Tok::End, end));
        Ok(Parser { toks, next: 0 })
    }

    fn peek(&self) -> (&Tok, usize) {
        match self.toks.get(self.next) {
            Some((t, p)) => (t, *p),
            None => (&Tok::End, self.toks.last().map_or(1, |t| t.1)),
        }
    }

    fn bump(&mut self) -> (Tok, usize) {
        let (t, p) = self.peek();
        let t = t.clone();
        if self.next < self.toks.len() {
            self.next += 1;
        }
        (t, p)
    }

    fn unexpected<T>(&self, expected: &str) -> Result<T> {
        let (t, p) = self.peek();
        Err(parse_err(format!("expected {expected} at position {p}, found {t}")))
    }

    fn peek_keyword(&self, kw: &str) -> bool {
        matches!(self.peek().0, Tok::Word(w) if w.eq_ignore_ascii_case(kw))
    }

    fn keyword(&mut self, kw: &str) -> Result<()> {
        if self.peek_keyword(kw) {
            self.bump();
            Ok(())
        } else {
            self.unexpected(&format!("'{kw}'"))
        }
    }

    fn punct(&mut self, want: Tok) -> Result<()> {
        if *self.peek().0 == want {
            self.bump();
            Ok(())
        } else {
            self.unexpected(&want.to_string())
        }
    }

    fn name(&mut self, what: &str) -> Result<(String, usize)> {
        match self.peek() {
            (Tok::Word(w), p) => {
                let w = w.clone();
                check_name(what, &w).map_err(|m| parse_err(format!("{m} at position {p}")))?;
                self.bump();
                Ok((w, p))
            }
            _ => self.unexpected(&format!("{what} name")),
        }
    }

    /// `( NAME {, NAME} )`
    fn name_list(&mut self) -> Result<(Vec<String>, Vec<usize>)> {
        self.punct(Tok::Open)?;
        let mut names = Vec::new();
        let mut positions = Vec::new();
        loop {
            let (n, p) = self.name("field")?;
            names.push(n);
            positions.push(p);
            match self.peek().0 {
                Tok::Comma => {
                    self.bump();
                }
                Tok::Close => {
                    self.bump();
                    return Ok((names, positions));
                }
                _ => return self.unexpected("',' or ')'"),
            }
        }
    }

    fn schema(mut self) -> Result<Schema> {
        let mut pos = Positions::default();
        self.keyword("table")?;
        let (table, p) = self.name("table")?;
        pos.table = p;
        let mut b = Schema::builder(&table);
        self.punct(Tok::Open)?;
        loop {
            let (fname, p) = self.name("field")?;
            pos.fields.push(p);
            let ty = match self.peek() {
                (Tok::Word(w), _) if FieldType::from_name(w).is_some() => {
                    let ty = FieldType::from_name(w);
                    self.bump();
                    ty
                }
                _ => None,
            };
            let Some(ty) = ty else {
                return self.unexpected("a type (u64, i64, f64, str, bytes, bool)");
            };
            b = if self.peek_keyword("null") {
                self.bump();
                b.nullable_field(&fname, ty)
            } else {
                b.field(&fname, ty)
            };
            match self.peek().0 {
                Tok::Comma => {
                    self.bump();
                }
                Tok::Close => {
                    self.bump();
                    break;
                }
                _ => return self.unexpected("'null', ',' or ')'"),
            }
        }
        self.keyword("primary")?;
        self.keyword("key")?;
        let (pk, pk_pos) = self.name_list()?;
        b.schema.primary_key = pk;
        pos.pk = pk_pos;
        while self.peek_keyword("index") {
            self.bump();
            let (iname, p) = self.name("index")?;
            let unique = self.peek_keyword("unique");
            if unique {
                self.bump();
            }
            let (fields, fpos) = self.name_list()?;
            b.schema.indexes.push(IndexDef {
                name: iname,
                fields,
                unique,
            });
            pos.indexes.push(p);
            pos.index_fields.push(fpos);
        }
        if self.peek_keyword("delete") {
            self.bump();
            self.keyword("key")?;
            let (names, p) = self.name_list()?;
            if names.len() != 1 {
                return Err(parse_err(format!(
                    "a delete key is one field, {} given at position {}",
                    names.len(),
                    p.first().copied().unwrap_or(0)
                )));
            }
            b.schema.delete_key = names.into_iter().next();
            pos.delete_key = p.first().copied();
        }
        if self.peek_keyword("eager") {
            self.bump();
            b.schema.maintenance = IndexMaintenance::Eager;
        } else if self.peek_keyword("deferred") {
            self.bump();
            b.schema.maintenance = IndexMaintenance::Deferred;
        }
        if *self.peek().0 != Tok::End {
            return self.unexpected("'index', 'delete key', 'eager', 'deferred' or end of text");
        }
        let schema = b.schema;
        schema.check().map_err(|e| {
            let p = match e.at {
                Culprit::Table => Some(pos.table),
                Culprit::Field(i) => pos.fields.get(i).copied(),
                Culprit::PkField(i) => pos.pk.get(i).copied(),
                Culprit::Index(i) => pos.indexes.get(i).copied(),
                Culprit::IndexField(i, j) => pos.index_fields.get(i).and_then(|v| v.get(j)).copied(),
                Culprit::DeleteKey => pos.delete_key,
            };
            match p {
                Some(p) => parse_err(format!("{} (at position {p})", e.msg)),
                None => parse_err(e.msg),
            }
        })?;
        Ok(schema)
    }
}
