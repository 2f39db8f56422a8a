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
//!
//! Each record (a JSON object) ends with its sequence number and a CRC-32
//! of the line up to it: `{...,"_seq":12,"_crc":"1a2b3c4d"}`, still one
//! JSON object a line. Numbers run on without a gap across compactions, and
//! the last one written is kept apart in `high-water` beside the journal
//! ([`Mark`], with the next job id). So a flipped byte, a line removed, a
//! journal cut short, emptied or deleted are all seen at start
//! ([`Damage`]); lines of earlier releases (no checksum) load as before,
//! ahead of the first checked one.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::ExecError;

/// What to do with a damaged journal at start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnDamage {
    /// Refuse to start, naming the line and how to recover (the default).
    #[default]
    Stop,
    /// Keep every intact record, set the damaged journal aside, and report
    /// what was lost (`serve --recover`).
    Recover,
}

/// The high-water mark kept apart from the journal (`STATE/high-water`):
/// the last record number written and the next job id. Written after the
/// journal (so it may lag it after a power cut, never lead it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mark {
    /// The next job id never given out.
    pub next_job: u32,
    /// The last record number the journal was written up to.
    pub seq: u64,
}

impl Mark {
    fn render(&self) -> String {
        // Fixed width, so a rewrite in place never leaves a longer old tail.
        format!("next_job {:010}\njournal_seq {:020}\n", self.next_job, self.seq)
    }

    fn parse(text: &str) -> Option<Mark> {
        let mut m = Mark::default();
        let mut seen = 0;
        for l in text.lines() {
            match l.split_once(' ') {
                Some(("next_job", v)) => m.next_job = v.trim().parse().ok()?,
                Some(("journal_seq", v)) => m.seq = v.trim().parse().ok()?,
                _ => return None,
            }
            seen += 1;
        }
        (seen == 2).then_some(m)
    }
}

/// Something wrong with a journal beyond a torn last line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The first damaged line (1-based); `None` for damage of the whole
    /// file (cut, emptied, deleted).
    pub line: Option<usize>,
    /// What is wrong, for the operator.
    pub what: String,
}

/// What recovery with [`OnDamage::Recover`] found and kept.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Every damage found (each skipped line, a cut).
    pub damage: Vec<Damage>,
    /// Where the damaged journal was copied before it was rewritten.
    pub saved_as: Option<PathBuf>,
}

pub struct Journal {
    path: PathBuf,
    file: File,
    mark_file: File,
    mark: Mark,
    /// Lines appended since the last compaction.
    pub appended: usize,
}

fn io(path: &Path, what: &str) -> impl FnOnce(std::io::Error) -> ExecError {
    let context = format!("{what} {}", path.display());
    move |source| ExecError::Io { context, source }
}

/// How to get past damage, appended to the refusal.
pub const HOW_TO_RECOVER: &str = "the journal is damaged; nothing was changed. Restore STATE/journal.jsonl \
     and STATE/high-water from a backup, or start once with `gpuplan serve --recover`: it keeps every \
     intact record, copies the damaged journal to journal.jsonl.damaged-SEQ and names the jobs whose \
     state may be stale (docs/job-protocol.md, \"Limits and failure\")";

const CRC_KEY: &str = ",\"_crc\":\"";
/// `,"_crc":"` + 8 hex digits + `"}`.
const CRC_TAIL: usize = CRC_KEY.len() + 8 + 2;

/// The path of the high-water mark beside a journal.
pub fn mark_path(journal: &Path) -> PathBuf {
    journal.with_file_name("high-water")
}

/// One record as a line (newline included), numbered `seq`.
fn line<T: Serialize>(r: &T, seq: u64) -> Result<Vec<u8>, ExecError> {
    let mut json = serde_json::to_vec(r).map_err(|e| ExecError::Journal(format!("serialise: {e}")))?;
    if json.len() < 2 || json[0] != b'{' || json.last() != Some(&b'}') {
        return Err(ExecError::Journal(
            "serialise: a record must be a JSON object".into(),
        ));
    }
    json.pop();
    if json.len() > 1 {
        json.push(b',');
    }
    json.extend_from_slice(format!("\"_seq\":{seq}").as_bytes());
    let crc = crc32fast::hash(&json);
    json.extend_from_slice(format!("{CRC_KEY}{crc:08x}\"}}\n").as_bytes());
    Ok(json)
}

/// A line's record text and number: `Ok(None)` for a line of an earlier
/// release (no checksum), `Err` for a checksum that does not match.
fn unwrap_line(line: &str) -> Result<Option<(String, u64)>, String> {
    let n = line.len();
    if n < CRC_TAIL || !line.ends_with("\"}") || !line.is_char_boundary(n - CRC_TAIL) {
        return Ok(None);
    }
    let (body, tail) = line.split_at(n - CRC_TAIL);
    let Some(hex) = tail.strip_prefix(CRC_KEY).and_then(|t| t.strip_suffix("\"}")) else {
        return Ok(None);
    };
    let want = u32::from_str_radix(hex, 16).map_err(|_| format!("bad checksum field {hex:?}"))?;
    let got = crc32fast::hash(body.as_bytes());
    if got != want {
        return Err(format!(
            "checksum mismatch (line says {want:08x}, content gives {got:08x})"
        ));
    }
    let at = body.rfind("\"_seq\":").ok_or("checksummed line without _seq")?;
    let seq = body[at + 7..]
        .parse::<u64>()
        .map_err(|_| "bad _seq".to_string())?;
    // Drop `,"_seq":N` (or `"_seq":N` of an empty object) and close the object.
    let cut = if body[..at].ends_with(',') { at - 1 } else { at };
    Ok(Some((format!("{}}}", &body[..cut]), seq)))
}

/// Every intact record of `text`, the length of its intact part, the last
/// record number, and the damage found (a torn tail is none: a record is
/// complete only with its newline, and `open` cuts a torn tail off).
/// With [`OnDamage::Stop`] the first damage ends the reading.
struct Parsed<T> {
    records: Vec<T>,
    intact: usize,
    last_seq: u64,
    damage: Vec<Damage>,
}

fn parse<T: DeserializeOwned>(text: &str, on: OnDamage) -> Parsed<T> {
    let intact = text.rfind('\n').map_or(0, |i| i + 1);
    let mut p = Parsed {
        records: Vec::new(),
        intact,
        last_seq: 0,
        damage: Vec::new(),
    };
    let mut checked = false;
    for (i, l) in text[..intact].lines().enumerate() {
        if on == OnDamage::Stop && !p.damage.is_empty() {
            break;
        }
        let n = i + 1;
        let mut bad = |what: String| {
            p.damage.push(Damage { line: Some(n), what });
        };
        if l.trim().is_empty() {
            continue;
        }
        let json = match unwrap_line(l) {
            Err(e) => {
                bad(e);
                continue;
            }
            Ok(None) if checked => {
                bad("a line without a checksum after checksummed ones".into());
                continue;
            }
            Ok(None) => l.to_string(),
            Ok(Some((json, seq))) => {
                if checked && seq != p.last_seq + 1 {
                    bad(format!(
                        "record {seq} follows record {}: {} lost",
                        p.last_seq,
                        if seq > p.last_seq {
                            "records were"
                        } else {
                            "the order was"
                        }
                    ));
                }
                checked = true;
                p.last_seq = seq;
                json
            }
        };
        match serde_json::from_str(&json) {
            Ok(r) => p.records.push(r),
            Err(e) => bad(format!("corrupt record: {e}")),
        }
    }
    p
}

fn refuse(path: &Path, d: &Damage) -> ExecError {
    match d.line {
        Some(l) => ExecError::Journal(format!("{}:{l}: {}; {HOW_TO_RECOVER}", path.display(), d.what)),
        None => ExecError::Journal(format!("{}: {}; {HOW_TO_RECOVER}", path.display(), d.what)),
    }
}

/// The intact records of a journal, read only: safe beside a running
/// daemon. Damage is an error naming its line.
pub fn read<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, ExecError> {
    let text = std::fs::read_to_string(path).map_err(io(path, "read journal"))?;
    let p = parse(&text, OnDamage::Stop);
    match p.damage.first() {
        Some(d) => Err(refuse(path, d)),
        None => Ok(p.records),
    }
}

impl Journal {
    /// Open (creating) the journal and its high-water mark and return every
    /// intact record in order. Damage stops the opening with
    /// [`OnDamage::Stop`]; with [`OnDamage::Recover`] the intact records
    /// are kept and the damaged file is copied aside (the caller compacts).
    pub fn open<T: DeserializeOwned>(
        path: &Path,
        on: OnDamage,
    ) -> Result<(Journal, Vec<T>, Recovered), ExecError> {
        let mpath = mark_path(path);
        let mark = match std::fs::read_to_string(&mpath) {
            Ok(t) => Some(Mark::parse(&t).ok_or_else(|| {
                ExecError::Journal(format!(
                    "{}: not a high-water mark (`next_job N` and `journal_seq N`); {HOW_TO_RECOVER}",
                    mpath.display()
                ))
            })?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io(&mpath, "read")(e)),
        };
        let text = match std::fs::read_to_string(path) {
            Ok(t) => Some(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io(path, "read journal")(e)),
        };
        let mut p: Parsed<T> = parse(text.as_deref().unwrap_or(""), on);
        if let Some(m) = mark {
            if p.last_seq < m.seq {
                let what = match &text {
                    None => format!("missing, but {} records were written (STATE/high-water)", m.seq),
                    Some(t) if t.trim().is_empty() => {
                        format!("empty, but {} records were written (STATE/high-water)", m.seq)
                    }
                    Some(_) => format!(
                        "ends at record {}, but {} were written (STATE/high-water): it was cut",
                        p.last_seq, m.seq
                    ),
                };
                p.damage.push(Damage { line: None, what });
            }
        }
        let mut recovered = Recovered::default();
        if let Some(d) = p.damage.first() {
            if on == OnDamage::Stop {
                return Err(refuse(path, d));
            }
            if let Some(t) = &text {
                let saved = path.with_extension(format!("jsonl.damaged-{}", mark.map_or(0, |m| m.seq)));
                std::fs::write(&saved, t).map_err(io(&saved, "save the damaged journal as"))?;
                recovered.saved_as = Some(saved);
            }
            recovered.damage = std::mem::take(&mut p.damage);
        }
        if let Some(t) = &text {
            if p.intact < t.len() {
                let f = OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(io(path, "open journal"))?;
                f.set_len(p.intact as u64)
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
        let mark_file = OpenOptions::new()
            .mode(0o600)
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&mpath)
            .map_err(io(&mpath, "open"))?;
        let mark = Mark {
            next_job: mark.map_or(0, |m| m.next_job),
            seq: p.last_seq.max(mark.map_or(0, |m| m.seq)),
        };
        let mut j = Journal {
            path: path.to_path_buf(),
            file,
            mark_file,
            mark,
            appended: 0,
        };
        j.write_mark(true)?;
        Ok((j, p.records, recovered))
    }

    /// The high-water mark as it stands.
    pub fn mark(&self) -> Mark {
        self.mark
    }

    /// Record that job ids below `next_job` are given out, durably, before
    /// one of them is handed to a user.
    pub fn reserve_job_ids(&mut self, next_job: u32) -> Result<(), ExecError> {
        if next_job > self.mark.next_job {
            self.mark.next_job = next_job;
            self.write_mark(true)?;
        }
        Ok(())
    }

    /// Rewrite the mark in place; fsync'd only when asked (after a record
    /// it may lag the journal, which the check at start allows).
    fn write_mark(&mut self, sync: bool) -> Result<(), ExecError> {
        let mpath = mark_path(&self.path);
        self.mark_file
            .write_all_at(self.mark.render().as_bytes(), 0)
            .map_err(io(&mpath, "write"))?;
        if sync {
            self.mark_file.sync_data().map_err(io(&mpath, "fsync"))?;
        }
        Ok(())
    }

    /// Append records and fsync once; returns only when they are on disk.
    pub fn append<T: Serialize>(&mut self, records: &[T]) -> Result<(), ExecError> {
        if records.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::new();
        for (i, r) in records.iter().enumerate() {
            buf.extend(line(r, self.mark.seq + 1 + i as u64)?);
        }
        self.file
            .write_all(&buf)
            .map_err(io(&self.path, "write journal"))?;
        self.file.sync_data().map_err(io(&self.path, "fsync journal"))?;
        self.mark.seq += records.len() as u64;
        self.write_mark(false)?;
        self.appended += records.len();
        Ok(())
    }

    /// Replace the log by `records` atomically (write, fsync, rename, fsync
    /// dir); their numbers go on from the last record's.
    pub fn compact<T: Serialize>(&mut self, records: &[T]) -> Result<(), ExecError> {
        let tmp = self.path.with_extension("jsonl.tmp");
        let mut buf = Vec::new();
        for (i, r) in records.iter().enumerate() {
            buf.extend(line(r, self.mark.seq + 1 + i as u64)?);
        }
        {
            // Job tokens are in the journal: owner only.
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(io(&tmp, "create"))?;
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
        self.mark.seq += records.len() as u64;
        self.write_mark(true)?;
        self.appended = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn fresh(tag: &str) -> (PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!("gpuplan-journal-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("journal.jsonl");
        (dir, p)
    }

    fn n(v: &[Value]) -> Vec<u64> {
        v.iter().map(|r| r["n"].as_u64().unwrap()).collect()
    }

    fn r(k: u64) -> Value {
        json!({ "n": k })
    }

    fn open(p: &Path) -> Result<Vec<Value>, String> {
        Journal::open::<Value>(p, OnDamage::Stop)
            .map(|(_, r, _)| r)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn replay_drops_only_a_torn_last_line() {
        let (dir, p) = fresh("torn");
        let (mut j, r0, _) = Journal::open::<Value>(&p, OnDamage::Stop).unwrap();
        assert!(r0.is_empty());
        j.append(&[r(1), r(2), r(3)]).unwrap();
        drop(j);
        // A crash mid-write leaves a partial line.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .unwrap()
            .write_all(b"{\"n\":4")
            .unwrap();
        let (mut j, got, _) = Journal::open::<Value>(&p, OnDamage::Stop).unwrap();
        assert_eq!(n(&got), vec![1, 2, 3]);
        j.append(&[r(5)]).unwrap();
        let (mut j, got, _) = Journal::open::<Value>(&p, OnDamage::Stop).unwrap();
        assert_eq!(n(&got), vec![1, 2, 3, 5]);
        j.compact(&[r(7)]).unwrap();
        j.append(&[r(8)]).unwrap();
        assert_eq!(n(&open(&p).unwrap()), vec![7, 8]);
        // Each line is still one JSON object, with its number and checksum.
        let first: Value =
            serde_json::from_str(std::fs::read_to_string(&p).unwrap().lines().next().unwrap()).unwrap();
        assert_eq!((first["n"].as_u64(), first["_seq"].as_u64()), (Some(7), Some(5)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Issue 33, item 5: a byte flipped mid-file, a line removed, a journal
    /// cut short, emptied or deleted: each stops the opening with the line
    /// (or the file) and how to recover; a journal of an earlier release
    /// (no checksums) still loads.
    #[test]
    fn damage_stops_the_opening_with_the_line_and_how_to_recover() {
        let (dir, p) = fresh("damage");
        let write = |k: u64| {
            let _ = std::fs::remove_file(&p);
            let _ = std::fs::remove_file(mark_path(&p));
            let (mut j, _, _) = Journal::open::<Value>(&p, OnDamage::Stop).unwrap();
            j.append(&(1..=k).map(r).collect::<Vec<_>>()).unwrap();
        };
        let keep = |f: &dyn Fn(usize) -> bool| {
            let t = std::fs::read_to_string(&p).unwrap();
            let kept: Vec<&str> = t
                .lines()
                .enumerate()
                .filter(|(i, _)| f(*i))
                .map(|(_, l)| l)
                .collect();
            std::fs::write(&p, kept.join("\n") + "\n").unwrap();
        };
        // A flipped byte on line 3 of 5.
        write(5);
        let mut t = std::fs::read(&p).unwrap();
        let at = t
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .nth(1)
            .unwrap()
            .0
            + 6;
        t[at] ^= 0x01;
        std::fs::write(&p, &t).unwrap();
        let e = open(&p).unwrap_err();
        assert!(
            e.contains("journal.jsonl:3: checksum mismatch") && e.contains("--recover"),
            "{e}"
        );
        // Line 2 removed.
        write(5);
        keep(&|i| i != 1);
        let e = open(&p).unwrap_err();
        assert!(e.contains("journal.jsonl:2: record 3 follows record 1"), "{e}");
        // Cut to its first 3 lines, emptied, deleted.
        write(5);
        keep(&|i| i < 3);
        let e = open(&p).unwrap_err();
        assert!(
            e.contains("ends at record 3, but 5 were written") && e.contains("it was cut"),
            "{e}"
        );
        std::fs::write(&p, "").unwrap();
        let e = open(&p).unwrap_err();
        assert!(e.contains("empty, but 5 records were written"), "{e}");
        std::fs::remove_file(&p).unwrap();
        let e = open(&p).unwrap_err();
        assert!(e.contains("missing, but 5 records were written"), "{e}");
        // With --recover the intact records are kept and the file saved.
        write(5);
        keep(&|i| i != 1);
        let (mut j, got, rec) = Journal::open::<Value>(&p, OnDamage::Recover).unwrap();
        assert_eq!(n(&got), vec![1, 3, 4, 5]);
        assert_eq!(rec.damage[0].line, Some(2));
        assert!(rec.saved_as.as_ref().unwrap().exists());
        j.compact(&got).unwrap();
        assert_eq!(n(&open(&p).unwrap()), vec![1, 3, 4, 5]);
        // An earlier release's journal: no checksums, no mark.
        let _ = std::fs::remove_file(mark_path(&p));
        std::fs::write(&p, "{\"n\":1}\n{\"n\":2}\n").unwrap();
        let (mut j, got, _) = Journal::open::<Value>(&p, OnDamage::Stop).unwrap();
        assert_eq!(n(&got), vec![1, 2]);
        j.append(&[r(3)]).unwrap();
        assert_eq!(n(&open(&p).unwrap()), vec![1, 2, 3]);
        // But an unchecked line after checked ones is damage.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .unwrap()
            .write_all(b"{\"n\":4}\n")
            .unwrap();
        let e = open(&p).unwrap_err();
        assert!(e.contains("journal.jsonl:4: a line without a checksum"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
