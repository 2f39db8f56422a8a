//! Queues: teams sharing one cluster under guaranteed GPUs, borrowing
//! limits and reclaim (docs/tenants.md).
//!
//! A round may carry a tree of queues (organisation → team → …); each job
//! names a leaf (`RoundJob::queue`, `default` when absent). The queue
//! itself and the checks that need no plan live below the round (which
//! holds queues); the rules every plan keeps, [`QueueTree::breaches`],
//! above it (they read jobs and plans).

mod rules;
mod spec;

pub use rules::{Holdings, QueueBreach, QueueTree};
pub use spec::{
    check_parts, fit_guarantees, leaf_problem, parse_queues_toml, Queue, DEFAULT_QUEUE, MAX_QUEUES,
};
