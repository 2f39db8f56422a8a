//! The durable journal: an append-only JSON-lines file, fsync'd before the
//! daemon acts on what it records.
//!
//! Why not SQLite: the daemon's state is a few hundred small job records
//! whose last version wins, so a log replayed into a map is all it needs; a
//! text log is readable with `tail`, and adds no C build (rusqlite's bundled
//! SQLite) to a workspace that already compiles HiGHS. A crash can tear only
//! the last line, which replay drops; the log is compacted to one line per
//! job at start-up and when it grows, by writing a new file and renaming it
//! over the old one.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::ExecError;

pub struct Journal {
    path: PathBuf,
    file: File,
    /// Lines appended since the last compaction.
    pub appended: usize,
}

fn io(path: &Path, what: &str) -> impl FnOnce(std::io::Error) -> ExecError {
    let context = format!("{what} {}", path.display());
    move |source| ExecError::Io { context, source }
}

/// Every intact record of `text` and the length of its intact part. A
/// record is complete only with its newline: a crash mid-write can leave a
/// torn tail, which `open` cuts off before appending again.
fn parse<T: DeserializeOwned>(path: &Path, text: &str) -> Result<(Vec<T>, usize), ExecError> {
    let intact = text.rfind('\n').map_or(0, |i| i + 1);
    let mut records = Vec::new();
    for (i, line) in text[..intact].lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r = serde_json::from_str(line)
            .map_err(|e| ExecError::Journal(format!("{}:{}: corrupt record: {e}", path.display(), i + 1)))?;
        records.push(r);
    }
    Ok((records, intact))
}

/// The intact records of a journal, read only: safe beside a running daemon.
pub fn read<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, ExecError> {
    let text = std::fs::read_to_string(path).map_err(io(path, "read journal"))?;
    Ok(parse(path, &text)?.0)
}

impl Journal {
    /// Open (creating) the journal and return every intact record in order.
    pub fn open<T: DeserializeOwned>(path: &Path) -> Result<(Journal, Vec<T>), ExecError> {
        let mut records = Vec::new();
        if path.exists() {
            let text = std::fs::read_to_string(path).map_err(io(path, "read journal"))?;
            let intact;
            (records, intact) = parse(path, &text)?;
            if intact < text.len() {
                let f = OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(io(path, "open journal"))?;
                f.set_len(intact as u64)
                    .map_err(io(path, "truncate torn journal tail"))?;
                f.sync_all().map_err(io(path, "fsync journal"))?;
            }
        }
        let file = OpenOptions::new()
            .mode(0o600)
            .create(true)
            .append(true)
            .open(path)
            .map_err(io(path, "open journal"))?;
        Ok((
            Journal {
                path: path.to_path_buf(),
                file,
                appended: 0,
            },
            records,
        ))
    }

    /// Append records and fsync once; returns only when they are on disk.
    pub fn append<T: Serialize>(&mut self, records: &[T]) -> Result<(), ExecError> {
        if records.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::new();
        for r in records {
            serde_json::to_writer(&mut buf, r).map_err(|e| ExecError::Journal(format!("serialise: {e}")))?;
            buf.push(b'\n');
        }
        self.file
            .write_all(&buf)
            .map_err(io(&self.path, "write journal"))?;
        self.file.sync_data().map_err(io(&self.path, "fsync journal"))?;
        self.appended += records.len();
        Ok(())
    }

    /// Replace the log by `records` atomically (write, fsync, rename, fsync dir).
    pub fn compact<T: Serialize>(&mut self, records: &[T]) -> Result<(), ExecError> {
        let tmp = self.path.with_extension("jsonl.tmp");
        {
            // Job tokens are in the journal: owner only.
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(io(&tmp, "create"))?;
            let mut buf = Vec::new();
            for r in records {
                serde_json::to_writer(&mut buf, r)
                    .map_err(|e| ExecError::Journal(format!("serialise: {e}")))?;
                buf.push(b'\n');
            }
            f.write_all(&buf).map_err(io(&tmp, "write"))?;
            f.sync_all().map_err(io(&tmp, "fsync"))?;
        }
        std::fs::rename(&tmp, &self.path).map_err(io(&self.path, "rename journal"))?;
        if let Some(dir) = self.path.parent() {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        self.file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(io(&self.path, "reopen journal"))?;
        self.appended = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_drops_only_a_torn_last_line() {
        let dir = std::env::temp_dir().join(format!("gpuplan-journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("journal.jsonl");
        let _ = std::fs::remove_file(&p);
        let (mut j, r) = Journal::open::<u32>(&p).unwrap();
        assert!(r.is_empty());
        j.append(&[1u32, 2, 3]).unwrap();
        drop(j);
        // A crash mid-write leaves a partial line.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .unwrap()
            .write_all(b"4")
            .unwrap();
        let (mut j, r) = Journal::open::<u32>(&p).unwrap();
        assert_eq!(r, vec![1, 2, 3]);
        j.append(&[5u32]).unwrap();
        let (mut j, r) = Journal::open::<u32>(&p).unwrap();
        assert_eq!(r, vec![1, 2, 3, 5]);
        j.compact(&[7u32]).unwrap();
        j.append(&[8u32]).unwrap();
        let (_, r) = Journal::open::<u32>(&p).unwrap();
        assert_eq!(r, vec![7, 8]);
        std::fs::write(&p, "1\nx\n2\n").unwrap();
        let e = Journal::open::<u32>(&p).err().unwrap().to_string();
        assert!(e.contains("journal.jsonl:2: corrupt"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
