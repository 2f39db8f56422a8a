//! The daemon's one clock, injected: supervision (grace periods, crash
//! back-off, attained service) reads time only through [`Clock`], so tests
//! advance a [`ManualClock`] instead of sleeping through a grace period.
//! Durations that are only measured (a round's `plan_ms`) use `Instant`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Wall-clock time in seconds since the Unix epoch (journaled times are these).
pub trait Clock: Send {
    fn now_unix_s(&self) -> f64;
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_unix_s(&self) -> f64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    }
}

/// A clock that moves only when told; clones share one time, so a test
/// keeps a clone and advances the daemon's clock from outside.
#[derive(Debug, Clone)]
pub struct ManualClock {
    bits: Arc<AtomicU64>,
}

impl ManualClock {
    pub fn new(start_unix_s: f64) -> Self {
        ManualClock {
            bits: Arc::new(AtomicU64::new(start_unix_s.to_bits())),
        }
    }

    pub fn advance(&self, seconds: f64) {
        let now = f64::from_bits(self.bits.load(Ordering::SeqCst));
        self.bits.store((now + seconds).to_bits(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_unix_s(&self) -> f64 {
        f64::from_bits(self.bits.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_one_time() {
        let c = ManualClock::new(100.0);
        let d = c.clone();
        c.advance(2.5);
        assert_eq!(d.now_unix_s(), 102.5);
        assert!(SystemClock.now_unix_s() > 1.6e9);
    }
}
