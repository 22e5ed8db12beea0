//! The write-ahead log (written by a helper).
