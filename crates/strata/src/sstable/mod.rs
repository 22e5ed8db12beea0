//! Sorted string tables (written by a helper).
