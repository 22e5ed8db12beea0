//! The manifest log (written by a helper).
