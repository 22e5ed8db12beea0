//! Tables: rows with a primary key and secondary indexes, each index an LSM keyspace,
//! maintained eagerly (the classic hidden read) or deferred (blind writes, deletes sent
//! to the secondary indexes by primary compaction, reads validated).

pub mod catalog;
