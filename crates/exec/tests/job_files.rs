//! Every file a job touches, turned against the daemon: real processes on
//! the local engine.
//!
//! Issue 49, items 1-2: an exit file that is a FIFO nobody writes (a plain
//! `open` never returns) or a link to `/dev/zero` (a plain read never
//! ends), a done-file that is a FIFO. The job runs as another user, as a
//! hostile one would, so this needs root; elsewhere it says so and passes.
//! Each case runs the job, then opens a second daemon on the same state
//! directory (it adopts the attempt and reads its exit file, which the
//! first one, having reaped the wrapper itself, need not) and runs its
//! production loop on a thread that must come back.
//!
//! Issue 33, items 1-2 (moved here from the daemon's unit tests): logs
//! replaced by links, and the modes of a job's files; and the rest of the
//! daemon's tests that run real processes (the done-file, grace periods
//! and back-off on the injected clock).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use gpuplan_core::{Allocation, NodeId, Plan, PlanStatus};
use gpuplan_exec::engine::LocalEngine;
use gpuplan_exec::{Config, Daemon, FakeDevices, JobSubmission, ManualClock, RoundDriver, SharedDaemon};
use gpuplan_solve::Decision;

const NOBODY: u32 = 65534;

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn open(dir: &std::path::Path) -> Daemon {
    let mut cfg = Config::new(dir.to_path_buf(), "greedy");
    cfg.interval_s = 0.2;
    cfg.max_crashes = 1;
    Daemon::open(
        cfg,
        Box::new(FakeDevices::new(1, 2)),
        Box::new(LocalEngine::new(dir)),
    )
    .unwrap()
}

/// Run `f` on a thread; `None` if it has not returned within `limit`
/// (the thread is left behind: the daemon it holds is hung).
fn within<R: Send + 'static>(limit: Duration, f: impl FnOnce() -> R + Send + 'static) -> Option<R> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).ok()
}

/// Rounds and ticks of the production loop for `secs` of wall time,
/// while this thread takes the daemon's lock every 20 ms: the longest
/// wait for the lock, and whether `done` held at the end.
fn run_loop(shared: &SharedDaemon, secs: f64, done: impl Fn(&Daemon) -> bool) -> (Duration, bool) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut driver = RoundDriver::new(shared.clone()).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = rt.spawn(async move {
        driver
            .run_rounds(async {
                let _ = stopped.await;
            })
            .await
    });
    let t0 = Instant::now();
    let mut worst = Duration::ZERO;
    let mut ok = false;
    while t0.elapsed().as_secs_f64() < secs {
        let asked = Instant::now();
        let d = shared.lock();
        worst = worst.max(asked.elapsed());
        ok = done(&d);
        drop(d);
        if ok {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = stop.send(());
    let _ = rt.block_on(task);
    (worst, ok)
}

fn hostile(tag: &str, command: &str, file: &str) {
    if !root() {
        eprintln!("skipped: running a job as uid {NOBODY} needs root");
        return;
    }
    let dir = std::env::temp_dir().join(format!("gpuplan-hostile-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut d = open(&dir);
    let spec = JobSubmission::from_toml(
        &format!(
            "name = \"evil\"\nmin_gpus = 1\nmax_gpus = 1\nbatch_size = 32\nuid = {NOBODY}\ncommand = {}\n",
            toml_string(command)
        ),
        "t",
    )
    .unwrap();
    let (id, _) = d.submit(spec).unwrap();
    // One GPU by hand, as a planner would give it, and the launch.
    plan(&mut d, id, 1);
    let planted = dir.join(format!("jobs/{}/{file}", id.0));
    let t0 = Instant::now();
    while std::fs::symlink_metadata(&planted).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the job never made {}",
            planted.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Give the job its moment to kill its wrapper.
    std::thread::sleep(Duration::from_millis(300));
    drop(d);
    // A second daemon adopts the attempt and reads its exit file, in the
    // production loop, while this thread takes its lock.
    let dir2 = dir.clone();
    let r = within(Duration::from_secs(40), move || {
        let shared = SharedDaemon::new(open(&dir2));
        let (worst, ended) = run_loop(&shared, 20.0, |d| {
            d.view(id).is_some_and(|v| v.crashes >= 1 || v.status.is_final())
        });
        let v = shared.lock().view(id);
        (worst, ended, v)
    });
    let (worst, ended, v) = r.expect("the restarted daemon hung on the job's file");
    assert!(ended, "{v:?}");
    assert!(
        worst < Duration::from_secs(2),
        "the daemon's lock was held {worst:?} while a job's file was in the way"
    );
    let v = v.unwrap();
    assert_eq!(
        v.status,
        gpuplan_exec::JobStatus::Failed,
        "refused files read as a kill: {v:?}"
    );
    assert!(
        v.reason.as_deref().is_some_and(|r| r.contains("a signal")),
        "{v:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Issue 49, item 1: a FIFO as the exit file (and as the done-file).
#[test]
fn a_fifo_for_an_exit_or_done_file_hangs_nothing() {
    hostile(
        "fifo",
        "A=$GPUPLAN_CHECKPOINT_DIR/../attempt-$GPUPLAN_ATTEMPT; mkfifo $A/rank-0.exit; mkfifo $GPUPLAN_DONE_FILE; kill -9 $PPID",
        "attempt-1/rank-0.exit",
    );
}

/// Issue 49, item 2: `/dev/zero` behind a link as the exit file.
#[test]
fn dev_zero_behind_the_exit_file_is_not_read() {
    hostile(
        "zero",
        "A=$GPUPLAN_CHECKPOINT_DIR/../attempt-$GPUPLAN_ATTEMPT; ln -s /dev/zero $A/rank-0.exit; kill -9 $PPID",
        "attempt-1/rank-0.exit",
    );
}

fn daemon(state: &std::path::Path) -> Daemon {
    let mut cfg = Config::new(state.to_path_buf(), "greedy");
    // A SIGTERM that lands while a rank's shell is still starting can be
    // lost; SIGKILL after the grace period covers it, so waits below
    // allow several grace periods.
    cfg.grace_s = 1.0;
    Daemon::open(
        cfg,
        Box::new(FakeDevices::new(1, 4)),
        Box::new(LocalEngine::new(state)),
    )
    .unwrap()
}

/// Submit `command` (as `uid`), give it one GPU by hand, launch it, and
/// wait for its rank log: (job, the log's path).
fn launch_local(
    d: &mut Daemon,
    command: &str,
    uid: Option<u32>,
) -> (gpuplan_core::JobId, std::path::PathBuf) {
    let mut sub = JobSubmission::from_toml(
        "name = \"s\"\ncommand = \"exec sleep 30\"\nmin_gpus = 1\nmax_gpus = 4\nbatch_size = 8\n",
        "t",
    )
    .unwrap();
    sub.command = command.into();
    sub.uid = uid;
    let (id, _) = d.submit(sub).unwrap();
    plan(d, id, 1);
    let log = d
        .config()
        .state_dir
        .join(format!("jobs/{}/attempt-1/rank-0.log", id.0));
    for _ in 0..250 {
        if std::fs::symlink_metadata(&log).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (id, log)
}

/// Give job `id` `k` GPUs of node 0 by hand, as a planner would, and tick.
fn plan(d: &mut Daemon, id: gpuplan_core::JobId, k: u32) {
    let prep = d.prepare().unwrap().unwrap();
    let mut plan = Plan::new("hand", PlanStatus::Feasible);
    plan.allocations
        .insert(id, Allocation::from_counts(&[(NodeId(0), k)]));
    gpuplan_core::bind_plan(&prep.round, &mut plan);
    let decision = Decision::new(&prep.round, plan);
    d.apply(prep, Ok(decision)).unwrap();
    d.tick().unwrap();
}

fn wait_stopped(d: &mut Daemon, id: gpuplan_core::JobId) {
    for _ in 0..500 {
        d.tick().unwrap();
        if d.jobs().any(|j| j.id == id && j.attempt.is_none()) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("job did not stop");
}

/// A root-only file for a job to try to read.
fn secret(tag: &str) -> std::path::PathBuf {
    use std::os::unix::fs::OpenOptionsExt;
    let p = std::env::temp_dir().join(format!("gpuplan-secret-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&p)
        .unwrap();
    std::io::Write::write_all(&mut f, b"TOP-SECRET\n").unwrap();
    p
}

/// Issue 33, item 1: a rank log replaced by a link (to a file the job
/// could not read) is refused by the logs endpoint, not followed.
#[test]
fn a_symlinked_rank_log_is_refused_by_the_logs_endpoint() {
    let dir = std::env::temp_dir().join(format!("gpuplan-daemon-link-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut d = daemon(&dir);
    let (id, log) = launch_local(&mut d, "exec sleep 30", None);
    let secret = secret("link");
    std::fs::remove_file(&log).unwrap();
    std::os::unix::fs::symlink(&secret, &log).unwrap();
    let lines = d.logs(id, 0, 10).unwrap();
    assert!(!lines.iter().any(|l| l.contains("TOP-SECRET")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("refused")), "{lines:?}");
    // A hard link is refused too (where the kernel lets one be made).
    std::fs::remove_file(&log).unwrap();
    if std::fs::hard_link(&secret, &log).is_ok() {
        let lines = d.logs(id, 0, 10).unwrap();
        assert!(!lines.iter().any(|l| l.contains("TOP-SECRET")), "{lines:?}");
    }
    d.cancel(id).unwrap();
    wait_stopped(&mut d, id);
    let _ = std::fs::remove_file(&secret);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 33, items 1 and 2: with the daemon root and the job another
/// user (nobody, 65534), the job owns its attempt directory and swaps
/// its own log for a link to a root-only file; the logs endpoint does
/// not read it back. Skipped (with a message) when not root.
#[test]
fn a_job_run_as_another_user_cannot_read_a_root_file_through_its_log() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to run a job as another user");
        return;
    }
    let dir = std::env::temp_dir().join(format!("gpuplan-daemon-uid-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut d = daemon(&dir);
    let secret = secret("uid");
    let cmd = format!(
        "p=$(readlink /proc/$$/fd/1); rm -f \"$p\" && ln -s {} \"$p\"; exec sleep 30",
        secret.display()
    );
    let (id, log) = launch_local(&mut d, &cmd, Some(65534));
    for _ in 0..250 {
        if std::fs::symlink_metadata(&log).is_ok_and(|m| m.file_type().is_symlink()) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        std::fs::symlink_metadata(&log).unwrap().file_type().is_symlink(),
        "the job made its link"
    );
    let lines = d.logs(id, 0, 10).unwrap();
    assert!(!lines.iter().any(|l| l.contains("TOP-SECRET")), "{lines:?}");
    let view = d.views();
    assert!(!serde_json::to_string(&view).unwrap().contains("TOP-SECRET"));
    d.cancel(id).unwrap();
    wait_stopped(&mut d, id);
    let _ = std::fs::remove_file(&secret);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 33, item 2: the state directory's job files are not readable
/// by other users: `jobs` and `jobs/ID` search-only, attempt and
/// checkpoint directories 0700, logs 0600; files an earlier release
/// made 0755/0644 are tightened at start.
#[test]
fn job_directories_and_logs_are_private_to_the_job() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("gpuplan-daemon-modes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut d = daemon(&dir);
    let (id, log) = launch_local(&mut d, "echo hi; exec sleep 30", None);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let attempt = log.parent().unwrap().to_path_buf();
    let job = attempt.parent().unwrap().to_path_buf();
    let expect = [
        (dir.clone(), 0o711),
        (dir.join("jobs"), 0o711),
        (job.clone(), 0o711),
        (attempt.clone(), 0o700),
        (job.join("checkpoint"), 0o700),
        (log.clone(), 0o600),
        // The job's token: in a file of its own, never in its environment.
        (attempt.join("token"), 0o600),
    ];
    for (p, m) in &expect {
        assert_eq!(mode(p), *m, "{}", p.display());
    }
    d.cancel(id).unwrap();
    wait_stopped(&mut d, id);
    drop(d);
    // What an earlier release left open is closed at the next start.
    for (p, m) in [(&attempt, 0o755), (&job.join("checkpoint"), 0o755), (&log, 0o644)] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    }
    let _d = daemon(&dir);
    for (p, m) in &expect {
        assert_eq!(mode(p), *m, "{} after a restart", p.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A job that has said it is done is complete, even when a stop turned
/// its exit into 143: it is not relaunched to finish a second time.
#[test]
fn the_done_file_completes_a_job_whatever_its_exit() {
    let dir = std::env::temp_dir().join(format!("gpuplan-daemon-done-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut d = daemon(&dir);
    let spec = JobSubmission::from_toml(
        "name = \"d\"\ncommand = 'touch \"$GPUPLAN_DONE_FILE\"; exec sleep 30'\nmin_gpus = 1\nmax_gpus = 4\nbatch_size = 8\n",
        "t",
    )
    .unwrap();
    let (id, _) = d.submit(spec).unwrap();
    plan(&mut d, id, 1);
    let marker = LocalEngine::new(&d.config().state_dir).done_file(id);
    for _ in 0..500 {
        if marker.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(marker.exists(), "the job created GPUPLAN_DONE_FILE");
    // A re-allocation stops it: sleep dies of SIGTERM (143).
    plan(&mut d, id, 2);
    wait_stopped(&mut d, id);
    assert_eq!(d.view(id).unwrap().phase, "completed");
    d.tick().unwrap();
    let v = d.view(id).unwrap();
    assert_eq!((v.phase.as_str(), v.attempts), ("completed", 1), "not relaunched");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Supervision reads only the injected clock: a job that ignores
/// SIGTERM is killed once the clock passes its grace period, not before,
/// and a crashed job waits out its back-off on the same clock.
#[test]
fn grace_and_backoff_follow_the_injected_clock() {
    let dir = std::env::temp_dir().join(format!("gpuplan-daemon-clock-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let clock = ManualClock::new(1_000_000.0);
    let mut cfg = Config::new(dir.clone(), "greedy");
    cfg.grace_s = 60.0;
    cfg.backoff_s = 100.0;
    let mut d = Daemon::open_with_clock(
        cfg,
        Box::new(FakeDevices::new(1, 4)),
        Box::new(LocalEngine::new(&dir)),
        std::sync::Arc::new(clock.clone()),
    )
    .unwrap();
    let stubborn = JobSubmission::from_toml(
        "name = \"t\"\ncommand = \"trap '' TERM; exec sleep 30\"\nmin_gpus = 1\nmax_gpus = 4\nbatch_size = 8\n",
        "t",
    )
    .unwrap();
    let (id, _) = d.submit(stubborn).unwrap();
    plan(&mut d, id, 1);
    std::thread::sleep(Duration::from_millis(300));
    d.cancel(id).unwrap();
    for _ in 0..10 {
        d.tick().unwrap();
        std::thread::sleep(Duration::from_millis(30));
    }
    assert_eq!(d.view(id).unwrap().phase, "stopping", "SIGTERM is ignored");
    clock.advance(61.0);
    wait_stopped(&mut d, id);
    assert_eq!(d.view(id).unwrap().phase, "cancelled");

    let crash = JobSubmission::from_toml(
        "name = \"c\"\ncommand = \"exit 3\"\nmin_gpus = 1\nmax_gpus = 4\nbatch_size = 8\n",
        "t",
    )
    .unwrap();
    let (id, _) = d.submit(crash).unwrap();
    plan(&mut d, id, 1);
    wait_stopped(&mut d, id);
    assert_eq!(d.view(id).unwrap().crashes, 1);
    assert_eq!(d.view(id).unwrap().phase, "backoff");
    assert!(d.prepare().unwrap().is_none(), "not planned during its back-off");
    clock.advance(101.0);
    assert_eq!(d.view(id).unwrap().phase, "queued");
    assert!(d.prepare().unwrap().is_some());
    let _ = std::fs::remove_dir_all(&dir);
}
