//! Block and table caches (written by a helper).
