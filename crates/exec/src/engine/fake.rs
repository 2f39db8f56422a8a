//! An engine with no processes: each attempt follows a script read from its
//! command, on an injected clock. Tests of supervision (crashes, grace
//! periods, adoption after a restart) drive time instead of sleeping, and
//! the trait is shown to be all the supervisor needs.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use gpuplan_core::JobId;

use super::{AttemptSpec, Engine, Handle, RankProc, RankStatus, Stop};
use crate::clock::{Clock, ManualClock};
use crate::ExecError;

/// What a fake attempt does, from its command's words:
/// `run=S` (seconds until it exits; default never), `exit=C` (its code,
/// default 0), `ignore-term` (a graceful stop does nothing), `done` (it
/// marks the job done as it starts), `fail-start` (the engine refuses it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FakeScript {
    /// Seconds until the attempt exits; `None`: never.
    pub run_s: Option<f64>,
    /// Its exit code.
    pub exit: i32,
    /// A graceful stop does nothing; only a kill ends it.
    pub ignore_term: bool,
    /// It marks the job done as it starts.
    pub done: bool,
    /// The engine refuses to start it.
    pub fail_start: bool,
}

impl FakeScript {
    /// Read a command's words; words it does not know are ignored.
    pub fn parse(command: &str) -> FakeScript {
        let mut s = FakeScript::default();
        for w in command.split_whitespace() {
            match w.split_once('=') {
                Some(("run", v)) => s.run_s = v.parse().ok(),
                Some(("exit", v)) => s.exit = v.parse().unwrap_or(0),
                _ if w == "ignore-term" => s.ignore_term = true,
                _ if w == "done" => s.done = true,
                _ if w == "fail-start" => s.fail_start = true,
                _ => {}
            }
        }
        s
    }
}

#[derive(Debug)]
struct FakeAttempt {
    spec: AttemptSpec,
    script: FakeScript,
    started_s: f64,
    /// Set when it ended early: by a stop, or SIGKILL.
    ended: Option<Option<i32>>,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: i32,
    /// By the attempt's directory, as a restarted daemon would find it.
    attempts: BTreeMap<PathBuf, FakeAttempt>,
    done: Vec<JobId>,
    /// Every stop asked, in order: (job, attempt, how).
    stops: Vec<(JobId, u32, Stop)>,
}

/// Clones share one state: a test keeps a clone to look inside, and hands
/// another to a restarted daemon, as live processes outlive a daemon.
#[derive(Debug, Clone)]
pub struct FakeEngine {
    inner: Arc<Mutex<Inner>>,
    clock: ManualClock,
}

impl FakeEngine {
    /// An engine with nothing started, on the test's clock.
    pub fn new(clock: ManualClock) -> Self {
        FakeEngine {
            inner: Arc::default(),
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every attempt started so far, by job and attempt number.
    pub fn started(&self) -> Vec<AttemptSpec> {
        let mut v: Vec<AttemptSpec> = self.lock().attempts.values().map(|a| a.spec.clone()).collect();
        v.sort_by_key(|s| (s.job, s.attempt));
        v
    }

    /// Every stop asked so far: (job, attempt, how).
    pub fn stops(&self) -> Vec<(JobId, u32, Stop)> {
        self.lock().stops.clone()
    }

    fn rank_status(&self, a: &FakeAttempt) -> RankStatus {
        if let Some(e) = a.ended {
            return RankStatus::Exited(e);
        }
        match a.script.run_s {
            Some(r) if self.clock.now_unix_s() - a.started_s >= r => RankStatus::Exited(Some(a.script.exit)),
            _ => RankStatus::Running,
        }
    }
}

impl Engine for FakeEngine {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn locate(&self, job: JobId, attempt: u32) -> Handle {
        Handle::new(PathBuf::from(format!("fake/{}/{attempt}", job.0)))
    }

    fn start(&mut self, spec: &AttemptSpec, h: &mut Handle) -> Result<(), ExecError> {
        let script = FakeScript::parse(&spec.command);
        if script.fail_start {
            return Err(ExecError::Config(format!("fake: {} refused", spec.command)));
        }
        let now = self.clock.now_unix_s();
        let mut g = self.lock();
        if script.done {
            g.done.push(spec.job);
        }
        let mut ranks = Vec::new();
        for r in 0..spec.ranks() {
            g.next_id += 1;
            ranks.push(RankProc {
                rank: r,
                pgid: 100 + g.next_id,
            });
        }
        h.ranks = ranks;
        g.attempts.insert(
            h.dir.clone(),
            FakeAttempt {
                spec: spec.clone(),
                script,
                started_s: now,
                ended: None,
            },
        );
        Ok(())
    }

    fn status(&mut self, h: &Handle) -> Vec<RankStatus> {
        let g = self.lock();
        match g.attempts.get(&h.dir) {
            Some(a) => vec![self.rank_status(a); h.ranks.len()],
            None => vec![RankStatus::Exited(None); h.ranks.len()],
        }
    }

    fn stop(&mut self, h: &Handle, how: Stop) {
        let clock = self.clock.now_unix_s();
        let mut g = self.lock();
        let Some(a) = g.attempts.get_mut(&h.dir) else {
            return;
        };
        let key = (a.spec.job, a.spec.attempt, how);
        let finished = a.script.run_s.is_some_and(|r| clock - a.started_s >= r);
        if a.ended.is_none() && !finished {
            match how {
                Stop::Graceful if !a.script.ignore_term => a.ended = Some(Some(143)),
                Stop::Graceful => {}
                Stop::Now => a.ended = Some(None),
            }
        }
        g.stops.push(key);
    }

    fn adopt(&mut self, h: &mut Handle, ranks: u32) -> bool {
        let found = self.lock().attempts.contains_key(&h.dir);
        if found {
            let keep = h.ranks.clone();
            h.ranks = (0..ranks)
                .map(|r| {
                    keep.iter()
                        .find(|p| p.rank == r)
                        .cloned()
                        .unwrap_or(RankProc { rank: r, pgid: 0 })
                })
                .collect();
        } else {
            h.ranks = (0..ranks).map(|r| RankProc { rank: r, pgid: 0 }).collect();
        }
        found
    }

    fn logs(&self, h: &Handle, rank: u32, lines: usize) -> Vec<String> {
        let g = self.lock();
        match g.attempts.get(&h.dir) {
            Some(a) => vec![format!("fake rank {rank}: {}", a.spec.command)]
                .into_iter()
                .take(lines)
                .collect(),
            None => Vec::new(),
        }
    }

    fn done(&self, job: JobId) -> bool {
        self.lock().done.contains(&job)
    }
}
