//! The job protocol's environment (docs/job-protocol.md): what the daemon
//! tells every rank of an attempt. The engine adds its own (rank layout,
//! rendezvous, checkpoint directory, done-file, the token's file: the
//! token itself is never in the environment).

use std::path::Path;

use crate::jobs::JobRecord;

/// The variables every rank of `j`'s next attempt gets: who it is, where
/// and how to report, its batch, its attempt; and CUDA MPS's directories
/// when the daemon runs with `--mps`.
pub(super) fn env(j: &JobRecord, report_base: &str, mps: Option<&Path>) -> Vec<(String, String)> {
    let mut env = vec![
        ("GPUPLAN_JOB_ID".to_string(), j.id.0.to_string()),
        ("GPUPLAN_JOB_NAME".to_string(), j.spec.name.clone()),
        (
            "GPUPLAN_REPORT_URL".to_string(),
            format!("{report_base}/v1/jobs/{}/report", j.id.0),
        ),
        ("GPUPLAN_BATCH_SIZE".to_string(), j.batch_size.to_string()),
        ("GPUPLAN_LOCAL_BSZ".to_string(), j.local_bsz.to_string()),
        ("GPUPLAN_ACCUM_STEPS".to_string(), j.accum_steps.to_string()),
        ("GPUPLAN_ATTEMPT".to_string(), (j.attempts + 1).to_string()),
    ];
    if let Some(dir) = mps {
        env.push((
            "CUDA_MPS_PIPE_DIRECTORY".into(),
            dir.join("pipe").display().to_string(),
        ));
        env.push((
            "CUDA_MPS_LOG_DIRECTORY".into(),
            dir.join("log").display().to_string(),
        ));
    }
    env
}
