use strata::*;
fn opts() -> Options {
    Options {
        memtable_budget: 4096,
        target_file_size: 4096,
        block_size: 256,
        l0_compaction_trigger: 2,
        l0_stall_trigger: 8,
        ..Options::default()
    }
}
#[test]
fn scratch() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let mut b = WriteBatch::new();
    for i in 0..53 {
        b.put(&db.default_keyspace(), format!("k{i:04}").as_bytes(), &[b'x'; 109]);
    }
    db.write(b).unwrap();
    db.put(b"zz", b"1").unwrap();
    println!("before close: {}", db.scan(..).unwrap().count());
    println!("{}", db.stats());
    db.close().unwrap();
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let e = e.unwrap();
        println!("{:?} {}", e.file_name(), e.metadata().unwrap().len());
    }
    let db = Db::open(dir.path(), opts()).unwrap();
    println!("after reopen: {}", db.scan(..).unwrap().count());
    println!("{}", db.stats());
}
