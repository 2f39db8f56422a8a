//! The one safe reader for every file a job can touch: rank logs, exit
//! files, the done-file, a user's own output file of its engine.
//!
//! A job owns its attempt and checkpoint directories, so whatever the
//! daemon reads there may be a link (to `/dev/zero`, to a root-only file),
//! a FIFO nobody writes (an `open` that never returns), a device, or a
//! file grown without bound. Every read here is therefore: opened without
//! following a link at any step below the state directory
//! ([`open_beneath`]), non-blocking (a FIFO opens at once and is then
//! refused), a regular file with one link, owned by the daemon's user or
//! the job's, and read up to a cap. Nothing here ever waits on the job.

use std::path::Path;

/// Longest exit file read: a code and a newline, with room to spare.
pub(crate) const EXIT_FILE_MAX_BYTES: u64 = 64;
/// Most of a log read for its tail.
pub(crate) const LOG_TAIL_BYTES: u64 = 64 * 1024;

/// Why a job's file was not read.
#[derive(Debug)]
pub(crate) enum Unread {
    /// There is no such file (or a directory above it is missing).
    Missing,
    /// It is there but refused (a link, FIFO, device, hard link, another
    /// user's, too large), or could not be opened: the reason.
    Refused(String),
}

impl std::fmt::Display for Unread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unread::Missing => write!(f, "missing"),
            Unread::Refused(why) => write!(f, "{why}"),
        }
    }
}

/// Open `path`, which lies under `root`, for reading without following a
/// link on the way: each directory below `root` and the file itself are
/// opened with `O_NOFOLLOW` (relative to the one above), so a job that
/// owns its attempt directory cannot point the daemon at another file by
/// a link; the file is opened `O_NONBLOCK`, so a FIFO in its place
/// cannot hang the daemon. Returns the file and the owner of the
/// directory holding it.
pub(crate) fn open_beneath(root: &Path, path: &Path) -> std::io::Result<(std::fs::File, u32)> {
    use std::ffi::CString;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let rel = path
        .strip_prefix(root)
        .map_err(|_| std::io::Error::other(format!("{} is not under {}", path.display(), root.display())))?;
    let parts: Vec<&std::ffi::OsStr> = rel.iter().collect();
    let Some((file, dirs)) = parts.split_last() else {
        return Err(std::io::Error::other("no file name"));
    };
    let mut dir: OwnedFd = std::fs::File::open(root)?.into();
    let openat = |at: &OwnedFd, name: &std::ffi::OsStr, flags: libc::c_int| -> std::io::Result<OwnedFd> {
        let c = CString::new(name.as_bytes()).map_err(std::io::Error::other)?;
        if name == ".." {
            return Err(std::io::Error::other("`..` in a job's path"));
        }
        // SAFETY: a valid directory descriptor and a NUL-terminated name.
        let fd = unsafe {
            libc::openat(
                at.as_raw_fd(),
                c.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a descriptor just opened and owned by no one else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    for d in dirs {
        dir = openat(&dir, d, libc::O_RDONLY | libc::O_DIRECTORY)?;
    }
    let dir_owner = std::fs::File::from(dir.try_clone()?).metadata()?.uid();
    // Non-blocking: a FIFO put in the file's place must not hang the daemon.
    let f = std::fs::File::from(openat(&dir, file, libc::O_RDONLY | libc::O_NONBLOCK)?);
    Ok((f, dir_owner))
}

/// The checks every job file passes before a byte of it is read: a
/// regular file (not a FIFO, device or socket), one link (not a hard link
/// to a file the job could not read itself), owned by the daemon's user or
/// one of `owners`.
fn check(f: &std::fs::File, owners: &[u32]) -> Result<std::fs::Metadata, Unread> {
    use std::os::unix::fs::MetadataExt;
    let m = f
        .metadata()
        .map_err(|e| Unread::Refused(format!("cannot stat it: {e}")))?;
    if !m.is_file() || m.nlink() != 1 {
        return Err(Unread::Refused("not a regular file with one link".into()));
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if m.uid() != me && !owners.contains(&m.uid()) {
        return Err(Unread::Refused(format!(
            "owned by uid {}, not by the job's user",
            m.uid()
        )));
    }
    Ok(m)
}

fn open_checked(root: &Path, path: &Path) -> Result<(std::fs::File, std::fs::Metadata), Unread> {
    let (f, dir_owner) = open_beneath(root, path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Unread::Missing,
        _ => Unread::Refused(e.to_string()),
    })?;
    let m = check(&f, &[dir_owner])?;
    Ok((f, m))
}

/// A small file under `root` whole (an exit file): at most `max_bytes`,
/// refused if larger, so a job cannot make the daemon read without end.
pub(crate) fn read_small_beneath(root: &Path, path: &Path, max_bytes: u64) -> Result<Vec<u8>, Unread> {
    use std::io::Read;
    let (f, m) = open_checked(root, path)?;
    if m.len() > max_bytes {
        return Err(Unread::Refused(format!(
            "{} bytes, more than the {max_bytes} such a file holds",
            m.len()
        )));
    }
    let mut buf = Vec::new();
    f.take(max_bytes)
        .read_to_end(&mut buf)
        .map_err(|e| Unread::Refused(format!("read: {e}")))?;
    Ok(buf)
}

/// Whether a marker file (the done-file) is there, as a regular file of
/// the daemon's or the job's: a link, FIFO or another user's file there
/// marks nothing (and is logged).
pub(crate) fn marker_beneath(root: &Path, path: &Path) -> bool {
    match open_checked(root, path) {
        Ok(_) => true,
        Err(Unread::Missing) => false,
        Err(Unread::Refused(why)) => {
            tracing::warn!("{} refused: {why}", path.display());
            false
        }
    }
}

/// Write a new private file `name` in `dir` (an attempt directory the
/// engine has just made): created, never opened through a link or over a
/// file already there, mode 0600, owned by `owner` (the job's user, when
/// the daemon runs jobs as their users). The job's token goes here rather
/// than in its environment, which every child of the job inherits and
/// which tools print.
pub(crate) fn write_private(
    dir: &Path,
    name: &str,
    contents: &str,
    owner: Option<(u32, u32)>,
) -> Result<std::path::PathBuf, crate::ExecError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(name);
    let err = |source| crate::ExecError::Io {
        context: format!("write {}", path.display()),
        source,
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .map_err(err)?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::fchown(&f, Some(uid), Some(gid)).map_err(err)?;
    }
    f.write_all(contents.as_bytes()).map_err(err)?;
    Ok(path)
}

/// Last `n` lines of a log under `root` (reads at most its last
/// [`LOG_TAIL_BYTES`]), read without following links ([`open_beneath`])
/// and only if it passes the checks: otherwise one line saying it was
/// refused.
pub(crate) fn tail_beneath(root: &Path, path: &Path, n: usize) -> Vec<String> {
    match open_checked(root, path) {
        Ok((f, m)) => tail(f, &m, n),
        Err(Unread::Missing) => Vec::new(),
        Err(Unread::Refused(why)) => refused(path, &why),
    }
}

/// Last `n` lines of a file outside the state directory (a user's own
/// output file of its engine), opened without following a link at its
/// last component and read only if `owner` (the job's user) or the
/// daemon's user owns it.
pub(crate) fn tail_owned(path: &Path, owner: Option<u32>, n: usize) -> Vec<String> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => match check(&f, &owner.into_iter().collect::<Vec<_>>()) {
            Ok(m) => tail(f, &m, n),
            Err(why) => refused(path, &why.to_string()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => refused(path, &e.to_string()),
    }
}

fn refused(path: &Path, why: &str) -> Vec<String> {
    tracing::warn!("log {} refused: {why}", path.display());
    vec![format!("gpuplan: log {} refused: {why}", path.display())]
}

fn tail(mut f: std::fs::File, m: &std::fs::Metadata, n: usize) -> Vec<String> {
    use std::io::{Read, Seek, SeekFrom};
    let start = m.len().saturating_sub(LOG_TAIL_BYTES);
    let mut buf = Vec::new();
    // `take`: a file that grows while it is read is still read to the cap only.
    if f.seek(SeekFrom::Start(start)).is_err() || f.take(LOG_TAIL_BYTES).read_to_end(&mut buf).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("gpuplan-jobfile-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("a")).unwrap();
        d
    }

    /// Each wrong kind of file in a job's place is refused at once, for
    /// every use: an exit file, a done-file, a log. A FIFO nobody writes
    /// would block a plain `open` for ever; `/dev/zero` behind a link
    /// would be read without end.
    #[test]
    fn links_fifos_devices_hard_links_and_big_files_are_refused_at_once() {
        let d = dir("kinds");
        let f = |n: &str| d.join("a").join(n);
        std::os::unix::fs::symlink("/dev/zero", f("zero")).unwrap();
        let c = std::ffi::CString::new(f("fifo").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        std::fs::write(f("real"), "0\n").unwrap();
        std::fs::hard_link(f("real"), f("hard")).unwrap();
        std::fs::write(f("big"), vec![b'1'; 1000]).unwrap();
        std::fs::create_dir(f("dir")).unwrap();
        for name in ["zero", "fifo", "hard", "big", "dir"] {
            let r = read_small_beneath(&d, &f(name), EXIT_FILE_MAX_BYTES);
            assert!(matches!(r, Err(Unread::Refused(_))), "{name}: {r:?}");
        }
        for name in ["zero", "fifo", "hard", "dir"] {
            assert!(!marker_beneath(&d, &f(name)), "{name}");
            let lines = tail_beneath(&d, &f(name), 5);
            assert!(
                lines.len() == 1 && lines[0].contains("refused"),
                "{name}: {lines:?}"
            );
        }
        assert!(matches!(
            read_small_beneath(&d, &f("none"), 64),
            Err(Unread::Missing)
        ));
        std::fs::remove_file(f("hard")).unwrap();
        assert_eq!(read_small_beneath(&d, &f("real"), 64).unwrap(), b"0\n");
        assert!(marker_beneath(&d, &f("real")));
        // A link to a directory on the way is not followed either.
        std::os::unix::fs::symlink(d.join("a"), d.join("b")).unwrap();
        assert!(matches!(
            read_small_beneath(&d, &d.join("b").join("real"), 64),
            Err(Unread::Refused(_))
        ));
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A log read for its tail reads at most its last 64 KiB.
    #[test]
    fn a_tail_reads_the_last_lines_only() {
        let d = dir("tail");
        let text: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(d.join("a/log"), text).unwrap();
        assert_eq!(
            tail_beneath(&d, &d.join("a/log"), 2),
            vec!["line 19998".to_string(), "line 19999".to_string()]
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
