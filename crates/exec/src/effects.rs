//! The daemon's effects: everything that can block (an engine's command,
//! a process, a file a job owns, a device collection) runs here, off the
//! daemon's lock.
//!
//! The daemon is a state machine: its methods take events (what the
//! engine saw, a start's outcome, the devices collected) and return or
//! queue effects (attempts to look at, launches, stops in its outbox). A
//! tick and a round's preparation are sequences of such steps: the engine
//! or the device source is held for the effects, the daemon's lock only
//! for each short step between them. The lock order is engine, then
//! devices, then daemon: nothing here takes the engine or the devices
//! while it holds the daemon.

use gpuplan_core::JobId;

use crate::daemon::{Daemon, SharedDaemon};
use crate::device::Devices;
use crate::engine::Engine;
pub(crate) use crate::held::{lock, lock_within, SharedDevices, SharedEngine};
use crate::round::Prepared;
use crate::supervise::{observe, send, Seen};
use crate::ExecError;

/// How the steps below reach the daemon: through its lock when it is
/// shared (the round loop), directly when the caller owns it (tests and
/// tools that hold the daemon alone).
pub(crate) trait Access {
    /// Run one short step on the daemon.
    fn with<R>(&mut self, f: impl FnOnce(&mut Daemon) -> R) -> R;
}

impl Access for &SharedDaemon {
    fn with<R>(&mut self, f: impl FnOnce(&mut Daemon) -> R) -> R {
        f(&mut self.lock())
    }
}

impl Access for &mut Daemon {
    fn with<R>(&mut self, f: impl FnOnce(&mut Daemon) -> R) -> R {
        f(self)
    }
}

/// A tick's effects, on an engine the caller holds: send the stops
/// waiting in the outbox, look at every live attempt, let the daemon
/// settle them, start what it launches, and send what that ordered.
pub(crate) fn tick(mut d: impl Access, engine: &mut dyn Engine) -> Result<(), ExecError> {
    let (watched, lines, out) = d.with(|d| (d.watch_list(), d.log_lines(), d.take_outbox()));
    send(engine, out);
    let seen: Vec<Seen> = watched.iter().map(|w| observe(engine, w, lines)).collect();
    let launches = d.with(|d| d.on_seen(seen, engine))?;
    send(engine, d.with(Daemon::take_outbox));
    let started: Vec<(JobId, u32, Result<crate::engine::Handle, ExecError>)> = launches
        .into_iter()
        .map(|l| {
            let mut h = l.handle;
            let r = engine.start(&l.spec, &mut h).map(|()| h);
            (l.spec.job, l.spec.attempt, r)
        })
        .collect();
    d.with(|d| d.on_started(started))?;
    send(engine, d.with(Daemon::take_outbox));
    Ok(())
}

/// A round's first effects: with the engine (if it is not busy), send
/// the outbox, let go of final jobs and adopt new ones from the engine's
/// queue; collect devices (if the source is not busy); then the daemon
/// builds the round from them.
pub(crate) fn prepare(
    mut d: impl Access,
    engine: Option<&mut dyn Engine>,
    devices: Option<&mut dyn Devices>,
) -> Result<Option<Prepared>, ExecError> {
    match engine {
        Some(engine) => {
            send(engine, d.with(Daemon::take_outbox));
            let retired: Vec<JobId> = d
                .with(|d| d.retire_list())
                .into_iter()
                .filter(|&id| match engine.retire(id) {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!("job {}: {e}; retried next round", id.0);
                        false
                    }
                })
                .collect();
            let found = engine.discover();
            d.with(|d| d.on_engine_round(retired, found, engine))?;
        }
        None => tracing::warn!(
            "the engine is busy (a call of it has not returned): no job is retired or adopted this round"
        ),
    }
    for dir in d.with(Daemon::take_pruned_dirs) {
        // A job's own tree: removed without following its links.
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!("remove {}: {e}", dir.display());
            }
        }
    }
    let gpus = match devices {
        Some(dv) => dv.collect(),
        None => Err(ExecError::Devices(
            "the device source is busy: its last collection has not returned".into(),
        )),
    };
    d.with(|d| d.prepare_with(gpus))
}

/// A submission through the API, each step in its place: devices
/// collected (before the first round) and the engine's admission off the
/// daemon's lock, the checks and the journal under it. Run on a blocking
/// thread by the API, under a time-out.
pub(crate) fn submit(
    mut d: impl Access,
    engine: &SharedEngine,
    devices: &SharedDevices,
    spec: crate::spec::JobSubmission,
) -> Result<(JobId, String), ExecError> {
    if d.with(|d| d.gpus().is_empty()) {
        let gpus = lock(devices).collect();
        d.with(|d| d.first_gpus(gpus));
    }
    let (id, token) = d.with(|d| d.accept(&spec))?;
    // Into the engine's queue first (an engine's held job), then the journal.
    let queued = lock(engine).admit(id, &spec)?;
    d.with(|d| d.enter(id, spec, token.clone(), queued))?;
    Ok((id, token))
}

/// A job's log lines through the engine, read off the daemon's lock.
pub(crate) fn logs(
    d: &SharedDaemon,
    engine: &SharedEngine,
    id: JobId,
    rank: u32,
    lines: usize,
) -> Result<Vec<String>, ExecError> {
    let engine = lock(engine);
    let h = d.lock().log_handle(id, engine.as_ref())?;
    Ok(read_logs(engine.as_ref(), h, rank, lines))
}

/// The lines of an attempt's log through the engine, or those kept with
/// a job that never ran.
fn read_logs(
    engine: &dyn Engine,
    h: Result<crate::engine::Handle, Vec<String>>,
    rank: u32,
    lines: usize,
) -> Vec<String> {
    match h {
        Ok(h) => engine.logs(&h, rank, lines),
        Err(kept) => kept,
    }
}

/// The daemon's one-call forms of the steps above, for tests and tools
/// that own it alone: each takes the engine or the devices while the
/// caller holds the daemon, which the round loop and the API never do.
impl Daemon {
    /// Check and journal a new job; returns its id and the token its
    /// processes report with. The same steps as the API's [`submit`],
    /// with the engine called while the caller holds the daemon.
    pub fn submit(&mut self, spec: crate::spec::JobSubmission) -> Result<(JobId, String), ExecError> {
        let (engine, devices) = self.effects();
        submit(self, &engine, &devices, spec)
    }

    /// Inject a fault into a GPU (fake devices only). Holds the device
    /// source under the caller's hold of the daemon: for tests and tools
    /// that own it alone; the API injects off the lock.
    pub fn inject(&mut self, uuid: &str, fault: crate::device::Fault) -> Result<(), ExecError> {
        lock(&self.effects().1).inject(uuid, fault)
    }

    /// Log lines of a job's latest attempt, rank `rank`, read through the
    /// engine under the caller's hold of the daemon: for tests and tools
    /// that own it alone; the API reads them off the lock.
    pub fn logs(&self, id: JobId, rank: u32, lines: usize) -> Result<Vec<String>, ExecError> {
        let engine = self.effects().0;
        let engine = lock(&engine);
        let h = self.log_handle(id, engine.as_ref())?;
        Ok(read_logs(engine.as_ref(), h, rank, lines))
    }

    /// Begin a round: let the engine go of final jobs and find new ones,
    /// collect devices (jobs on lost GPUs are re-planned), and build the
    /// [`gpuplan_core::Round`]. `None` when there is nothing to plan. Runs
    /// the engine and devices under the caller's hold of the daemon: for
    /// tests and tools that own it alone; the round loop runs the same
    /// steps with the effects off the lock.
    pub fn prepare(&mut self) -> Result<Option<Prepared>, ExecError> {
        let (engine, devices) = self.effects();
        let mut engine = lock(&engine);
        let mut devices = lock(&devices);
        prepare(self, Some(engine.as_mut()), Some(devices.as_mut()))
    }

    /// Watch attempts: settle exits, escalate stops past their grace
    /// period, handle crashes and completions, and launch jobs whose GPUs
    /// are free. Runs the engine under the caller's hold of the daemon: for
    /// tests and tools that own it alone; the round loop runs the same steps
    /// with the engine's calls off the lock ([`tick`]).
    pub fn tick(&mut self) -> Result<(), ExecError> {
        let engine = self.effects().0;
        let mut engine = lock(&engine);
        tick(self, engine.as_mut())
    }
}
