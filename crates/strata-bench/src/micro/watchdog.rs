//! A hang detector: the harness calls [`beat`] whenever it makes progress (a preload
//! batch, a sample); a watchdog thread calls `on_hang` once if no beat came for
//! `limit`, so a deadlocked engine ends the benchmark with a report instead of hanging it.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

static EPOCH: OnceLock<Instant> = OnceLock::new();
static LAST_BEAT_MS: AtomicU64 = AtomicU64::new(0);
static ARMED: AtomicBool = AtomicBool::new(false);

fn now_ms() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Records progress.
pub fn beat() {
    LAST_BEAT_MS.store(now_ms(), Ordering::Relaxed);
}

/// Starts watching (beats count from now) or stops (`false`, e.g. between engines).
pub fn arm(on: bool) {
    beat();
    ARMED.store(on, Ordering::SeqCst);
}

/// Spawns the watchdog thread; `on_hang(stalled_for)` runs on it once.
pub fn spawn(limit: Duration, on_hang: impl FnOnce(Duration) + Send + 'static) {
    beat();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_secs(1));
            let idle = Duration::from_millis(now_ms().saturating_sub(LAST_BEAT_MS.load(Ordering::Relaxed)));
            if ARMED.load(Ordering::SeqCst) && idle > limit {
                on_hang(idle);
                return;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn fires_once_without_beats_and_not_while_disarmed() {
        let (tx, rx) = mpsc::channel();
        arm(false);
        spawn(Duration::from_millis(300), move |idle| {
            let _ = tx.send(idle);
        });
        // Disarmed: no report even though nothing beats.
        assert!(rx.recv_timeout(Duration::from_millis(1500)).is_err());
        arm(true);
        let idle = rx.recv_timeout(Duration::from_secs(5)).expect("watchdog fired");
        assert!(idle >= Duration::from_millis(300));
        arm(false);
    }
}
