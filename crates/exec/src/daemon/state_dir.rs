//! The state directory's upkeep: job directories found on disk, set
//! aside when no journaled job owns them, modes tightened after an
//! upgrade; and what other commands read from it (predictor samples).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use gpuplan_core::JobId;

use super::Entry;
use crate::jobs::JobRecord;
use crate::ExecError;

/// The utilization predictor's training samples in a daemon's state dir
/// (`gpuplan predict --fit OUT --state-dir DIR`): one per job whose
/// submission gave features and that was measured alone, at the
/// configuration it was measured at; the family is the job's `app`, else
/// its name. Reads the journal without opening it for writing.
pub fn utilization_samples(state_dir: &Path) -> Result<Vec<gpuplan_core::predict::Sample>, ExecError> {
    let mut last: BTreeMap<JobId, JobRecord> = BTreeMap::new();
    for e in crate::journal::read::<Entry>(&state_dir.join("journal.jsonl"))? {
        if let Entry::Job(j) = e {
            last.insert(j.id, *j);
        }
    }
    Ok(last
        .into_values()
        .filter_map(|j| {
            Some(gpuplan_core::predict::Sample {
                family: j.spec.app.clone().unwrap_or_else(|| j.spec.name.clone()),
                features: j.spec.features?,
                at: j.sharing.util_at?,
                utilization: j.sharing.util_solo?,
            })
        })
        .collect())
}

/// The numeric directories of `STATE/jobs`, sorted.
pub(super) fn job_dirs(jobs: &Path) -> BTreeSet<u32> {
    std::fs::read_dir(jobs)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Move `STATE/jobs/ID`, if there is one, to `STATE/jobs-orphaned/ID-UNIXTIME`.
pub(super) fn set_aside(state: &Path, id: JobId, now_unix_s: f64) -> Result<(), ExecError> {
    let from = crate::engine::job_dir(state, id);
    if std::fs::symlink_metadata(&from).is_err() {
        return Ok(());
    }
    let aside = state.join("jobs-orphaned");
    crate::engine::mkdir(&aside, crate::engine::DIR_PRIVATE_MODE)?;
    let to = aside.join(format!("{}-{}", id.0, now_unix_s as u64));
    std::fs::rename(&from, &to).map_err(|source| ExecError::Io {
        context: format!("set {} aside as {}", from.display(), to.display()),
        source,
    })?;
    tracing::warn!(
        "{} belongs to no journaled job; set aside as {} so no new job inherits it",
        from.display(),
        to.display()
    );
    Ok(())
}

/// Job files an earlier release left readable by every user (directories
/// 0755, logs 0644) get the modes new ones are made with: `jobs/ID` 0711,
/// what is below it 0700 (directories) or 0600 (logs). Links are left
/// alone; a failure is logged, not fatal.
pub(super) fn tighten_job_files(jobs: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let set = |p: &Path, mode: u32| {
        if let Err(e) = std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)) {
            tracing::warn!("chmod {:o} {}: {e}", mode, p.display());
        }
    };
    let Ok(ids) = std::fs::read_dir(jobs) else {
        return;
    };
    for id in ids.flatten() {
        if !id.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        set(&id.path(), crate::engine::DIR_SEARCH_MODE);
        for sub in std::fs::read_dir(id.path()).into_iter().flatten().flatten() {
            let Ok(t) = sub.file_type() else { continue };
            if t.is_dir() {
                set(&sub.path(), crate::engine::DIR_PRIVATE_MODE);
                for f in std::fs::read_dir(sub.path()).into_iter().flatten().flatten() {
                    let name = f.file_name();
                    let name = name.to_string_lossy();
                    if !name.starts_with("rank-") {
                        continue;
                    }
                    // The job owns this directory: chmod through a
                    // descriptor opened without following a link.
                    use std::os::unix::fs::OpenOptionsExt;
                    let Ok(file) = std::fs::OpenOptions::new()
                        .read(true)
                        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
                        .open(f.path())
                    else {
                        continue;
                    };
                    if file.metadata().is_ok_and(|m| m.is_file()) {
                        let _ =
                            file.set_permissions(std::fs::Permissions::from_mode(crate::engine::LOG_MODE));
                    }
                }
            }
        }
    }
}
