//! `TableWriter` + `Table::ingest`: a table's primary and index files built outside the
//! database and installed in one edit; `check` passes after it; later replaces and
//! deletes of ingested rows keep the indexes right in both maintenance modes; bad input
//! (schema mismatch, mixed-up files, existing rows, unsorted rows, unique duplicates)
//! refused with nothing changed.

use std::ops::Bound;
use std::path::Path;

use strata::table::check::CheckOptions;
use strata::table::schema::Schema;
use strata::table::value::Value;
use strata::table::writer::{TableFiles, TableWriter};
use strata::{Db, Error, IngestOptions, Options};

fn schema(mode: &str) -> Schema {
    Schema::parse(&format!(
        "table users (id u64, name str, age i64, email str null) primary key (id) \
         index by_age (age) index by_email unique (email) {mode}"
    ))
    .unwrap()
}

fn small() -> Options {
    Options {
        memtable_budget: 16 << 10,
        target_file_size: 16 << 10,
        block_size: 1024,
        l0_compaction_trigger: 2,
        ..Options::default()
    }
}

fn row(id: u64) -> Vec<Value> {
    vec![
        Value::U64(id),
        Value::from(format!("user{id}").as_str()),
        Value::I64((id % 50) as i64),
        if id.is_multiple_of(7) {
            Value::Null
        } else {
            Value::from(format!("u{id}@x").as_str())
        },
    ]
}

fn write(schema: &Schema, dir: &Path, ids: impl IntoIterator<Item = u64>) -> TableFiles {
    let mut w = TableWriter::create(schema, dir).unwrap();
    for id in ids {
        w.add(&row(id)).unwrap();
    }
    w.finish().unwrap()
}

fn ids_by_age(t: &strata::table::Table, age: i64) -> Vec<u64> {
    t.select("by_age")
        .range(Bound::Included(Value::I64(age)), Bound::Included(Value::I64(age)))
        .rows()
        .unwrap()
        .map(|r| match r.unwrap()[0] {
            Value::U64(id) => id,
            ref v => panic!("id {v:?}"),
        })
        .collect()
}

fn check_ok(db: &Db, compact_first: bool) {
    let report = db.check(CheckOptions { compact_first }).unwrap();
    assert!(report.ok(), "{:?}", report.problems);
}

fn ingest_then_change(mode: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path().join("db"), small()).unwrap();
    let t = db.create_table(schema(mode)).unwrap();
    let files = write(&schema(mode), &tmp.path().join("load"), 0..2000);
    assert_eq!(files.rows, 2000);
    let report = t.ingest(&files.dir, IngestOptions::default()).unwrap();
    assert_eq!(report.files.len(), 3);
    assert!(report.files.iter().all(|f| f.entries == 2000));
    assert_eq!(t.count().unwrap(), 2000);
    assert_eq!(t.get(&[Value::U64(77)]).unwrap(), Some(row(77)));
    assert_eq!(ids_by_age(&t, 3), (0..2000).filter(|i| i % 50 == 3).collect::<Vec<_>>());
    let by_email: Vec<_> = t
        .select("by_email")
        .range(
            Bound::Included(Value::from("u10@x")),
            Bound::Included(Value::from("u10@x")),
        )
        .rows()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(by_email, vec![row(10)]);
    check_ok(&db, false);

    // Replace (age 3 -> 49 for id 3), delete id 53, update id 103, then compact.
    let mut moved = row(3);
    moved[2] = Value::I64(49);
    t.replace(moved.clone()).unwrap();
    t.delete(&[Value::U64(53)]).unwrap();
    assert!(t.update(&[Value::U64(103)], &[("age", Value::I64(48))]).unwrap());
    let want3: Vec<u64> = (0..2000).filter(|i| i % 50 == 3 && ![3, 53, 103].contains(i)).collect();
    assert_eq!(ids_by_age(&t, 3), want3);
    assert!(ids_by_age(&t, 49).contains(&3));
    assert!(ids_by_age(&t, 48).contains(&103));
    // A new row may reuse a deleted row's unique email.
    let mut reuse = row(5000);
    reuse[3] = Value::from("u53@x");
    t.insert(reuse).unwrap();
    db.compact_range().unwrap();
    db.wait_for_background().unwrap();
    assert_eq!(ids_by_age(&t, 3), want3);
    assert_eq!(t.count().unwrap(), 2000);
    check_ok(&db, true);
    // After a reopen too.
    drop(t);
    db.close().unwrap();
    let db = Db::open(tmp.path().join("db"), small()).unwrap();
    let t = db.table("users").unwrap();
    assert_eq!(ids_by_age(&t, 3), want3);
    assert_eq!(t.get(&[Value::U64(3)]).unwrap(), Some(moved));
    check_ok(&db, true);
}

#[test]
fn ingested_rows_replace_and_delete_with_eager_indexes() {
    ingest_then_change("eager");
}

#[test]
fn ingested_rows_replace_and_delete_with_deferred_indexes() {
    ingest_then_change("deferred");
}

#[test]
fn ingest_beside_existing_rows_and_snapshots_before_it() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path().join("db"), small()).unwrap();
    let t = db.create_table(schema("deferred")).unwrap();
    for id in 10_000..10_050 {
        t.insert(row(id)).unwrap();
    }
    let snap = db.snapshot();
    let files = write(&schema("deferred"), &tmp.path().join("load"), 0..500);
    t.ingest(&files.dir, IngestOptions { link_files: true }).unwrap();
    assert_eq!(t.count().unwrap(), 550);
    let primary = db.keyspace("table:users").unwrap();
    assert_eq!(snap.scan(&primary, ..).unwrap().count(), 50);
    check_ok(&db, false);
    check_ok(&db, true);
}

#[test]
fn bad_table_files_are_refused_and_nothing_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path().join("db"), small()).unwrap();
    let t = db.create_table(schema("eager")).unwrap();
    t.insert(row(100)).unwrap();
    let seq = db.last_seq();
    let dir = tmp.path().join("db");
    let files = || {
        let mut v: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let before = files();
    let unchanged = |what: &str| {
        assert_eq!(db.last_seq(), seq, "{what}");
        assert_eq!(t.count().unwrap(), 1, "{what}");
        // Files copied in before a refusal are removed.
        assert_eq!(files(), before, "{what}");
        check_ok(&db, false);
    };

    // Another shape of table.
    let other = Schema::parse("table users (id u64, name str) primary key (id)").unwrap();
    let mut w = TableWriter::create(&other, tmp.path().join("other")).unwrap();
    w.add(&[Value::U64(1), Value::from("x")]).unwrap();
    let f = w.finish().unwrap();
    match t.ingest(&f.dir, IngestOptions::default()) {
        Err(Error::SchemaMismatch(m)) => assert!(m.contains("built for") && m.contains("TABLE"), "{m}"),
        other => panic!("expected a schema mismatch, got {other:?}"),
    }
    unchanged("schema mismatch");

    // An index file from another build of the same table.
    let a = write(&schema("eager"), &tmp.path().join("a"), 0..50);
    let b = write(&schema("eager"), &tmp.path().join("b"), 50..100);
    std::fs::copy(b.dir.join("index-0.sst"), a.dir.join("index-0.sst")).unwrap();
    let e = t.ingest(&a.dir, IngestOptions::default()).unwrap_err();
    assert!(e.to_string().contains("not one table writer's output"), "{e}");
    unchanged("mixed files");

    // A primary key the table has.
    let c = write(&schema("eager"), &tmp.path().join("c"), 90..110);
    match t.ingest(&c.dir, IngestOptions::default()) {
        Err(Error::Constraint(m)) => assert!(m.contains("already has a row"), "{m}"),
        other => panic!("expected a constraint error, got {other:?}"),
    }
    unchanged("existing row");

    // A unique email the table holds, on a row whose entry sorts before the table's
    // (id 2) or after it (id 300): the file's entries alone do not span the table's.
    for id in [2, 300] {
        let mut taken = row(id);
        taken[3] = Value::from("u100@x");
        let mut w = TableWriter::create(&schema("eager"), tmp.path().join(format!("taken{id}"))).unwrap();
        w.add(&taken).unwrap();
        let f = w.finish().unwrap();
        match t.ingest(&f.dir, IngestOptions::default()) {
            Err(Error::Constraint(m)) => assert!(m.contains("already holds the key"), "{m}"),
            other => panic!("id {id}: expected a unique-key error, got {other:?}"),
        }
        unchanged("unique key taken");
    }

    // The same table with a delete key: its rows carry a copy of it, these do not.
    let keyed = Schema::parse(
        "table users (id u64, name str, age i64, email str null) primary key (id) \
         index by_age (age) index by_email unique (email) delete key (age) eager",
    )
    .unwrap();
    let mut w = TableWriter::create(&keyed, tmp.path().join("keyed")).unwrap();
    w.add(&row(500)).unwrap();
    let f = w.finish().unwrap();
    match t.ingest(&f.dir, IngestOptions::default()) {
        Err(Error::SchemaMismatch(m)) => assert!(m.contains("built for"), "{m}"),
        other => panic!("expected a schema mismatch, got {other:?}"),
    }
    unchanged("delete key");

    // No descriptor (an unfinished writer).
    let e = t
        .ingest(tmp.path().join("nothing"), IngestOptions::default())
        .unwrap_err();
    assert!(e.to_string().contains("TABLE"), "{e}");
    unchanged("missing descriptor");

    // A key range beside the existing row goes in.
    let d = write(&schema("eager"), &tmp.path().join("d"), 101..200);
    t.ingest(&d.dir, IngestOptions::default()).unwrap();
    assert_eq!(t.count().unwrap(), 100);
    check_ok(&db, true);
}

#[test]
fn the_writer_refuses_unsorted_rows_bad_rows_and_unique_duplicates() {
    let tmp = tempfile::tempdir().unwrap();
    let s = schema("eager");
    let mut w = TableWriter::create(&s, tmp.path().join("w")).unwrap();
    w.add(&row(5)).unwrap();
    let e = w.add(&row(4)).unwrap_err();
    assert!(e.to_string().contains("sorted by primary key"), "{e}");
    assert!(w.add(&row(5)).is_err());
    assert!(matches!(w.add(&[Value::U64(6)]), Err(Error::SchemaMismatch(_))));
    assert_eq!(w.rows(), 1);
    let mut dup = row(6);
    dup[3] = Value::from("u5@x");
    w.add(&dup).unwrap();
    assert!(matches!(w.finish(), Err(Error::Constraint(_))));
    // A refused writer leaves its directory empty, for the next one.
    assert_eq!(std::fs::read_dir(tmp.path().join("w")).unwrap().count(), 0);
    let w = TableWriter::create(&s, tmp.path().join("w")).unwrap();
    assert!(w.finish().unwrap_err().to_string().contains("no rows"));
    assert_eq!(std::fs::read_dir(tmp.path().join("w")).unwrap().count(), 0);
    let mut w = TableWriter::create(&s, tmp.path().join("w")).unwrap();
    w.add(&row(1)).unwrap();
    w.finish().unwrap();
    // Dropped unfinished, a writer leaves its directory empty too.
    let mut dropped = TableWriter::create(&s, tmp.path().join("dropped")).unwrap();
    dropped.add(&row(1)).unwrap();
    drop(dropped);
    assert_eq!(std::fs::read_dir(tmp.path().join("dropped")).unwrap().count(), 0);
    // A used directory is refused.
    let e = TableWriter::create(&s, tmp.path().join("w")).unwrap_err();
    assert!(matches!(e, Error::AlreadyExists(_)), "{e}");
}

/// `TableWriterOptions::sst` shapes every file the writer makes, index files included
/// (each of which keeps its own filter setting), and the ingested table reads the same.
#[test]
fn the_writers_format_options_reach_the_index_files() {
    use strata::sstable::{Compression, SstOptions, SstReader, TileOptions};
    use strata::table::writer::TableWriterOptions;
    let tmp = tempfile::tempdir().unwrap();
    let s = schema("deferred");
    let blocks = |files: &TableFiles, name: &str| {
        let file = strata::fs::FileSystem::open(&strata::fs::RealFs, &files.dir.join(name)).unwrap();
        SstReader::open(file, 1, None).unwrap().properties().data_blocks
    };
    let build = |dir: &str, sst: SstOptions| {
        let opts = TableWriterOptions {
            sst,
            ..TableWriterOptions::default()
        };
        let mut w = TableWriter::create_with(&s, tmp.path().join(dir), opts).unwrap();
        for id in 0..2000 {
            w.add(&row(id)).unwrap();
        }
        w.finish().unwrap()
    };
    let plain = build("plain", SstOptions::default());
    let tuned = build(
        "small",
        SstOptions {
            block_size: 512,
            compression: Compression::Lz4,
            ..SstOptions::default()
        },
    );
    for (name, file, _, _) in &plain.indexes {
        let (a, b) = (blocks(&plain, file), blocks(&tuned, file));
        assert!(b >= 4 * a, "index {name}: {a} blocks at 8 KiB, {b} at 512 B");
    }
    assert!(blocks(&tuned, &tuned.primary.0) >= 4 * blocks(&plain, &plain.primary.0));
    // Delete tiles would make files ingest refuses: refused when the writer is made.
    let tiled = TableWriterOptions {
        sst: SstOptions {
            tiles: Some(TileOptions { h: 2, delete_key: None }),
            ..SstOptions::default()
        },
        ..TableWriterOptions::default()
    };
    let e = TableWriter::create_with(&s, tmp.path().join("tiled"), tiled).unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("SstOptions::tiles"),
        "{e}"
    );
    assert!(!tmp.path().join("tiled").exists(), "a refused writer leaves nothing");

    let db = Db::open(tmp.path().join("db"), small()).unwrap();
    let t = db.create_table(s.clone()).unwrap();
    t.ingest(&tuned.dir, IngestOptions::default()).unwrap();
    let want: Vec<u64> = (0..2000).filter(|id| id % 50 == 7).collect();
    assert_eq!(ids_by_age(&t, 7), want);
    check_ok(&db, false);
}

/// The real file system, running a hook once, the first time a table file is created
/// in the database directory after it was armed: an ingest's first staged copy.
struct HookFs {
    dir: std::path::PathBuf,
    hook: std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl std::fmt::Debug for HookFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HookFs")
    }
}

impl HookFs {
    /// Arms `action` to run in a thread of its own while the ingest copies its first
    /// file; the copy waits up to 10 s for it. Returns what came of it: `Some(Ok)` done
    /// during the copy, `Some(Err)` failed, `None` still blocked after 10 s.
    fn during_copy(
        &self,
        action: impl FnOnce() -> strata::Result<()> + Send + 'static,
    ) -> std::sync::Arc<std::sync::Mutex<Option<Result<(), String>>>> {
        let outcome = std::sync::Arc::new(std::sync::Mutex::new(None));
        let out = outcome.clone();
        *self.hook.lock().unwrap() = Some(Box::new(move || {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = tx.send(action().map_err(|e| e.to_string()));
            });
            *out.lock().unwrap() = rx.recv_timeout(std::time::Duration::from_secs(10)).ok();
        }));
        outcome
    }
}

impl strata::fs::FileSystem for HookFs {
    fn create(&self, path: &Path) -> strata::Result<Box<dyn strata::fs::WritableFile>> {
        if path.parent() == Some(self.dir.as_path()) && path.extension().is_some_and(|e| e == "sst") {
            let hook = self.hook.lock().unwrap().take();
            if let Some(hook) = hook {
                hook();
            }
        }
        strata::fs::RealFs.create(path)
    }
    fn open_append(&self, path: &Path) -> strata::Result<Box<dyn strata::fs::WritableFile>> {
        strata::fs::RealFs.open_append(path)
    }
    fn open(&self, path: &Path) -> strata::Result<std::sync::Arc<dyn strata::fs::RandomAccessFile>> {
        strata::fs::RealFs.open(path)
    }
    fn read_all(&self, path: &Path) -> strata::Result<Vec<u8>> {
        strata::fs::RealFs.read_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> strata::Result<()> {
        strata::fs::RealFs.rename(from, to)
    }
    fn remove(&self, path: &Path) -> strata::Result<()> {
        strata::fs::RealFs.remove(path)
    }
    fn list(&self, dir: &Path) -> strata::Result<Vec<String>> {
        strata::fs::RealFs.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> strata::Result<()> {
        strata::fs::RealFs.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> strata::Result<()> {
        strata::fs::RealFs.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        strata::fs::RealFs.exists(path)
    }
}

/// A database on a `HookFs` with an empty eager table, and files of rows 0..500 for it.
struct Hooked {
    _tmp: tempfile::TempDir,
    db: Db,
    t: strata::table::Table,
    files: TableFiles,
}

/// Ingests a fresh `Hooked` table's files while `action` runs on the table during the
/// copy, and asserts that it ran then (not held off until the install).
fn ingest_while(
    action: impl FnOnce(strata::table::Table) -> strata::Result<()> + Send + 'static,
) -> (strata::Result<strata::IngestReport>, Hooked) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let fs = std::sync::Arc::new(HookFs {
        dir: dir.clone(),
        hook: std::sync::Mutex::new(None),
    });
    let db = Db::open(
        &dir,
        Options {
            fs: fs.clone(),
            ..small()
        },
    )
    .unwrap();
    let t = db.create_table(schema("eager")).unwrap();
    let files = write(&schema("eager"), &tmp.path().join("load"), 0..500);
    let t2 = t.clone();
    let outcome = fs.during_copy(move || action(t2));
    let r = t.ingest(&files.dir, IngestOptions::default());
    assert_eq!(
        *outcome.lock().unwrap(),
        Some(Ok(())),
        "the statement waited for the ingest"
    );
    (
        r,
        Hooked {
            _tmp: tmp,
            db,
            t,
            files,
        },
    )
}

/// The files are copied in without the table's DDL lock: a statement runs at once
/// meanwhile. The checks against the table run after the copy, under the lock: a row
/// inserted meanwhile with an ingested key refuses the ingest, and so does an index
/// created, or dropped and created again, meanwhile.
#[test]
fn statements_run_while_the_files_are_copied_in_and_the_checks_see_them() {
    use strata::table::schema::IndexDef;

    // A row of its own: in at once, beside the ingested ones.
    let (r, h) = ingest_while(|t| t.insert(row(1000)));
    r.unwrap();
    assert_eq!(h.t.count().unwrap(), 501);
    assert_eq!(ids_by_age(&h.t, 0).len(), 11);
    check_ok(&h.db, false);

    // A row with an ingested key.
    let (r, h) = ingest_while(|t| t.insert(row(7)));
    match r {
        Err(Error::Constraint(m)) => assert!(m.contains("already has a row"), "{m}"),
        other => panic!("expected a constraint error, got {other:?}"),
    }
    assert_eq!(h.t.count().unwrap(), 1);
    check_ok(&h.db, false);

    // An index created meanwhile.
    let (r, h) = ingest_while(|t| t.create_index(IndexDef::new("by_name", &["name"], false)));
    match r {
        Err(Error::SchemaMismatch(m)) => assert!(m.contains("built for"), "{m}"),
        other => panic!("expected a schema mismatch, got {other:?}"),
    }
    assert_eq!(h.t.count().unwrap(), 0);
    check_ok(&h.db, false);

    // An index dropped and created again, the same: the shape agrees, but the files
    // would go to the keyspace of the index that is gone.
    let (r, h) = ingest_while(|t| {
        // The last index, so that the order of the indexes stays the same.
        t.drop_index("by_email")?;
        t.create_index(IndexDef::new("by_email", &["email"], true))
    });
    match r {
        Err(Error::SchemaMismatch(m)) => assert!(m.contains("changed"), "{m}"),
        other => panic!("expected a schema mismatch, got {other:?}"),
    }
    assert_eq!(h.t.count().unwrap(), 0);
    check_ok(&h.db, false);
    // Files copied in after the change go in.
    h.t.ingest(&h.files.dir, IngestOptions::default()).unwrap();
    assert_eq!(ids_by_age(&h.t, 0).len(), 10);
    check_ok(&h.db, false);
}
