//! Lock stripes that serialize a table's statements on the keys they touch.

use parking_lot::{Mutex, MutexGuard, RwLock};

const STRIPES: usize = 4096;

/// A fixed array of mutexes addressed by key hash.
pub(crate) struct LockStripes(Vec<Mutex<()>>);

impl LockStripes {
    pub(crate) fn new() -> Self {
        LockStripes((0..STRIPES).map(|_| Mutex::new(())).collect())
    }

    /// The stripe of a key.
    pub fn stripe(tag: u32, key: &[u8]) -> usize {
        (crc32c::crc32c_append(tag, key) as usize) % STRIPES
    }

    /// Tries to lock one stripe without blocking.
    pub fn try_lock(&self, stripe: usize) -> Option<MutexGuard<'_, ()>> {
        self.0.get(stripe).and_then(|m| m.try_lock())
    }
}

/// Primary-key stripes: blind writes take them shared (they never conflict with each
/// other), statements that read before they write take them exclusive, so a blind write
/// can never slip between another statement's read and its write.
pub(crate) struct KeyLocks(Vec<RwLock<()>>);

/// A held stripe of [`KeyLocks`].
pub(crate) enum KeyGuard<'a> {
    /// Held by a blind writer.
    Shared(#[allow(dead_code)] parking_lot::RwLockReadGuard<'a, ()>),
    /// Held by a reading writer.
    Exclusive(#[allow(dead_code)] parking_lot::RwLockWriteGuard<'a, ()>),
}

impl KeyLocks {
    pub(crate) fn new() -> Self {
        KeyLocks((0..STRIPES).map(|_| RwLock::new(())).collect())
    }

    /// Locks the given stripes in ascending order (deadlock-free), shared or exclusive.
    pub fn lock_all(&self, mut stripes: Vec<usize>, exclusive: bool) -> Vec<KeyGuard<'_>> {
        stripes.sort_unstable();
        stripes.dedup();
        stripes
            .iter()
            .filter_map(|s| self.0.get(*s))
            .map(|l| {
                if exclusive {
                    KeyGuard::Exclusive(l.write())
                } else {
                    KeyGuard::Shared(l.read())
                }
            })
            .collect()
    }
}
