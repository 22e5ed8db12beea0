//! Running `f(0..n)` on the machine's cores, for work split into independent pieces
//! (the files of an ingest, the partitions of a flush or a manual compaction).

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, Result};

/// Runs `f(i)` for every `i` in `0..n` on up to as many threads as there are cores;
/// the results in order, or the first error (by index). After an error the threads
/// take no new index, so some pieces may not run at all. A panic in `f` goes on in the
/// caller's thread.
pub(crate) fn map<T: Send>(n: usize, f: impl Fn(usize) -> Result<T> + Sync) -> Result<Vec<T>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(n)
        .max(1);
    if threads == 1 {
        return (0..n).map(&f).collect();
    }
    let next = AtomicUsize::new(0);
    let results = parking_lot::Mutex::new((0..n).map(|_| None).collect::<Vec<Option<Result<T>>>>());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let r = f(i);
                    let failed = r.is_err();
                    results.lock()[i] = Some(r);
                    if failed {
                        // The others stop at their next piece.
                        next.store(n, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let mut out = Vec::with_capacity(n);
    for r in results.into_inner() {
        match r {
            Some(r) => out.push(r?),
            // Indexes are taken in order, so one that never ran comes after the
            // failed one, whose error was returned above.
            None => return Err(Error::InvalidArgument("stopped after an error".into())),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_in_order_and_the_first_error_wins() {
        let squares = map(50, |i| Ok(i * i)).expect("no error");
        assert_eq!(squares, (0..50).map(|i| i * i).collect::<Vec<_>>());
        let failed = map(50, |i| {
            if i == 7 || i == 30 {
                Err(Error::InvalidArgument(format!("piece {i}")))
            } else {
                Ok(i)
            }
        });
        match failed {
            // Piece 7 is taken before piece 30, so it ran, and errors are reported by index.
            Err(Error::InvalidArgument(m)) => assert_eq!(m, "piece 7"),
            other => panic!("expected an error, got {other:?}"),
        }
        assert_eq!(map(0, |_| Ok(())).expect("empty").len(), 0);
    }
}
