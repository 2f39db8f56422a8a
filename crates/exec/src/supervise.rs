//! The supervisor: starts, watches and stops attempts through the engine,
//! and turns what it sees into job state (completed, crashed with back-off,
//! failed, stopped on purpose).
//!
//! It changes a job's record and returns the signals to send as
//! [`Order`]s; the daemon journals the record first and only then sends
//! them ([`Supervisor::send`]), so a crash in between never leaves a
//! signalled job that the journal thinks untouched. Time comes in as an
//! argument, read by the daemon from its injected clock.

use crate::engine::{AttemptSpec, Engine, Handle, RankStatus, Stop};
use crate::jobs::{Attempt, JobRecord, JobStatus, Lifecycle, StopCause};

/// A signal to send once the state that explains it is journaled.
#[derive(Debug, Clone, PartialEq)]
pub struct Order {
    pub handle: Handle,
    pub how: Stop,
}

/// Supervision settings (from the daemon's [`crate::Config`]).
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// Seconds between a graceful and an immediate stop, unless the job sets `grace_s`.
    pub grace_s: f64,
    /// First restart delay after a crash; doubles with each further crash.
    pub backoff_s: f64,
    pub max_crashes: u32,
    /// Log lines kept with a failed job.
    pub log_lines: usize,
}

pub struct Supervisor {
    engine: Box<dyn Engine>,
    pub policy: Policy,
}

impl Supervisor {
    pub fn new(engine: Box<dyn Engine>, policy: Policy) -> Self {
        Supervisor { engine, policy }
    }

    pub fn engine(&self) -> &dyn Engine {
        self.engine.as_ref()
    }

    pub fn engine_mut(&mut self) -> &mut dyn Engine {
        self.engine.as_mut()
    }

    /// Send orders, after the journal holds the state they follow from.
    pub fn send(&mut self, orders: Vec<Order>) {
        for o in orders {
            self.engine.stop(&o.handle, o.how);
        }
    }

    /// Begin stopping the job's attempt, if it has one not already stopping
    /// (the first stop's time keeps counting the grace period).
    pub fn order_stop(j: &mut JobRecord, now: f64) -> Option<Order> {
        let a = j.attempt.as_mut()?;
        a.order_stop(now).then(|| Order {
            handle: a.handle.clone(),
            how: Stop::Graceful,
        })
    }

    /// Finish or roll back what a daemon crash interrupted: the attempt is
    /// looked up through the engine; a half-started one is stopped and
    /// relaunched later; a stopping one gets a fresh grace period (the old
    /// clock is lost).
    pub fn recover(&mut self, j: &mut JobRecord, now: f64) -> Option<Order> {
        let a = j.attempt.as_mut()?;
        let started = self.engine.adopt(&mut a.handle, a.gpus.len() as u32);
        if a.life == Lifecycle::Starting && !started {
            a.order_stop(now);
        }
        if a.life == Lifecycle::Starting {
            a.life = Lifecycle::Running;
        }
        if let Lifecycle::Stopping { since_unix_s, .. } = &mut a.life {
            *since_unix_s = now;
            return Some(Order {
                handle: a.handle.clone(),
                how: Stop::Graceful,
            });
        }
        None
    }

    /// Record a new attempt as intended (the daemon journals it before
    /// [`Supervisor::start`]); returns what the engine is to start.
    pub fn intend(
        &self,
        j: &mut JobRecord,
        nodes: Vec<(String, Vec<String>)>,
        env: Vec<(String, String)>,
        now: f64,
    ) -> AttemptSpec {
        j.attempts += 1;
        let spec = AttemptSpec {
            job: j.id,
            attempt: j.attempts,
            command: j.spec.command.clone(),
            nodes,
            env,
            uid: j.spec.uid,
        };
        j.attempt = Some(Attempt {
            n: j.attempts,
            gpus: j.gpus.clone(),
            handle: self.engine.locate(j.id, j.attempts),
            life: Lifecycle::Starting,
            started_unix_s: now,
        });
        spec
    }

    /// Start an intended attempt; a start failure is a crash (or, when the
    /// engine's own command failed, waits for the next round).
    pub fn start(&mut self, j: &mut JobRecord, spec: &AttemptSpec, now: f64) {
        let a = j.attempt.as_mut().expect("intended first");
        match self.engine.start(spec, &mut a.handle) {
            Ok(()) => a.life = Lifecycle::Running,
            // The engine's own command failed (Slurm did not answer): not
            // the job's fault. It waits for the next round's plan.
            Err(e @ crate::ExecError::Engine(_)) => {
                tracing::error!(job = j.id.0, name = %j.spec.name, "launch failed: {e}; retried next round");
                j.attempt = None;
                j.gpus.clear();
                j.status = JobStatus::Queued;
                j.reason = Some(format!("launch failed: {e}; retried next round"));
            }
            // A local error (out of descriptors, a full disk, a uid that
            // cannot run) may pass: a crash, retried with back-off until
            // `max_crashes`, never a failure on the first try.
            Err(e) => {
                j.attempt = None;
                tracing::error!(job = j.id.0, name = %j.spec.name, "launch failed: {e}");
                self.crash(j, &format!("launch failed: {e}"), now);
            }
        }
    }

    /// Count a crash (`what` says what happened): the job is failed at its
    /// `max_crashes`, else queued again after a back-off that doubles
    /// with each crash.
    fn crash(&self, j: &mut JobRecord, what: &str, now: f64) {
        j.crashes += 1;
        let max = j.spec.max_crashes.unwrap_or(self.policy.max_crashes);
        j.gpus.clear();
        if j.crashes >= max {
            j.status = JobStatus::Failed;
            j.finished_unix_s = Some(now);
            j.reason = Some(format!("{what}; failed after {} crashes", j.crashes));
        } else {
            j.status = JobStatus::Queued;
            let delay = self.policy.backoff_s * 2f64.powi(j.crashes as i32 - 1);
            j.backoff_until_unix_s = now + delay;
            j.reason = Some(format!(
                "{what}; crash {} of {max}, restarting after {delay:.1} s",
                j.crashes
            ));
        }
    }

    /// Watch one live job: count attained service, stop the rest of a
    /// crashed attempt, escalate a stop past its grace period, and settle
    /// an ended attempt. Returns whether the record changed, and the order
    /// to send after journaling it.
    pub fn watch(&mut self, j: &mut JobRecord, now: f64, dt: f64) -> (bool, Option<Order>) {
        // Bounded even for a job journaled before submissions were checked.
        let grace = j
            .spec
            .grace_s
            .unwrap_or(self.policy.grace_s)
            .min(crate::spec::MAX_GRACE_S);
        let a = j.attempt.as_mut().expect("live job has an attempt");
        let st = self.engine.status(&a.handle);
        let running = st.iter().filter(|s| **s == RankStatus::Running).count();
        j.attained_gpu_s += dt * a.gpus.len() as f64 * (running > 0) as u32 as f64;
        let failed = st
            .iter()
            .any(|s| matches!(s, RankStatus::Exited(c) if *c != Some(0)));
        let stop_since = match a.life {
            Lifecycle::Stopping {
                since_unix_s,
                killed: false,
                ..
            } => Some(since_unix_s),
            _ => None,
        };
        let mut order = None;
        let mut changed = false;
        if failed && !a.is_stopping() && running > 0 {
            a.life = Lifecycle::Stopping {
                since_unix_s: now,
                cause: StopCause::Crashed,
                killed: false,
            };
            order = Some(Order {
                handle: a.handle.clone(),
                how: Stop::Graceful,
            });
            changed = true;
        } else if running > 0 && stop_since.is_some_and(|t| now - t >= grace) {
            if let Lifecycle::Stopping { killed, .. } = &mut a.life {
                *killed = true;
            }
            order = Some(Order {
                handle: a.handle.clone(),
                how: Stop::Now,
            });
            changed = true;
        }
        if running == 0 {
            self.settle(j, &st, failed, now);
            changed = true;
        }
        (changed, order)
    }

    /// Every rank has exited: decide what the attempt's end means.
    fn settle(&mut self, j: &mut JobRecord, st: &[RankStatus], failed: bool, now: f64) {
        let done = self.engine.done(j.id);
        let a = j.attempt.take().expect("checked");
        let all_ok = st.iter().all(|s| *s == RankStatus::Exited(Some(0)));
        // Rank 0 exiting 0 after our SIGTERM means training had already
        // finished when the stop came (the protocol asks for a non-zero
        // exit on SIGTERM); the other ranks' 143 must not relaunch it.
        let (stopping, crash_stop) = match a.life {
            Lifecycle::Stopping { cause, .. } => (true, cause == StopCause::Crashed),
            _ => (false, false),
        };
        let finished_under_term = stopping && !crash_stop && st.first() == Some(&RankStatus::Exited(Some(0)));
        let crashed = crash_stop || (failed && !stopping);
        if (all_ok || finished_under_term || done) && j.status != JobStatus::Cancelled {
            j.status = JobStatus::Completed;
            j.finished_unix_s = Some(now);
            j.gpus.clear();
            j.reason = None;
        } else if crashed && j.status != JobStatus::Cancelled {
            let (rank, code) = st
                .iter()
                .enumerate()
                .find_map(|(i, s)| match s {
                    RankStatus::Exited(c) if *c != Some(0) => Some((i as u32, *c)),
                    _ => None,
                })
                .unwrap_or((0, None));
            j.last_log = self.engine.logs(&a.handle, rank, self.policy.log_lines);
            let code = code.map_or("a signal".to_string(), |c| format!("code {c}"));
            self.crash(j, &format!("rank {rank} exited with {code}"), now);
        }
        // Otherwise it was stopped on purpose (143 after SIGTERM is no failure).
    }

    /// Log lines of a job's latest attempt, rank `rank`.
    pub fn logs(&self, j: &JobRecord, rank: u32, lines: usize) -> Vec<String> {
        if j.attempts == 0 {
            return j.last_log.clone();
        }
        let h = match &j.attempt {
            Some(a) if a.n == j.attempts => a.handle.clone(),
            _ => self.engine.locate(j.id, j.attempts),
        };
        self.engine.logs(&h, rank, lines)
    }
}
