//! Other storage engines the benchmarks compare Strata with, where they need more than
//! a library call: locating, installing and driving external programs.

pub mod sqlite;
pub mod tarantool;
