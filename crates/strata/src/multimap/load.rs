//! Bulk loading: a stream of pairs written by several threads.
//!
//! The calling thread validates and encodes pairs into one batch per partition and
//! hands full batches to the writer threads. A partition is written by one thread
//! only (partition `p` by writer `p % threads`), so writers on different partitions
//! share no lock; an unpartitioned multimap's batches go to the writers in turn and
//! meet in the database's group commit.

use crossbeam_channel::{Sender, bounded};

use super::{MultiMap, encoding, invalid};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};

/// Pairs per batch handed to a writer, at most.
const BATCH_PAIRS: usize = 2048;
/// Encoded bytes per batch, at most (plus one pair): with pairs near the entry limit,
/// 2,048 of them would be 128 MiB a batch.
const BATCH_BYTES: usize = 4 << 20;
/// Batches queued per writer. With one batch filling per partition and one being
/// written per writer, the loader holds at most (partitions + writers x (QUEUE + 1))
/// batches of `BATCH_BYTES`.
const QUEUE: usize = 4;

impl MultiMap {
    /// Adds every (key, value) of `pairs` using `threads` writer threads (at least 1);
    /// returns the number of pairs written. A bad pair (see [`MultiMap::put`]) stops
    /// the load with `InvalidArgument` naming its position: pairs before it may have
    /// been written (whole batches), none after it. Not atomic as a whole.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let parts = strata::partition::Partitions::open(dir.path(), 2, strata::Options::default()).unwrap();
    /// let mm = strata::multimap::MultiMap::partitioned(parts.keyspace("idx").unwrap());
    /// let n = mm.load((0..1000u32).map(|i| (format!("k{}", i % 7), i.to_be_bytes())), 2).unwrap();
    /// assert_eq!(n, 1000);
    /// assert_eq!(mm.get(b"k3").unwrap().count(), 143);
    /// ```
    pub fn load<I, K, V>(&self, pairs: I, threads: usize) -> Result<u64>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        self.load_with_progress(pairs, threads, |_| {})
    }

    /// Like [`load`](Self::load), calling `progress` with the number of pairs handed to
    /// the writers so far after each batch.
    pub fn load_with_progress<I, K, V>(&self, pairs: I, threads: usize, mut progress: impl FnMut(u64)) -> Result<u64>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let parts = self.parts.len();
        let writers = if parts > 1 {
            threads.clamp(1, parts)
        } else {
            threads.max(1)
        };
        std::thread::scope(|s| {
            let mut senders: Vec<Sender<(usize, WriteBatch)>> = Vec::with_capacity(writers);
            let mut handles = Vec::with_capacity(writers);
            for _ in 0..writers {
                let (tx, rx) = bounded::<(usize, WriteBatch)>(QUEUE);
                senders.push(tx);
                handles.push(s.spawn(move || -> Result<()> {
                    for (p, b) in rx {
                        self.parts[p].inner().write_user(b)?;
                    }
                    Ok(())
                }));
            }
            let fed = self.feed(pairs, &senders, &mut progress);
            drop(senders);
            // A writer's error is the cause of a feed stopped by a closed channel.
            let mut writer_err = None;
            for h in handles {
                let r = h
                    .join()
                    .unwrap_or_else(|_| Err(Error::Background("a multimap loader thread panicked".into())));
                if let Err(e) = r {
                    writer_err.get_or_insert(e);
                }
            }
            match writer_err {
                Some(e) => Err(e),
                None => fed,
            }
        })
    }

    /// Builds batches from `pairs` and sends them to the writers; stops at the first
    /// bad pair or when a writer has stopped.
    fn feed<I, K, V>(
        &self,
        pairs: I,
        senders: &[Sender<(usize, WriteBatch)>],
        progress: &mut impl FnMut(u64),
    ) -> Result<u64>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let parts = self.parts.len();
        let mut batches: Vec<WriteBatch> = (0..parts).map(|_| WriteBatch::new()).collect();
        let mut sent = 0u64;
        let mut turn = 0usize;
        let mut entry = Vec::new();
        let mut send = |p: usize, b: WriteBatch, sent: &mut u64| -> Result<()> {
            let n = b.len() as u64;
            let w = if parts > 1 {
                p % senders.len()
            } else {
                turn = (turn + 1) % senders.len();
                turn
            };
            // A closed channel means the writer failed; its error is reported at join.
            senders[w]
                .send((p, b))
                .map_err(|_| Error::Background("a multimap loader thread stopped".into()))?;
            *sent += n;
            progress(*sent);
            Ok(())
        };
        for (i, (k, v)) in pairs.into_iter().enumerate() {
            let (k, v) = (k.as_ref(), v.as_ref());
            encoding::check(k, v).map_err(|e| invalid(format!("pair {i}: {e}")))?;
            let p = self.partition_of(k);
            entry.clear();
            encoding::put_prefix(&mut entry, k);
            entry.extend_from_slice(v);
            batches[p].put(&self.parts[p], &entry, b"");
            if batches[p].len() >= BATCH_PAIRS || batches[p].size_bytes() >= BATCH_BYTES {
                let b = std::mem::take(&mut batches[p]);
                send(p, b, &mut sent)?;
            }
        }
        for (p, b) in batches.into_iter().enumerate() {
            if !b.is_empty() {
                send(p, b, &mut sent)?;
            }
        }
        Ok(sent)
    }
}
