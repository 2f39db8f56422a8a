//! The engine and the device source as the daemon, the round loop and the
//! API share them: each behind a lock of its own, taken only off the
//! daemon's lock (effects.rs says in which order), so a call that blocks
//! holds up its own engine and nothing else.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::device::Devices;
use crate::engine::Engine;

/// The engine, shared by the round loop and the API's few engine calls
/// (admission, logs); held only off the daemon's lock.
pub(crate) type SharedEngine = Arc<Mutex<Box<dyn Engine>>>;
/// The device source, shared by the round loop and fault injection.
pub(crate) type SharedDevices = Arc<Mutex<Box<dyn Devices>>>;

/// Lock `m`, taking over a poisoned lock: a panic in an engine call is a
/// bug, and the daemon keeps serving what it has.
pub(crate) fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Lock `m` if nobody holds it: an engine call that has not returned
/// (a hung command) leaves the engine busy, and the loop goes on without
/// it rather than wait behind it.
pub(crate) fn try_lock<T: ?Sized>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// Lock `m` if it comes free within `wait`: an engine held for a moment
/// by a request (a submission's admission) is waited for, one held by a
/// call that has not returned is not.
pub(crate) fn lock_within<T: ?Sized>(m: &Mutex<T>, wait: std::time::Duration) -> Option<MutexGuard<'_, T>> {
    let t0 = std::time::Instant::now();
    loop {
        if let Some(g) = try_lock(m) {
            return Some(g);
        }
        if t0.elapsed() >= wait {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}
