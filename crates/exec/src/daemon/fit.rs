//! Whether a job can ever run on the daemon's devices: core's one rule,
//! on the GPUs the daemon last collected.

use gpuplan_core::queue::Queue;

use crate::device::Gpu;
use crate::spec::JobSubmission;

/// Core's fit rule ([`gpuplan_core::never_fits`]: a job runs on one GPU
/// type; its queues' limits) on `gpus` as last collected, healthy or not (a
/// GPU that recovers serves again, so no job is refused for a fault). The
/// cluster is built once and the check returned asked per job: why the
/// job can never run, naming the largest type; `None` when it can, or
/// when no GPU is known.
pub(super) fn never_fits(gpus: &[Gpu]) -> impl Fn(&JobSubmission, &[Queue]) -> Option<String> {
    let all: Vec<Gpu> = gpus
        .iter()
        .map(|g| Gpu {
            health: crate::device::Health::Ok,
            ..g.clone()
        })
        .collect();
    let cluster = crate::round::device_cluster(&all).cluster;
    move |spec, queues| {
        if cluster.nodes.is_empty() {
            return None;
        }
        gpuplan_core::never_fits(&cluster, spec.min_gpus, spec.queue.as_deref(), queues)
            .map(|w| w.to_string())
    }
}
