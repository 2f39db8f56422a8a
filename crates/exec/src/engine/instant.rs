//! A test-only engine whose attempts finish as soon as they start: the
//! proof that an engine is one module and one line in
//! [`super::REGISTRY`]. It brings its own device source (`fake:` shapes
//! only) and its own flag (`--instant-exit`), and keeps its own key in the
//! handle; the daemon runs it through the same round loop as every other
//! engine.

use gpuplan_core::JobId;

use super::flag::{AnyFlag, Flag};
use super::{AttemptSpec, Backends, Engine, EngineEntry, EngineSetup, Handle, RankProc, RankStatus, Stop};
use crate::ExecError;

pub(super) const ENTRY: EngineEntry = EngineEntry {
    name: "instant",
    description: "test only: every attempt completes at once, on fake devices",
    flags: &[&EXIT as &dyn AnyFlag],
    build,
};

/// `--instant-exit CODE`: what every rank exits with, so a test can have
/// attempts fail as well as complete.
const EXIT: Flag<i32> = Flag {
    name: "instant-exit",
    value_name: "CODE",
    help: "Exit code of every rank of every attempt",
    default: Some("0"),
    parse: |s| s.parse().map_err(|_| format!("'{s}' is not an exit code")),
};

#[test]
fn flag_instant_exit() {
    use super::EngineOptions;
    assert_eq!(EXIT.get(&EngineOptions::new()).unwrap(), Some(0));
    assert_eq!(
        EXIT.get(&EngineOptions::new().with("instant-exit", "3")).unwrap(),
        Some(3)
    );
    let e = EXIT
        .get(&EngineOptions::new().with("instant-exit", "x"))
        .unwrap_err();
    assert_eq!(e.to_string(), "--instant-exit x: 'x' is not an exit code");
}

fn build(setup: &EngineSetup) -> Result<Backends, ExecError> {
    let shape = setup.devices.strip_prefix("fake:").ok_or_else(|| {
        ExecError::Config(format!(
            "--engine instant needs fake devices, not {}",
            setup.devices
        ))
    })?;
    let exit = EXIT.get(setup.options)?.unwrap_or(0);
    Ok((
        Box::new(crate::device::FakeDevices::parse(shape)?),
        Box::new(Instant { exit }),
    ))
}

/// The handle key this engine keeps: how many ranks it started.
const STARTED: &str = "instant_ranks";

struct Instant {
    /// `--instant-exit`.
    exit: i32,
}

impl Engine for Instant {
    fn name(&self) -> &'static str {
        "instant"
    }

    fn locate(&self, job: JobId, attempt: u32) -> Handle {
        Handle::new(format!("instant/{}/{attempt}", job.0).into())
    }

    fn start(&mut self, spec: &AttemptSpec, h: &mut Handle) -> Result<(), ExecError> {
        h.ranks = (0..spec.ranks()).map(|rank| RankProc { rank, pgid: 0 }).collect();
        h.engine.set_u64(STARTED, Some(u64::from(spec.ranks())));
        Ok(())
    }

    fn status(&mut self, h: &Handle) -> Vec<RankStatus> {
        let n = h.engine.u64(STARTED).unwrap_or(0) as usize;
        vec![RankStatus::Exited(Some(self.exit)); n.max(1)]
    }

    fn stop(&mut self, _: &Handle, _: Stop) {}

    fn adopt(&mut self, h: &mut Handle, _: u32) -> bool {
        h.engine.u64(STARTED).is_some()
    }

    fn logs(&self, _: &Handle, _: u32, _: usize) -> Vec<String> {
        Vec::new()
    }

    fn done(&self, _: JobId) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::super::{build, names, tests::setup, AttemptSpec, EngineOptions, Handle, RankStatus};
    use crate::clock::{Clock, ManualClock};
    use crate::{Config, Daemon, JobStatus, JobSubmission, RoundDriver, SharedDaemon};

    /// Its flag is offered by the registry, reaches it, and is refused
    /// with any other engine, naming this one.
    #[test]
    fn its_own_flag_reaches_it_and_no_other_engine() {
        let dir = std::env::temp_dir();
        let o = EngineOptions::new().with("instant-exit", "3");
        let (_, mut engine) = build("instant", &setup("fake:1x1", &o, 1, &dir)).unwrap();
        let spec = AttemptSpec {
            job: gpuplan_core::JobId(1),
            attempt: 1,
            command: "true".into(),
            nodes: vec![("n".into(), vec!["g".into()])],
            env: Vec::new(),
            uid: None,
            token: String::new(),
        };
        let mut h = Handle::new("x".into());
        engine.start(&spec, &mut h).unwrap();
        assert_eq!(engine.status(&h), vec![RankStatus::Exited(Some(3))]);
        let e = build("local", &setup("fake:1x1", &o, 1, &dir))
            .err()
            .unwrap()
            .to_string();
        assert_eq!(e, "--instant-exit is an option of --engine instant");
        let bad = EngineOptions::new().with("instant-exit", "x");
        let e = build("instant", &setup("fake:1x1", &bad, 1, &dir))
            .err()
            .unwrap()
            .to_string();
        assert_eq!(e, "--instant-exit x: 'x' is not an exit code");
    }

    /// Registered by its one line: listed, built by name from the serve
    /// flags, refusing what it cannot use, and run by the daemon's own
    /// round loop until its job completes.
    #[test]
    fn an_engine_added_as_one_module_runs_jobs_through_the_daemon() {
        assert!(names().contains(&"instant"));
        let dir = std::env::temp_dir().join(format!("gpuplan-instant-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let none = EngineOptions::new();
        let e = build("instant", &setup("nvml", &none, 1, &dir))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("needs fake devices"), "{e}");
        let (devices, engine) = build("instant", &setup("fake:1x2", &none, 1, &dir)).unwrap();
        assert_eq!(engine.name(), "instant");
        let clock = ManualClock::new(1_000_000.0);
        let cfg = Config::new(dir.clone(), "greedy");
        let d = Daemon::open_with_clock(cfg, devices, engine, std::sync::Arc::new(clock.clone())).unwrap();
        let shared = SharedDaemon::new(d);
        let spec = JobSubmission::from_toml(
            "name = \"i\"\ncommand = \"true\"\nmin_gpus = 1\nmax_gpus = 2\nbatch_size = 8\n",
            "t",
        )
        .unwrap();
        let (id, _) = shared.lock().submit(spec).unwrap();
        let mut driver = RoundDriver::new(shared.clone()).unwrap();
        let interval_s = shared.lock().config().interval_s;
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        // A job that waited a while is worth starting.
        clock.advance(600.0);
        for _ in 0..3 {
            rt.block_on(driver.run_rounds(async {}));
            clock.advance(interval_s);
        }
        let d = shared.lock();
        let j = d.jobs().find(|j| j.id == id).unwrap();
        assert_eq!(
            j.status,
            JobStatus::Completed,
            "{:?} at {}",
            d.view(id),
            clock.now_unix_s()
        );
        drop(d);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
