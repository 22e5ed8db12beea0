//! Keyspaces: creation, listing and dropping; isolation of identical keys; a dropped
//! keyspace's files leave the directory and its data never comes back; batches across
//! keyspaces are atomic, also across a reopen.

mod small_db;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use small_db::options;
use strata::{Db, Error, Keyspace, Options, WriteBatch};

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(ks: &str, i: usize) -> Vec<u8> {
    let mut v = format!("{ks}:{i}:").into_bytes();
    v.resize(64, b'.');
    v
}

fn all(ks: &Keyspace) -> Vec<(Vec<u8>, Vec<u8>)> {
    ks.scan(..).expect("scan").collect::<Result<_, _>>().expect("scan item")
}

fn sst_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sst"))
        .collect()
}

fn fill(db: &Db, ks: &Keyspace, n: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let mut b = WriteBatch::new();
        for &i in chunk {
            b.put(ks, &key(i), &value(ks.name(), i));
        }
        db.write(b).expect("write");
    }
}

#[test]
fn create_list_and_drop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options()).expect("open");
    assert_eq!(db.list_keyspaces(), vec!["default"]);
    for name in ["zeta", "alpha", "mid"] {
        let ks = db.create_keyspace(name).expect("create");
        assert_eq!(ks.name(), name);
    }
    assert_eq!(db.list_keyspaces(), vec!["alpha", "default", "mid", "zeta"]);
    let a = db.keyspace("alpha").expect("alpha");
    assert_eq!(a.id(), db.keyspace("alpha").expect("alpha").id());
    assert_ne!(a.id(), db.keyspace("zeta").expect("zeta").id());
    db.drop_keyspace("mid").expect("drop");
    assert_eq!(db.list_keyspaces(), vec!["alpha", "default", "zeta"]);
    let made = db.keyspace_or_create("made").expect("keyspace_or_create");
    assert_eq!(made.id(), db.keyspace_or_create("made").expect("again").id());
    drop((a, made));
    db.close().expect("close");

    let db = Db::open(dir.path(), options()).expect("reopen");
    assert_eq!(db.list_keyspaces(), vec!["alpha", "default", "made", "zeta"]);
    assert!(matches!(db.keyspace("mid"), Err(Error::NotFound(_))));
    // Recreating a dropped name gives a fresh, empty keyspace.
    let mid = db.create_keyspace("mid").expect("recreate");
    assert_eq!(all(&mid).len(), 0);
}

/// The keyspaces called `names`: the default one by its handle, the others through `other`.
fn by_name(db: &Db, names: &[&str], other: impl Fn(&str) -> Keyspace) -> Vec<Keyspace> {
    names
        .iter()
        .map(|n| {
            if *n == "default" {
                db.default_keyspace()
            } else {
                other(n)
            }
        })
        .collect()
}

#[test]
fn identical_keys_in_different_keyspaces_are_isolated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options()).expect("open");
    let names = ["default", "a", "b"];
    let kss = by_name(&db, &names, |n| db.create_keyspace(n).expect("create"));
    for ks in &kss {
        fill(&db, ks, 600);
    }
    // Different changes to each keyspace, some in memtable, some flushed.
    kss[1]
        .delete_range(&key(100)[..]..&key(200)[..])
        .expect("delete_range in a");
    db.flush().expect("flush");
    kss[2].delete(&key(5)).expect("delete in b");
    db.put(&key(7), b"default-only").expect("put in default");
    db.compact_range().expect("compact");
    kss[1].put(&key(150), b"a-again").expect("put");

    let check = |kss: &[Keyspace], when: &str| {
        for ks in kss {
            let n = ks.name();
            let got = all(ks);
            let mut want: Vec<(Vec<u8>, Vec<u8>)> = (0..600)
                .filter(|i| !(n == "a" && (100..200).contains(i) && *i != 150))
                .filter(|i| !(n == "b" && *i == 5))
                .map(|i| {
                    let v = match (n, i) {
                        ("default", 7) => b"default-only".to_vec(),
                        ("a", 150) => b"a-again".to_vec(),
                        _ => value(n, i),
                    };
                    (key(i), v)
                })
                .collect();
            want.sort();
            assert_eq!(
                got.len(),
                want.len(),
                "{when}: keyspace {n} has {} keys, want {}",
                got.len(),
                want.len()
            );
            assert!(got == want, "{when}: keyspace {n} content differs");
            assert_eq!(ks.get(&key(5)).expect("get").is_some(), n != "b", "{when}: {n} key 5");
        }
    };
    check(&kss, "before reopen");
    let stats = db.stats();
    for n in names {
        let ks = stats.keyspace(n).expect("stats of keyspace");
        assert!(
            ks.levels.iter().any(|l| l.level > 0 && l.files > 0),
            "{n} has no file below level 0:\n{stats}"
        );
    }
    drop(kss);
    db.close().expect("close");
    let db = Db::open(dir.path(), options()).expect("reopen");
    let kss = by_name(&db, &names, |n| db.keyspace(n).expect("keyspace"));
    check(&kss, "after reopen");
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn dropping_a_keyspace_deletes_its_files_for_good() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options()).expect("open");
    let keep = db.create_keyspace("keep").expect("create");
    fill(&db, &keep, 1000);
    db.compact_range().expect("compact");
    db.wait_for_background().expect("idle");
    // Files replaced by compactions are deleted once no reader holds them (soon).
    let live_files = |db: &Db| {
        db.stats()
            .keyspaces
            .iter()
            .flat_map(|k| k.levels.iter().map(|l| l.files))
            .sum::<usize>()
    };
    wait_until("obsolete files are deleted", || {
        sst_files(dir.path()).len() == live_files(&db)
    });
    let before = sst_files(dir.path());
    assert!(!before.is_empty());

    let tmp = db.create_keyspace("tmp").expect("create");
    fill(&db, &tmp, 1500);
    db.flush().expect("flush");
    db.wait_for_background().expect("idle");
    wait_until("obsolete files are deleted", || {
        sst_files(dir.path()).len() == live_files(&db)
    });
    let stats = db.stats();
    let tmp_files: usize = stats
        .keyspace("tmp")
        .expect("tmp stats")
        .levels
        .iter()
        .map(|l| l.files)
        .sum();
    assert!(tmp_files >= 2, "tmp should span several files:\n{stats}");
    let with_tmp = sst_files(dir.path());
    let tmp_only: BTreeSet<String> = with_tmp.difference(&before).cloned().collect();
    assert_eq!(
        tmp_only.len(),
        tmp_files,
        "the new files should be exactly tmp's ({tmp_only:?})"
    );
    // Files go when no reader uses them: hold a scan open over tmp across the drop.
    let mut scan = tmp.scan(..).expect("scan");
    assert!(scan.next().is_some());

    db.drop_keyspace("tmp").expect("drop");
    assert!(
        db.stats().keyspace("tmp").is_none(),
        "stats still list the dropped keyspace"
    );
    drop(scan);
    drop(tmp);
    wait_until("the dropped keyspace's files are deleted", || {
        sst_files(dir.path()).is_disjoint(&tmp_only)
    });
    // The other keyspace's files are untouched.
    assert!(
        sst_files(dir.path()).is_superset(&before),
        "files of other keyspaces were deleted"
    );
    assert_eq!(all(&keep).len(), 1000);

    drop(keep);
    db.close().expect("close");
    let db = Db::open(dir.path(), options()).expect("reopen");
    assert_eq!(db.list_keyspaces(), vec!["default", "keep"]);
    assert!(matches!(db.keyspace("tmp"), Err(Error::NotFound(_))));
    assert!(sst_files(dir.path()).is_disjoint(&tmp_only), "dropped files came back");
    let tmp = db.create_keyspace("tmp").expect("recreate");
    assert_eq!(all(&tmp).len(), 0, "a recreated keyspace shows the dropped data");
    assert_eq!(all(&db.keyspace("keep").expect("keep")).len(), 1000);
}

#[test]
fn unflushed_data_of_a_dropped_keyspace_does_not_come_back() {
    // The dropped keyspace's writes are still in the WAL; replay must skip them, also
    // once the name is reused.
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        memtable_budget: 8 << 20,
        ..options()
    };
    let db = Db::open(dir.path(), opts.clone()).expect("open");
    let tmp = db.create_keyspace("tmp").expect("create");
    fill(&db, &tmp, 50);
    db.drop_keyspace("tmp").expect("drop");
    let tmp2 = db.create_keyspace("tmp").expect("recreate");
    assert_ne!(tmp.id(), tmp2.id());
    assert_eq!(all(&tmp2).len(), 0, "recreated keyspace shows dropped data (memtable)");
    tmp2.put(b"fresh", b"1").expect("put");
    drop((tmp, tmp2));
    db.close().expect("close");

    let db = Db::open(dir.path(), opts).expect("reopen");
    let tmp = db.keyspace("tmp").expect("tmp");
    assert_eq!(
        all(&tmp),
        vec![(b"fresh".to_vec(), b"1".to_vec())],
        "dropped data came back from the WAL"
    );
    assert_eq!(all(&db.default_keyspace()).len(), 0);
}

#[test]
fn batches_across_keyspaces_are_atomic_across_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options()).expect("open");
    let users = db.create_keyspace("users").expect("create");
    let by_email = db.create_keyspace("by_email").expect("create");
    let default = db.default_keyspace();
    // Each batch moves user i from email e(i, n-1) to e(i, n) in both keyspaces, and
    // counts it in the default keyspace.
    let email = |i: usize, n: usize| format!("user{i}-v{n}@example.com").into_bytes();
    let uid = |i: usize| format!("user{i:04}").into_bytes();
    for n in 0..6 {
        for i in 0..300 {
            let mut b = WriteBatch::new();
            b.put(&users, &uid(i), &email(i, n));
            if n > 0 {
                b.delete(&by_email, &email(i, n - 1));
            }
            b.put(&by_email, &email(i, n), &uid(i));
            b.put(&default, &uid(i), n.to_string().as_bytes());
            db.write(b).expect("write");
        }
        if n == 2 {
            db.flush().expect("flush");
        }
    }
    // One refused batch (a dropped keyspace in it) must leave no trace either.
    let doomed = db.create_keyspace("doomed").expect("create");
    db.drop_keyspace("doomed").expect("drop");
    let mut b = WriteBatch::new();
    b.put(&users, &uid(9999), b"ghost");
    b.put(&doomed, b"x", b"y");
    assert!(db.write(b).is_err());

    let check = |db: &Db, when: &str| {
        let users = db.keyspace("users").expect("users");
        let by_email = db.keyspace("by_email").expect("by_email");
        let u = all(&users);
        let e = all(&by_email);
        assert_eq!(u.len(), 300, "{when}: users");
        assert_eq!(e.len(), 300, "{when}: by_email (old emails must be gone)");
        for (id, em) in &u {
            assert_eq!(
                by_email.get(em).expect("get").as_ref(),
                Some(id),
                "{when}: index entry for {}",
                String::from_utf8_lossy(id)
            );
            assert_eq!(db.get(id).expect("get"), Some(b"5".to_vec()), "{when}: counter");
        }
        assert_eq!(
            users.get(&uid(9999)).expect("get"),
            None,
            "{when}: refused batch applied"
        );
    };
    check(&db, "before reopen");
    drop((users, by_email, default, doomed));
    db.close().expect("close");
    let db = Db::open(dir.path(), options()).expect("reopen");
    check(&db, "after reopen");
    db.compact_range().expect("compact");
    check(&db, "after compaction");
}
