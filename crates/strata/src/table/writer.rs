//! Building a table's files outside any database, for [`Table::ingest`](super::Table::ingest):
//! from rows in primary-key order, one external SSTable for the primary keyspace and one
//! per secondary index, consistent by construction (every row's index entries come from
//! the row itself).
//!
//! Output directory (it must not exist yet, or be empty):
//! - `primary.sst`: `key(pk) -> row`, written as rows arrive (they must come sorted);
//! - `index-<n>.sst` for the schema's `n`-th index: `key(index fields) ++ key(pk) -> ""`,
//!   sorted within a memory bound by the external sorter (`compaction::sorter`);
//! - `TABLE`, written last (a temporary file renamed), so a directory with `TABLE` is
//!   complete. Its text lines: `strata-table-files 1`, `schema <schema text>`,
//!   `rows <n>`, for files of one partition `partition <i> <n> <hash id>` (every row's
//!   primary key routes to partition `i` of `n` by that [`HashFn`]), then
//!   `file <keyspace> <file name> <entries> <digest hex>` for the primary (`primary`) and
//!   each index (`index:<name>`).
//!
//! Invariant: each file holds exactly `rows` entries (an index entry per row), which the
//! ingest checks along with the schema and the checksums.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::layout::Layout;
use super::schema::Schema;
use super::value::Value;
use crate::compaction::JobContext;
use crate::compaction::sorter::ExternalSorter;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, RealFs};
use crate::key::{ValueKind, internal_key, user_key};
use crate::partition::{HashFn, check_count};
use crate::sstable::cache::SstCache;
use crate::sstable::{ExternalSstWriter, SstOptions};

/// Name of the descriptor file in a [`TableWriter`]'s output directory.
pub const DESCRIPTOR: &str = "TABLE";
const MAGIC_LINE: &str = "strata-table-files 1";

/// How a [`TableWriter`] writes.
#[derive(Debug, Clone)]
pub struct TableWriterOptions {
    /// Memory for sorting index entries, shared by the indexes (each spills past its share).
    pub sort_memory: usize,
    /// Table format options of the files (an index file's filter setting is its
    /// index's), as [`ExternalSstWriter::check_options`] allows.
    pub sst: SstOptions,
    /// `Some((i, n))`: the files are for partition `i` of a table split into `n`
    /// partitions (`table::partitioned`); a row whose primary key routes elsewhere is
    /// refused, and the descriptor records the partition for the ingest to check.
    pub partition: Option<(usize, usize)>,
}

impl Default for TableWriterOptions {
    fn default() -> Self {
        TableWriterOptions {
            sort_memory: 256 << 20,
            sst: SstOptions::default(),
            partition: None,
        }
    }
}

/// The partition a [`TableWriter`]'s files are for, as its descriptor records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilesPartition {
    /// The partition, `0..count`.
    pub index: usize,
    /// Partitions of the table.
    pub count: usize,
    /// How primary keys were routed.
    pub hash: HashFn,
}

/// Builds a table's files from rows given in increasing primary-key order.
///
/// ```
/// use strata::table::schema::Schema;
/// use strata::table::value::Value;
/// use strata::table::writer::TableWriter;
/// use strata::{Db, IngestOptions, Options};
/// let dir = tempfile::tempdir().unwrap();
/// let schema = Schema::parse("table users (id u64, age i64) primary key (id) index by_age (age)").unwrap();
/// let mut w = TableWriter::create(&schema, dir.path().join("load")).unwrap();
/// w.add(&[Value::U64(1), Value::I64(40)]).unwrap();
/// w.add(&[Value::U64(2), Value::I64(30)]).unwrap();
/// assert!(w.add(&[Value::U64(2), Value::I64(20)]).is_err()); // not after the last key
/// let files = w.finish().unwrap();
/// assert_eq!(files.rows, 2);
///
/// let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
/// let users = db.create_table(schema).unwrap();
/// users.ingest(&files.dir, IngestOptions::default()).unwrap();
/// let by_age: Vec<_> = users.select("by_age").rows().unwrap().map(|r| r.unwrap()[0].clone()).collect();
/// assert_eq!(by_age, vec![Value::U64(2), Value::U64(1)]);
/// ```
pub struct TableWriter {
    dir: PathBuf,
    schema: Schema,
    layout: Layout,
    primary: ExternalSstWriter,
    sorters: Vec<ExternalSorter>,
    last_pk: Option<Vec<u8>>,
    rows: u64,
    partition: Option<FilesPartition>,
    /// Format options of every file written (index files keep their own filter key).
    sst: SstOptions,
    /// Last, so the files above are closed first.
    cleanup: Cleanup,
}

/// Empties a writer's directory when the writer ends without its files: dropped
/// unfinished, or refused or failed at `finish`. The directory was new or empty
/// (`create_with`), so every file in it is the writer's; a retry finds it as it was.
struct Cleanup {
    dir: PathBuf,
    armed: bool,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if self.armed {
            // Best effort: a failed `finish` already said what went wrong.
            for name in RealFs.list(&self.dir).unwrap_or_default() {
                let _ = RealFs.remove(&self.dir.join(name));
            }
        }
    }
}

impl std::fmt::Debug for TableWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableWriter")
            .field("dir", &self.dir)
            .field("table", &self.schema.name)
            .field("rows", &self.rows)
            .finish()
    }
}

/// A finished [`TableWriter`] output, or one read back with [`TableFiles::open`].
#[derive(Debug, Clone)]
pub struct TableFiles {
    /// The directory.
    pub dir: PathBuf,
    /// The schema the rows follow.
    pub schema: Schema,
    /// Rows.
    pub rows: u64,
    /// The primary file: (file name in `dir`, entries, digest).
    pub primary: (String, u64, u64),
    /// Per index, in schema order: (index name, file name, entries, digest).
    pub indexes: Vec<(String, String, u64, u64)>,
    /// The partition the rows all route to, when written for one.
    pub partition: Option<FilesPartition>,
}

impl TableWriter {
    /// Starts writing files for `schema` into `dir` on the real file system.
    pub fn create(schema: &Schema, dir: impl AsRef<Path>) -> Result<TableWriter> {
        Self::create_with(schema, dir, TableWriterOptions::default())
    }

    /// Starts writing files for `schema` into `dir` with `opts`.
    pub fn create_with(schema: &Schema, dir: impl AsRef<Path>, opts: TableWriterOptions) -> Result<TableWriter> {
        let schema = schema.clone().validated()?;
        // Before the directory is made: a refused writer leaves nothing behind.
        ExternalSstWriter::check_options(&opts.sst)?;
        let partition = match opts.partition {
            Some((index, count)) => {
                check_count(count)?;
                super::partitioned::check_local_indexes(&schema)?;
                if index >= count {
                    return Err(Error::InvalidArgument(format!(
                        "partition {index} of {count}: partitions are numbered 0..{count}"
                    )));
                }
                Some(FilesPartition {
                    index,
                    count,
                    hash: HashFn::Fnv1aFmix64,
                })
            }
            None => None,
        };
        let dir = dir.as_ref().to_path_buf();
        let fs: Arc<dyn FileSystem> = Arc::new(RealFs);
        fs.create_dir_all(&dir)?;
        if !fs.list(&dir)?.is_empty() {
            return Err(Error::AlreadyExists(format!(
                "{}: a table writer needs a new or empty directory",
                dir.display()
            )));
        }
        let layout = Layout::detached(&schema)?;
        let primary = ExternalSstWriter::create_with(fs.clone(), dir.join("primary.sst"), opts.sst.clone())?;
        let ctx = JobContext {
            fs: fs.clone(),
            dir: dir.clone(),
            sst_cache: Arc::new(SstCache::new(fs.clone(), dir.clone(), 0, None)),
            sst_opts: opts.sst.clone(),
            file_numbers: Arc::new(AtomicU64::new(1)),
            target_file_size: u64::MAX,
            clock: Arc::new(crate::options::SystemClock),
            deletes: Default::default(),
            filter_keys: Default::default(),
        };
        let share = opts.sort_memory / schema.indexes.len().max(1);
        let sorters = schema
            .indexes
            .iter()
            .map(|_| ExternalSorter::new(ctx.clone(), share))
            .collect();
        Ok(TableWriter {
            dir: dir.clone(),
            schema,
            layout,
            primary,
            sorters,
            last_pk: None,
            rows: 0,
            partition,
            sst: opts.sst,
            cleanup: Cleanup { dir, armed: true },
        })
    }

    /// Adds a row; its primary key must sort after the previous row's. A row that does
    /// not fit the schema, or is out of order, is refused and nothing is added.
    pub fn add(&mut self, row: &[Value]) -> Result<()> {
        let bytes = self.layout.encode(row)?;
        let pk = self.layout.pk_of(row);
        if let Some(last) = &self.last_pk
            && pk <= *last
        {
            let what = if pk == *last { "repeats" } else { "sorts before" };
            return Err(Error::InvalidArgument(format!(
                "row {} of table {:?}: its primary key {} that of the row before: rows must come \
                 sorted by primary key, without duplicates",
                self.rows, self.schema.name, what
            )));
        }
        if let Some(p) = self.partition {
            let home = p.hash.partition(&pk, p.count);
            if home != p.index {
                return Err(Error::InvalidArgument(format!(
                    "row {} of table {:?}: its primary key routes to partition {home} of {}, and these \
                     files are for partition {}",
                    self.rows, self.schema.name, p.count, p.index
                )));
            }
        }
        self.primary.put(&pk, &bytes)?;
        for (ix, sorter) in self.layout.indexes.iter().zip(&mut self.sorters) {
            let key = self.layout.secondary_key(ix, row, &pk);
            sorter.push(&internal_key(&key, 0, ValueKind::Put), &[])?;
        }
        self.last_pk = Some(pk);
        self.rows += 1;
        Ok(())
    }

    /// Rows added so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Writes the index files and the descriptor. A unique index whose rows share a key
    /// (nulls aside) is an [`Error::Constraint`]; a writer without rows is refused.
    /// Refused or failed, or dropped unfinished, it leaves the directory empty, as it
    /// found it, for another writer.
    pub fn finish(mut self) -> Result<TableFiles> {
        if self.rows == 0 {
            return Err(Error::InvalidArgument(format!(
                "{}: no rows to write",
                self.dir.display()
            )));
        }
        let fs: Arc<dyn FileSystem> = Arc::new(RealFs);
        let primary_info = self.primary.finish()?;
        let mut files = vec![("primary".to_string(), primary_info)];
        for (i, (ix, sorter)) in self.layout.indexes.iter().zip(self.sorters).enumerate() {
            let path = self.dir.join(format!("index-{i}.sst"));
            // The filter an index keyspace's own tables have (`IndexLayout::chosen_filter_key`).
            let opts = SstOptions {
                filter_key: ix.chosen_filter_key(),
                ..self.sst.clone()
            };
            let mut w = ExternalSstWriter::create_with(fs.clone(), &path, opts)?;
            let mut stream = sorter.finish()?;
            let mut prev: Option<Vec<u8>> = None;
            while let Some((k, _)) = stream.next_entry()? {
                let key = user_key(k);
                if ix.unique {
                    // Sorted by index key: a duplicate sits next to its twin.
                    let (ukey, _) = self.layout.split_secondary(ix, key)?;
                    let has_null = ix.shape.decode(ukey)?.iter().any(Value::is_null);
                    if !has_null && prev.as_deref() == Some(ukey) {
                        return Err(Error::Constraint(format!(
                            "unique index {:?} of table {:?}: two rows share the key {}",
                            ix.name,
                            self.schema.name,
                            super::format_values(&ix.shape.decode(ukey)?)
                        )));
                    }
                    prev = Some(ukey.to_vec());
                }
                w.put(key, b"")?;
            }
            files.push((format!("index:{}", ix.name), w.finish()?));
        }
        let mut text = format!("{MAGIC_LINE}\nschema {}\nrows {}\n", self.schema, self.rows);
        if let Some(p) = self.partition {
            text.push_str(&format!("partition {} {} {}\n", p.index, p.count, p.hash.id()));
        }
        for (what, info) in &files {
            let name = info.path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            text.push_str(&format!("file {what} {name} {} {:016x}\n", info.entries, info.digest));
        }
        let tmp = self.dir.join(format!("{DESCRIPTOR}.tmp"));
        let mut f = fs.create(&tmp)?;
        f.append(text.as_bytes())?;
        f.sync()?;
        drop(f);
        fs.rename(&tmp, &self.dir.join(DESCRIPTOR))?;
        fs.sync_dir(&self.dir)?;
        let files = TableFiles::parse(&self.dir, &text)?;
        self.cleanup.armed = false;
        Ok(files)
    }
}

impl TableFiles {
    /// Reads the descriptor of a [`TableWriter`]'s output directory (the files
    /// themselves are checked by the ingest).
    pub fn open(dir: impl AsRef<Path>) -> Result<TableFiles> {
        let dir = dir.as_ref();
        let bytes = RealFs.read_all(&dir.join(DESCRIPTOR))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::InvalidArgument(format!("{}: not UTF-8", dir.join(DESCRIPTOR).display())))?;
        Self::parse(dir, &text)
    }

    /// Parses descriptor text as if read from `dir` (what [`open`](Self::open) does
    /// after reading the file).
    pub fn parse(dir: &Path, text: &str) -> Result<TableFiles> {
        let path = dir.join(DESCRIPTOR);
        let bad =
            |line: usize, why: &str| Error::InvalidArgument(format!("{} line {}: {why}", path.display(), line + 1));
        let mut lines = text.lines().enumerate();
        if lines.next().map(|(_, l)| l) != Some(MAGIC_LINE) {
            return Err(bad(0, "not a table files descriptor (or another version of it)"));
        }
        let (mut schema, mut rows, mut primary, mut partition) = (None, None, None, None);
        let mut indexes = Vec::new();
        for (i, line) in lines {
            let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
            match word {
                "schema" => schema = Some(Schema::parse(rest).map_err(|e| bad(i, &e.to_string()))?),
                "rows" => rows = Some(rest.parse::<u64>().map_err(|_| bad(i, "bad row count"))?),
                "partition" => {
                    let nums: Vec<Option<u32>> = rest.split(' ').map(|w| w.parse().ok()).collect();
                    let [Some(index), Some(count), Some(hash)] = nums.as_slice() else {
                        return Err(bad(i, "a partition line has 3 numbers: partition, count, hash id"));
                    };
                    let (index, count) = (*index as usize, *count as usize);
                    check_count(count).map_err(|e| bad(i, &e.to_string()))?;
                    if index >= count {
                        return Err(bad(i, "the partition is not below the count"));
                    }
                    let hash = HashFn::from_id(*hash).ok_or_else(|| bad(i, "unknown hash function id"))?;
                    partition = Some(FilesPartition { index, count, hash });
                }
                "file" => {
                    let parts: Vec<&str> = rest.split(' ').collect();
                    let [what, name, entries, crc] = parts.as_slice() else {
                        return Err(bad(i, "a file line has 4 fields"));
                    };
                    if name.is_empty() || name.contains('/') || name.contains('\\') || name.starts_with('.') {
                        return Err(bad(i, "file names are plain names in the directory"));
                    }
                    let entries = entries.parse::<u64>().map_err(|_| bad(i, "bad entry count"))?;
                    let crc = u64::from_str_radix(crc, 16).map_err(|_| bad(i, "bad digest"))?;
                    match what.strip_prefix("index:") {
                        Some(ix) => indexes.push((ix.to_string(), name.to_string(), entries, crc)),
                        None if *what == "primary" => primary = Some((name.to_string(), entries, crc)),
                        None => return Err(bad(i, "unknown file kind")),
                    }
                }
                "" => {}
                _ => return Err(bad(i, "unknown line")),
            }
        }
        let schema = schema.ok_or_else(|| bad(0, "no schema line"))?;
        let names: Vec<&str> = schema.indexes.iter().map(|i| i.name.as_str()).collect();
        let listed: Vec<&str> = indexes.iter().map(|i| i.0.as_str()).collect();
        if names != listed {
            return Err(bad(0, "the index files do not match the schema's indexes"));
        }
        Ok(TableFiles {
            dir: dir.to_path_buf(),
            schema,
            rows: rows.ok_or_else(|| bad(0, "no rows line"))?,
            primary: primary.ok_or_else(|| bad(0, "no primary file"))?,
            indexes,
            partition,
        })
    }

    /// Every file with what it must hold: (keyspace label, path, entries, digest).
    pub fn files(&self) -> Vec<(String, PathBuf, u64, u64)> {
        let mut v = vec![(
            "primary".to_string(),
            self.dir.join(&self.primary.0),
            self.primary.1,
            self.primary.2,
        )];
        for (ix, name, entries, crc) in &self.indexes {
            v.push((format!("index {ix}"), self.dir.join(name), *entries, *crc));
        }
        v
    }

    /// Total bytes of the files.
    pub fn bytes(&self) -> Result<u64> {
        let mut total = 0;
        for (_, path, _, _) in self.files() {
            total += RealFs.open(&path)?.size();
        }
        Ok(total)
    }
}
