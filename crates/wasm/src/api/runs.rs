//! The runs kept for the inspector: each run's every round input and plan,
//! the last few only. `run` keeps them, `inspect` reads them.

use std::cell::RefCell;
use std::collections::VecDeque;

use gpuplan_core::{Plan, Round};

/// Runs kept for the inspector (each holds every round's input and plan).
pub(super) const KEPT_RUNS: usize = 4;

/// Every round's input and plan of one run, for the inspector.
pub(super) type KeptRounds = Vec<(Round, Plan)>;

thread_local! {
    pub(super) static RUNS: RefCell<VecDeque<(u32, KeptRounds)>> = const { RefCell::new(VecDeque::new()) };
    static NEXT_ID: RefCell<u32> = const { RefCell::new(1) };
}

pub(super) fn keep_run(rounds: KeptRounds) -> u32 {
    let id = NEXT_ID.with(|n| {
        let mut n = n.borrow_mut();
        let id = *n;
        *n += 1;
        id
    });
    RUNS.with(|runs| {
        let mut runs = runs.borrow_mut();
        runs.push_back((id, rounds));
        while runs.len() > KEPT_RUNS {
            runs.pop_front();
        }
    });
    id
}
