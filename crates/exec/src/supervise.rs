//! The supervisor: starts, watches and stops attempts through the engine,
//! and turns what it sees into job state (completed, crashed with back-off,
//! failed, stopped on purpose).
//!
//! It is a state machine and holds no engine: what the engine saw of an
//! attempt comes in as a [`Seen`] (read off the daemon's lock by
//! [`observe`]), a start's outcome as a `Result`, and what it decides goes
//! out as [`Order`]s. The daemon journals the record first and only then
//! sends them, so a crash in between never leaves a signalled job that the
//! journal thinks untouched. Time comes in as an argument, read by the
//! daemon from its injected clock.

use gpuplan_core::JobId;

use crate::engine::{AttemptSpec, Engine, Handle, RankStatus, Stop};
use crate::jobs::{Attempt, JobRecord, JobStatus, Lifecycle, StopCause};
use crate::ExecError;

/// A live attempt to look at through the engine, listed under the
/// daemon's lock and looked at off it.
#[derive(Debug, Clone)]
pub struct Watched {
    pub id: JobId,
    /// The attempt's number: what is seen applies to that attempt only.
    pub n: u32,
    pub handle: Handle,
}

/// What the engine showed of one attempt: each rank's state and, once no
/// rank runs, whether the done-file is there and the log of the rank that
/// failed (rank 0 if none did), for the record of a crash.
#[derive(Debug, Clone)]
pub struct Seen {
    pub id: JobId,
    pub n: u32,
    pub st: Vec<RankStatus>,
    pub done: bool,
    pub logs: Vec<String>,
}

/// Look at an attempt through the engine: an effect, run off the daemon's
/// lock (it polls processes, reads the job's files, or runs the engine's
/// commands).
pub fn observe(engine: &mut dyn Engine, w: &Watched, log_lines: usize) -> Seen {
    let st = engine.status(&w.handle);
    let ended = !st.contains(&RankStatus::Running);
    let (done, logs) = if ended {
        let rank = st
            .iter()
            .position(|s| matches!(s, RankStatus::Exited(c) if *c != Some(0)))
            .unwrap_or(0) as u32;
        (engine.done(w.id), engine.logs(&w.handle, rank, log_lines))
    } else {
        (false, Vec::new())
    };
    Seen {
        id: w.id,
        n: w.n,
        st,
        done,
        logs,
    }
}

/// Send orders, after the journal holds the state they follow from: an
/// effect, run off the daemon's lock.
pub fn send(engine: &mut dyn Engine, orders: Vec<Order>) {
    for o in orders {
        engine.stop(&o.handle, o.how);
    }
}

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
}

pub struct Supervisor {
    pub policy: Policy,
}

impl Supervisor {
    pub fn new(policy: Policy) -> Self {
        Supervisor { policy }
    }

    /// Begin stopping the job's attempt, if it has one not already stopping
    /// (the first stop's time keeps counting the grace period).
    pub fn order_stop(j: &mut JobRecord, now: f64) -> Option<Order> {
        // What the stop throws away, for the restart charge of its next rounds.
        if let Some(lost) = j.since_checkpoint_s(now) {
            j.checkpoint.lost_s += lost;
        }
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
    pub fn recover(&self, engine: &mut dyn Engine, j: &mut JobRecord, now: f64) -> Option<Order> {
        let a = j.attempt.as_mut()?;
        let started = engine.adopt(&mut a.handle, a.gpus.len() as u32);
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
        engine: &dyn Engine,
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
            token: j.token.clone(),
        };
        j.attempt = Some(Attempt {
            n: j.attempts,
            gpus: j.gpus.clone(),
            handle: engine.locate(j.id, j.attempts),
            life: Lifecycle::Starting,
            started_unix_s: now,
        });
        spec
    }

    /// The outcome of starting an intended attempt (the engine's start, run
    /// off the daemon's lock): the handle it filled in, or why it failed.
    /// A start failure is a crash (or, when the engine's own command
    /// failed, waits for the next round). An attempt ordered to stop while
    /// it started is sent the stop now that it has ranks to signal.
    pub fn started(
        &self,
        j: &mut JobRecord,
        n: u32,
        result: Result<Handle, ExecError>,
        now: f64,
    ) -> Option<Order> {
        let a = j.attempt.as_mut().filter(|a| a.n == n)?;
        match result {
            Ok(h) => {
                a.handle = h;
                if a.is_stopping() {
                    return Some(Order {
                        handle: a.handle.clone(),
                        how: Stop::Graceful,
                    });
                }
                a.life = Lifecycle::Running;
            }
            // Cancelled while it started: nothing of it runs.
            Err(_) if j.status.is_final() => j.attempt = None,
            // The engine's own command failed (it did not answer): not
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
        None
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
    pub fn watch(&self, j: &mut JobRecord, seen: &Seen, now: f64, dt: f64) -> (bool, Option<Order>) {
        // Bounded even for a job journaled before submissions were checked.
        let grace = j
            .spec
            .grace_s
            .unwrap_or(self.policy.grace_s)
            .min(crate::spec::MAX_GRACE_S);
        let Some(a) = j.attempt.as_mut().filter(|a| a.n == seen.n) else {
            // Seen of an attempt that has ended or been replaced since.
            return (false, None);
        };
        let st = &seen.st;
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
            self.settle(j, seen, failed, now);
            changed = true;
        }
        (changed, order)
    }

    /// Every rank has exited: decide what the attempt's end means.
    fn settle(&self, j: &mut JobRecord, seen: &Seen, failed: bool, now: f64) {
        let (st, done) = (&seen.st, seen.done);
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
            // `observe` read this rank's log.
            j.last_log = seen.logs.clone();
            let code = code.map_or("a signal".to_string(), |c| format!("code {c}"));
            self.crash(j, &format!("rank {rank} exited with {code}"), now);
        }
        // Otherwise it was stopped on purpose (143 after SIGTERM is no failure).
    }
}
