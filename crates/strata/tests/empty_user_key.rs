//! The empty key is a key like any other: scans, gets and reverse scans find it in the
//! memtable, after a flush and after reopening.

use strata::{Db, Options};

fn check(db: &Db, stage: &str) {
    let fwd: Vec<(Vec<u8>, Vec<u8>)> = db.scan(..).expect("scan").map(|r| r.expect("item")).collect();
    assert_eq!(
        fwd,
        vec![(b"".to_vec(), b"e".to_vec()), (b"a".to_vec(), b"y".to_vec())],
        "{stage}"
    );
    assert_eq!(db.get(b"").expect("get"), Some(b"e".to_vec()), "{stage}");
    let back: Vec<Vec<u8>> = db.scan(..).expect("scan").rev().map(|r| r.expect("item").0).collect();
    assert_eq!(back, vec![b"a".to_vec(), b"".to_vec()], "{stage}");
}

#[test]
fn empty_key_is_found_everywhere() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Db::open(dir.path(), Options::default()).expect("open");
        db.put(b"", b"e").expect("put");
        db.put(b"a", b"y").expect("put");
        check(&db, "memtable");
        db.flush().expect("flush");
        check(&db, "sstable");
    }
    let db = Db::open(dir.path(), Options::default()).expect("reopen");
    check(&db, "reopened");
    db.put(b"", b"e").expect("put again");
    check(&db, "memtable over sstable");
}
