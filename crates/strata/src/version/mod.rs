//! Versions: the set of live files per keyspace and level, and the manifest that logs
//! changes to it.

pub mod edit;
pub mod manifest;
