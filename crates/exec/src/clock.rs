//! The daemon's one clock, injected: supervision (grace periods, crash
//! back-off, attained service), the round loop's schedule and engines'
//! status caches read time only through [`Clock`], so tests advance
//! a [`ManualClock`] instead of sleeping through a grace period or a round
//! interval. Durations that are only measured (a round's `plan_ms`, an
//! external command's time-out) use a [`Stopwatch`]; nothing else in the
//! crate reads a clock.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::Notify;

/// A wait on a [`Clock`]; `'static`, so a loop can hold it beside `&mut self`.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Wall-clock time in seconds since the Unix epoch (journaled times are these).
pub trait Clock: Send + Sync {
    /// The time now, in seconds since the Unix epoch.
    fn now_unix_s(&self) -> f64;

    /// Resolves once the clock reads `unix_s` or later: the round loop
    /// waits here, so a manual clock moves the loop as it moves supervision.
    fn sleep_until(&self, unix_s: f64) -> Sleep;
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

    fn sleep_until(&self, unix_s: f64) -> Sleep {
        // Never more than an hour at once: the loop looks at the clock
        // again when it wakes, so a wall clock set forward or back only
        // moves the next wake.
        let wait_s = (unix_s - self.now_unix_s()).clamp(0.0, 3600.0);
        Box::pin(tokio::time::sleep(Duration::from_secs_f64(wait_s)))
    }
}

#[derive(Debug)]
struct Manual {
    bits: AtomicU64,
    moved: Notify,
}

/// A clock that moves only when told; clones share one time, so a test
/// keeps a clone and advances the daemon's clock from outside.
#[derive(Debug, Clone)]
pub struct ManualClock {
    inner: Arc<Manual>,
}

impl ManualClock {
    /// A clock that reads `start_unix_s` until advanced.
    pub fn new(start_unix_s: f64) -> Self {
        ManualClock {
            inner: Arc::new(Manual {
                bits: AtomicU64::new(start_unix_s.to_bits()),
                moved: Notify::new(),
            }),
        }
    }

    /// Move the time on and wake whatever waits on it.
    pub fn advance(&self, seconds: f64) {
        let now = self.now_unix_s();
        self.inner.bits.store((now + seconds).to_bits(), Ordering::SeqCst);
        self.inner.moved.notify_waiters();
    }
}

impl Clock for ManualClock {
    fn now_unix_s(&self) -> f64 {
        f64::from_bits(self.inner.bits.load(Ordering::SeqCst))
    }

    fn sleep_until(&self, unix_s: f64) -> Sleep {
        let clock = self.clone();
        Box::pin(async move {
            loop {
                // Registered before the time is read, so an advance between
                // the two is not missed.
                let moved = clock.inner.moved.notified();
                let mut moved = std::pin::pin!(moved);
                moved.as_mut().enable();
                if clock.now_unix_s() >= unix_s {
                    return;
                }
                moved.await;
            }
        })
    }
}

/// Measures how long something took (a round's stages, an external
/// command's time-out); never a time the daemon acts on.
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch(Instant);

impl Stopwatch {
    pub fn start() -> Self {
        Stopwatch(Instant::now())
    }

    pub fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }

    pub fn elapsed_ms(&self) -> f64 {
        self.elapsed().as_secs_f64() * 1e3
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

    /// A wait on the manual clock ends when the clock is advanced past it,
    /// not before, and a deadline already passed does not wait.
    #[test]
    fn a_manual_wait_ends_when_the_clock_passes_it() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let c = ManualClock::new(0.0);
        rt.block_on(c.sleep_until(0.0));
        let waiter = c.clone();
        rt.block_on(async {
            let task = tokio::spawn(async move { waiter.sleep_until(10.0).await });
            tokio::task::yield_now().await;
            c.advance(5.0);
            tokio::task::yield_now().await;
            assert!(!task.is_finished(), "5 s is not 10");
            c.advance(5.0);
            task.await.unwrap();
        });
    }
}
