//! The `gpuplan` command line: a thin layer over the library crates.
//!
//! Exit codes: 0 ok, 1 ran but the goal was not met, 2 error (bad input).

mod bench;
mod cli;
mod cluster;
mod common;
mod compare_rounds;
mod inputs;
mod models;
mod plan;
mod plots;
mod predict;
mod serve;
mod sim_flags;
mod sim_out;
mod simulate;
mod sweep;
mod sweep_report;
mod sweep_slurm;
mod trace;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // `gpuplan ... | head` must end quietly, not panic in println!: take the
    // default SIGPIPE action back from the Rust runtime, as a Unix tool does.
    // SAFETY: called before any thread starts; SIG_DFL is a valid handler.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
