//! The daemon's one round loop. [`RoundDriver::run_rounds`] is what
//! `gpuplan serve` runs and what the tests run: ticks and rounds on the
//! injected clock (the daemon's), until an injected shutdown, mini-redis's
//! shape. A test drives it with a [`crate::clock::ManualClock`]: advance
//! the clock, then run the loop with a shutdown that is already done, and
//! it does what is due at that time and returns; nothing sleeps.
//!
//! A round (prepare, plan, apply) plans off the daemon's lock, so the API
//! stays responsive, and ticks go on while the planner runs; the round then
//! ends with a tick, so what it planned launches at once.
//!
//! Every engine and device call is an effect ([`crate::effects`]) run on a
//! blocking thread, never under the daemon's lock. The loop waits for one
//! at most [`EFFECT_WAIT_S`] on its clock: a call that has not returned by
//! then is logged and left to finish in the background, and until it does
//! the engine is busy, so ticks skip it (said once) and rounds plan without
//! retiring or adopting jobs. A hung engine thus degrades its own work and
//! stalls neither the API nor the loop.

use std::future::Future;
use std::sync::Arc;

use gpuplan_solve::{run_round, Limits, Planner};

use crate::clock::Clock;
use crate::daemon::{live_planner, SharedDaemon};
use crate::effects::{lock_within, SharedDevices, SharedEngine};
use crate::ExecError;

/// Longest the loop waits for one effect (a tick's engine calls, a
/// round's preparation) before it goes on without it: a few ticks, so a
/// slow engine command is waited for and a hung one costs the loop two
/// seconds once, not every tick.
pub const EFFECT_WAIT_S: f64 = 2.0;

/// A hook run on the daemon after each tick.
type AfterTick = Arc<dyn Fn(&crate::daemon::Daemon) + Send + Sync>;

/// Longest an effect waits for the engine or the devices that another
/// holds (a request's admission) before it counts them busy.
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// The round loop's state: the planner (its cross-round state lives here,
/// off the lock) and when the next tick and round are due.
pub struct RoundDriver {
    daemon: SharedDaemon,
    engine: SharedEngine,
    devices: SharedDevices,
    /// Since when ticks have found the engine busy (logged once a spell).
    engine_busy_since: Option<f64>,
    /// Run on the daemon after each tick, off the loop's thread (the API
    /// copies its metrics here).
    after_tick: Option<AfterTick>,
    /// `None` once the planner panicked: rounds stop, ticks go on.
    planner: Option<Box<dyn Planner>>,
    limits: Limits,
    clock: Arc<dyn Clock>,
    round_s: f64,
    tick_s: f64,
    last_round_unix_s: Option<f64>,
    last_tick_unix_s: Option<f64>,
}

/// When a period that last fired at `last` is next due (now, if it never
/// fired or the clock went back).
fn due_at(last: Option<f64>, period_s: f64, now: f64) -> f64 {
    match last {
        Some(l) if l <= now => l + period_s,
        _ => now,
    }
}

impl RoundDriver {
    /// A driver for `daemon`, with the planner, interval and time limit of
    /// its config; refuses a planner that cannot run live.
    pub fn new(daemon: SharedDaemon) -> Result<RoundDriver, ExecError> {
        let (planner, limits, interval_s, clock, (engine, devices)) = {
            let d = daemon.lock();
            let cfg = d.config();
            (
                live_planner(&cfg.planner)?,
                cfg.limits,
                cfg.interval_s,
                d.clock(),
                d.effects(),
            )
        };
        // `Config::check` holds it to at least `MIN_INTERVAL_S`.
        let round_s = interval_s;
        // Supervision's pace: a quarter of the interval, within 20-500 ms.
        let tick_s = (round_s / 4.0).clamp(0.02, 0.5);
        Ok(RoundDriver {
            daemon,
            engine,
            devices,
            engine_busy_since: None,
            after_tick: None,
            planner: Some(planner),
            limits,
            clock,
            round_s,
            tick_s,
            last_round_unix_s: None,
            last_tick_unix_s: None,
        })
    }

    /// Tick and run rounds when they are due on the clock until `shutdown`
    /// resolves. Work already due is done before `shutdown` is looked at,
    /// and a round in progress finishes first (its plan is journaled, not
    /// dropped halfway). Errors are logged and the loop goes on, as a
    /// daemon must.
    pub async fn run_rounds(&mut self, shutdown: impl Future<Output = ()>) {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let now = self.clock.now_unix_s();
            if due_at(self.last_tick_unix_s, self.tick_s, now) <= now {
                self.tick(now).await;
            }
            if self.planner.is_some() && due_at(self.last_round_unix_s, self.round_s, now) <= now {
                self.last_round_unix_s = Some(now);
                self.round().await;
            }
            let now = self.clock.now_unix_s();
            let mut next = due_at(self.last_tick_unix_s, self.tick_s, now);
            if self.planner.is_some() {
                next = next.min(due_at(self.last_round_unix_s, self.round_s, now));
            }
            tokio::select! {
                biased;
                () = &mut shutdown => return,
                () = self.clock.sleep_until(next) => {}
            }
        }
    }

    /// Run `f` on the daemon after each tick, on the tick's blocking
    /// thread under the daemon's lock (keep it short): the API copies its
    /// metrics there, so a scrape need not wait for the lock.
    pub fn after_tick(&mut self, f: impl Fn(&crate::daemon::Daemon) + Send + Sync + 'static) {
        self.after_tick = Some(Arc::new(f));
    }

    /// A tick's effects, with the engine if it is not busy.
    async fn tick(&mut self, now: f64) {
        self.last_tick_unix_s = Some(now);
        let (daemon, engine) = (self.daemon.clone(), self.engine.clone());
        let hook = self.after_tick.clone();
        let r = effect(self.clock.clone(), "tick", move || {
            let r = lock_within(&engine, BUSY_WAIT).map(|mut e| crate::effects::tick(&daemon, e.as_mut()));
            if let Some(h) = &hook {
                h(&daemon.lock());
            }
            r
        })
        .await;
        match r {
            Some(Some(r)) => {
                if let Some(since) = self.engine_busy_since.take() {
                    tracing::warn!(
                        "the engine answers again, after {:.1} s busy",
                        self.clock.now_unix_s() - since
                    );
                }
                if let Err(e) = r {
                    tracing::error!("tick: {e}");
                }
            }
            Some(None) if self.engine_busy_since.is_none() => {
                self.engine_busy_since = Some(now);
                tracing::warn!(
                    "the engine is busy (a call of it has not returned): ticks skip it until it does"
                );
            }
            Some(None) | None => {}
        }
    }

    /// Prepare (the engine's and the devices' effects off the lock, the
    /// round built under it), plan off the lock (ticking when due
    /// meanwhile), apply under it, then tick.
    async fn round(&mut self) {
        let (daemon, engine, devices) = (self.daemon.clone(), self.engine.clone(), self.devices.clone());
        let prepared = effect(self.clock.clone(), "round", move || {
            let mut e = lock_within(&engine, BUSY_WAIT);
            let mut dv = lock_within(&devices, BUSY_WAIT);
            let engine: Option<&mut dyn crate::engine::Engine> = match e.as_mut() {
                Some(g) => Some(g.as_mut()),
                None => None,
            };
            let devices: Option<&mut dyn crate::device::Devices> = match dv.as_mut() {
                Some(g) => Some(g.as_mut()),
                None => None,
            };
            let r = crate::effects::prepare(&daemon, engine, devices);
            drop((e, dv));
            r
        })
        .await;
        let prep = match prepared {
            Some(Ok(Some(p))) => p,
            Some(Ok(None)) | None => return,
            Some(Err(e)) => {
                tracing::error!("round: {e}");
                return;
            }
        };
        let Some(mut planner) = self.planner.take() else {
            return;
        };
        let limits = self.limits;
        let mut planning = tokio::task::spawn_blocking(move || {
            let plan = run_round(planner.as_mut(), &prep.round, &limits).map_err(|e| e.to_string());
            (planner, prep, plan)
        });
        let joined = loop {
            let now = self.clock.now_unix_s();
            let next_tick = due_at(self.last_tick_unix_s, self.tick_s, now);
            tokio::select! {
                joined = &mut planning => break joined,
                () = self.clock.sleep_until(next_tick) => {
                    let now = self.clock.now_unix_s();
                    self.tick(now).await;
                }
            }
        };
        let Ok((planner, prep, plan)) = joined else {
            tracing::error!("planner panicked; stopping rounds");
            return;
        };
        self.planner = Some(planner);
        match self.daemon.lock().apply(prep, plan) {
            Ok(st) => tracing::debug!(?st, "round"),
            Err(e) => tracing::error!("apply: {e}"),
        }
        let now = self.clock.now_unix_s();
        self.tick(now).await;
    }
}

/// Run `f` (blocking work: engine and device calls) on a blocking
/// thread and wait for it at most [`EFFECT_WAIT_S`] on the loop's clock;
/// `None` if it panicked or is still running (logged; it finishes in
/// the background, and feeds its results to the daemon itself).
async fn effect<R: Send + 'static>(
    clock: Arc<dyn Clock>,
    what: &str,
    f: impl FnOnce() -> R + Send + 'static,
) -> Option<R> {
    let mut task = tokio::task::spawn_blocking(f);
    let deadline = clock.now_unix_s() + EFFECT_WAIT_S;
    tokio::select! {
        r = &mut task => match r {
            Ok(r) => Some(r),
            Err(_) => {
                tracing::error!("{what}: an engine or device call panicked");
                None
            }
        },
        () = clock.sleep_until(deadline) => {
            tracing::warn!(
                "{what}: engine or device calls are still running after {EFFECT_WAIT_S} s; \
                 the loop goes on and they finish in the background"
            );
            None
        }
    }
}

/// The loop itself, on a manual clock and the scripted engine: nothing
/// sleeps; time moves only when a test advances the clock.
#[cfg(test)]
mod tests {
    use gpuplan_core::JobId;

    use super::*;
    use crate::clock::ManualClock;
    use crate::daemon::{Config, Daemon};
    use crate::device::FakeDevices;
    use crate::engine::FakeEngine;
    use crate::jobs::JobStatus;
    use crate::spec::JobSubmission;

    struct Rig {
        dir: std::path::PathBuf,
        clock: ManualClock,
        shared: SharedDaemon,
        rt: tokio::runtime::Runtime,
    }

    impl Rig {
        fn new(tag: &str, planner: &str, nodes: u32, gpus: u32) -> Rig {
            let dir = std::env::temp_dir().join(format!("gpuplan-driver-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let clock = ManualClock::new(1_000_000.0);
            let d = Daemon::open_with_clock(
                Config::new(dir.clone(), planner),
                Box::new(FakeDevices::new(nodes, gpus)),
                Box::new(FakeEngine::new(clock.clone())),
                Arc::new(clock.clone()),
            )
            .unwrap();
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            Rig {
                dir,
                clock,
                shared: SharedDaemon::new(d),
                rt,
            }
        }

        fn submit(&self, toml: &str) -> JobId {
            let spec = JobSubmission::from_toml(toml, "t").unwrap();
            self.shared.lock().submit(spec).unwrap().0
        }

        fn rounds(&self) -> u64 {
            self.shared.lock().rounds()
        }

        fn phase(&self, id: JobId) -> crate::jobs::Phase {
            self.shared.lock().view(id).unwrap().phase
        }
    }

    impl Drop for Rig {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// With a shutdown already done, the loop does what is due at the
    /// clock's time and returns: the first round at once (ending with the
    /// tick that launches it), then nothing until the clock moves; a tick
    /// period on, a tick (which sees a crash); an interval on, the next
    /// round.
    #[test]
    fn the_loop_does_what_is_due_on_the_clock_then_stops() {
        let rig = Rig::new("due", "greedy", 1, 4);
        let mut driver = RoundDriver::new(rig.shared.clone()).unwrap();
        let a =
            rig.submit("name = \"a\"\ncommand = \"run=1000\"\nmin_gpus = 1\nmax_gpus = 2\nbatch_size = 8\n");
        let crash = rig
            .submit("name = \"c\"\ncommand = \"run=1 exit=3\"\nmin_gpus = 1\nmax_gpus = 1\nbatch_size = 8\n");
        // Jobs that waited a while are worth starting.
        rig.clock.advance(600.0);
        rig.rt.block_on(driver.run_rounds(async {}));
        assert_eq!(rig.rounds(), 1);
        for id in [a, crash] {
            assert_eq!(rig.phase(id), "running", "planned and launched in one pass");
        }
        rig.rt.block_on(driver.run_rounds(async {}));
        assert_eq!(rig.rounds(), 1, "the clock did not move");
        rig.clock.advance(1.0);
        rig.rt.block_on(driver.run_rounds(async {}));
        let v = rig.shared.lock().view(crash).unwrap();
        assert_eq!(
            (v.phase.as_str(), v.crashes),
            ("backoff", 1),
            "a tick saw the exit"
        );
        assert_eq!(rig.rounds(), 1, "1 s is not an interval");
        rig.clock.advance(59.0);
        rig.rt.block_on(driver.run_rounds(async {}));
        assert_eq!(rig.rounds(), 2);
        let v = rig.shared.lock().view(crash).unwrap();
        assert_eq!(
            (v.phase.as_str(), v.attempts),
            ("running", 2),
            "re-planned after its back-off"
        );
        assert_eq!(rig.phase(a), "running");
    }

    /// Waiting for the next round, the loop returns when the shutdown
    /// fires, and runs a round when the clock reaches the interval: it
    /// waits on the injected clock, not on wall time.
    #[test]
    fn a_waiting_loop_follows_the_clock_and_stops_on_shutdown() {
        let rig = Rig::new("wait", "greedy", 1, 4);
        let mut driver = RoundDriver::new(rig.shared.clone()).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shared = rig.shared.clone();
        let clock = rig.clock.clone();
        rig.rt.block_on(async move {
            let task = tokio::spawn(async move {
                driver
                    .run_rounds(async {
                        let _ = stopped.await;
                    })
                    .await
            });
            // No job: a round has nothing to plan; its effects (devices,
            // engine) run on blocking threads, so the loop gets real time
            // beside its turns to reach its wait.
            let settle = || async {
                for _ in 0..50 {
                    tokio::task::yield_now().await;
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
            };
            settle().await;
            assert_eq!(shared.lock().rounds(), 1);
            clock.advance(30.0);
            settle().await;
            assert_eq!(shared.lock().rounds(), 1);
            assert!(!task.is_finished());
            clock.advance(30.0);
            settle().await;
            assert_eq!(shared.lock().rounds(), 2, "woken by the clock");
            stop.send(()).unwrap();
            task.await.unwrap();
        });
        assert_eq!(rig.rounds(), 2, "no round after the shutdown");
    }

    /// Drift case 1 of issue 12: tiresias does not honour the interference
    /// rule, and three 6-GPU jobs on 3×4 GPUs need two of them to share a
    /// node. The daemon once threw such plans away every round, so none
    /// ever started; the pipeline now relaxes the rule, and all complete.
    /// Rounds come from the production loop, one interval at a time.
    #[test]
    fn tiresias_runs_three_six_gpu_jobs_on_3x4_to_completion() {
        let rig = Rig::new("tir", "tiresias", 3, 4);
        let mut driver = RoundDriver::new(rig.shared.clone()).unwrap();
        let interval_s = rig.shared.lock().config().interval_s;
        let ids: Vec<JobId> = (0..3)
            .map(|_| {
                rig.submit(
                    "name = \"six\"\ncommand = \"run=1\"\nmin_gpus = 6\nmax_gpus = 6\nbatch_size = 48\nmax_batch_size = 480\n",
                )
            })
            .collect();
        let done = |rig: &Rig| {
            let d = rig.shared.lock();
            let all = d
                .jobs()
                .filter(|j| ids.contains(&j.id))
                .all(|j| j.status.is_final());
            all
        };
        let mut rounds = 0;
        while !done(&rig) {
            rounds += 1;
            assert!(rounds < 30, "not all complete: {:?}", rig.shared.lock().views());
            rig.rt.block_on(driver.run_rounds(async {}));
            assert_eq!(rig.rounds(), rounds, "one round per interval");
            let note = rig.shared.lock().last_round().and_then(|st| st.note.clone());
            assert!(note.is_none(), "round {rounds}: {note:?}");
            rig.clock.advance(interval_s);
        }
        let d = rig.shared.lock();
        for j in d.jobs().filter(|j| ids.contains(&j.id)) {
            assert_eq!(j.status, JobStatus::Completed, "{:?}", d.view(j.id));
            assert_eq!(j.max_gpus_used, 6);
            // A fixed-batch planner keeps the user's batch, though the spec
            // would let it grow.
            assert_eq!(j.batch_size, 48);
        }
    }
}
