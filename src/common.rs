//! What every command shares: the output format and the flags read the
//! same way everywhere. Every command imports this module; it imports none
//! of them (`scripts/check-deps.sh` checks the binary's modules too).

use clap::ValueEnum;

/// `--format`: a table for people, JSON for scripts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

/// The `--memory-limit` a planner gets: the flag's MiB (0: none), else
/// half the machine's memory (`MemTotal` in /proc/meminfo; none where it
/// cannot be read), so one model cannot take the machine.
pub fn memory_limit_mb(flag: Option<u64>) -> Option<u64> {
    match flag {
        Some(0) => None,
        Some(mb) => Some(mb),
        None => {
            let info = std::fs::read_to_string("/proc/meminfo").ok()?;
            let kb: u64 = info
                .lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))?
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()?;
            Some(kb / 1024 / 2)
        }
    }
}

/// `--sharing-pairs`: [`gpuplan_core::SharingPairs`] on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SharingPairsArg {
    All,
    Measured,
}

impl From<SharingPairsArg> for gpuplan_core::SharingPairs {
    fn from(a: SharingPairsArg) -> Self {
        match a {
            SharingPairsArg::All => gpuplan_core::SharingPairs::All,
            SharingPairsArg::Measured => gpuplan_core::SharingPairs::Measured,
        }
    }
}
