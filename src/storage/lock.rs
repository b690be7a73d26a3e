//! The lock that keeps two exporters out of one storage directory, as Prometheus' `lock` file
//! does: `DIR/lock`, held with `flock(2)` for as long as the [`super::Dir`] lives, and holding
//! its holder's pid and the time it took the lock, as text, for the message that refuses the
//! next one.
//!
//! The kernel drops a `flock` when the holder's descriptor closes, however the process ends (a
//! crash, SIGKILL, an OOM kill), so a lock file whose lock nobody holds is stale and is taken
//! over. The lock is per open file, not per process: a second open in the same process is
//! refused too. The file is never removed: another process may have it open, about to lock
//! that very file, and would then hold the lock of a file no longer in the directory while a
//! third locked a new one. A clean release empties it instead, so that a file with a holder
//! written in it and no lock held tells of a holder that did not end cleanly.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read as _, Seek as _, Write as _};
use std::path::Path;

use super::StorageError;

/// The lock file's name in the directory.
pub const LOCK_FILE: &str = "lock";

/// Most of a lock file read to name its holder (it holds two short lines).
const MAX_LOCK_FILE_BYTES: u64 = 1024;

/// Who holds, or held, a storage directory's lock: as its lock file tells, and only what
/// parses (a pid, a time), so that a message never quotes what the file holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holder {
    pub pid: Option<u32>,
    /// When it took the lock.
    pub since: Option<jiff::Timestamp>,
}

impl Holder {
    fn of_this_process(now: jiff::Timestamp) -> Holder {
        Holder {
            pid: Some(std::process::id()),
            since: Some(now),
        }
    }

    /// What a lock file's text tells: lines `pid N` and `since TIME`, each counted only once
    /// its newline is written (a holder caught writing is read as far as it got).
    fn parse(text: &[u8]) -> Holder {
        let mut holder = Holder::default();
        let complete = text
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(&text[..0], |end| &text[..end]);
        for line in String::from_utf8_lossy(complete).lines() {
            if let Some(pid) = line.strip_prefix("pid ") {
                holder.pid = pid.trim().parse().ok();
            } else if let Some(since) = line.strip_prefix("since ") {
                holder.since = since.trim().parse().ok();
            }
        }
        holder
    }

    fn text(&self) -> String {
        let pid = self.pid.map(|pid| format!("pid {pid}\n"));
        let since = self.since.map(|since| format!("since {since}\n"));
        pid.unwrap_or_default() + &since.unwrap_or_default()
    }
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pid {
            Some(pid) => write!(f, "process {pid}")?,
            None => write!(f, "another process")?,
        }
        if let Some(since) = self.since {
            write!(f, " (since {since})")?;
        }
        Ok(())
    }
}

/// A held lock: released when dropped.
#[derive(Debug)]
pub(super) struct Lock {
    file: File,
    /// The holder a stale lock file named, when this one took it over.
    took_over: Option<Holder>,
}

impl Lock {
    /// Takes the lock of the directory `dir`, or says who holds it.
    pub(super) fn take(dir: &Path) -> Result<Lock, StorageError> {
        let path = dir.join(LOCK_FILE);
        let open_error = |source| StorageError::Open {
            path: path.clone(),
            source,
        };
        let mut file = open(&path).map_err(open_error)?;
        if !file.metadata().map_err(open_error)?.is_file() {
            return Err(open_error(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the lock file is not a regular file; remove what is there",
            )));
        }
        if let Err(e) = try_lock(&file) {
            if e.kind() != io::ErrorKind::WouldBlock {
                return Err(open_error(e));
            }
            let holder = Holder::parse(&read_all(&mut file).unwrap_or_default());
            return Err(StorageError::Locked {
                path: dir.to_owned(),
                holder,
            });
        }
        let previous = read_all(&mut file).map_err(open_error)?;
        let took_over =
            (!previous.iter().all(u8::is_ascii_whitespace)).then(|| Holder::parse(&previous));
        let me = Holder::of_this_process(jiff::Timestamp::now());
        rewrite(&mut file, me.text().as_bytes()).map_err(open_error)?;
        Ok(Lock { file, took_over })
    }

    pub(super) fn took_over(&self) -> Option<&Holder> {
        self.took_over.as_ref()
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Emptied while still held: a clean release leaves no holder behind. The lock itself
        // goes with the descriptor.
        let _ = rewrite(&mut self.file, b"");
    }
}

fn open(path: &Path) -> io::Result<File> {
    super::owner_only(
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false),
    )
    .open(path)
}

#[cfg(unix)]
fn try_lock(file: &File) -> io::Result<()> {
    rustix::fs::flock(file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        .map_err(io::Error::from)
}

#[cfg(not(unix))]
fn try_lock(_file: &File) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "locking the storage directory needs a Unix system",
    ))
}

fn read_all(file: &mut File) -> io::Result<Vec<u8>> {
    file.rewind()?;
    let mut text = Vec::new();
    file.take(MAX_LOCK_FILE_BYTES).read_to_end(&mut text)?;
    Ok(text)
}

fn rewrite(file: &mut File, text: &[u8]) -> io::Result<()> {
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(text)?;
    file.sync_data()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead as _;
    use std::process::{Command, Stdio};

    /// Set in the child process of the test below: the directory whose lock it takes.
    const HOLDER_DIR: &str = "MAILHOST_STORAGE_TEST_HOLDER_DIR";

    #[test]
    fn a_second_lock_in_the_same_process_is_refused_naming_this_process() {
        let dir = tempfile::tempdir().unwrap();
        let held = Lock::take(dir.path()).unwrap();
        assert_eq!(held.took_over(), None, "a new lock file held nobody");
        let text = std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
        assert!(
            text.starts_with(&format!("pid {}\nsince ", std::process::id())),
            "{text}"
        );
        let e = Lock::take(dir.path()).unwrap_err();
        let StorageError::Locked { holder, .. } = &e else {
            panic!("{e}");
        };
        assert_eq!(holder.pid, Some(std::process::id()));
        assert!(holder.since.is_some());
        let message = e.to_string();
        assert!(
            message.contains(&format!("in use by process {}", std::process::id())),
            "{message}"
        );
        assert!(message.contains(&dir.path().display().to_string()));
        assert!(
            message.contains("stop the other exporter, or give this one a directory of its own"),
            "{message}"
        );
        drop(held);
        let again = Lock::take(dir.path()).unwrap();
        assert_eq!(
            again.took_over(),
            None,
            "a clean release leaves no holder behind"
        );
    }

    #[test]
    fn a_stale_lock_file_nobody_holds_is_taken_over_naming_its_old_holder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(LOCK_FILE),
            "pid 999999\nsince 2026-01-02T03:04:05Z\n",
        )
        .unwrap();
        let lock = Lock::take(dir.path()).unwrap();
        let old = lock.took_over().unwrap();
        assert_eq!(old.pid, Some(999_999));
        assert_eq!(
            old.to_string(),
            "process 999999 (since 2026-01-02T03:04:05Z)"
        );
        let text = std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
        assert!(
            text.starts_with(&format!("pid {}\n", std::process::id())),
            "{text}"
        );
        assert!(!text.contains("999999"), "{text}");
    }

    #[test]
    fn a_lock_file_of_garbage_names_no_one_and_is_never_quoted() {
        let holder = Holder::parse(b"pid abc\nsince yesterday\nsecret-token-123\n");
        assert_eq!(holder, Holder::default());
        assert_eq!(holder.to_string(), "another process");
        // A holder caught half way through writing its pid is not misread.
        assert_eq!(Holder::parse(b"pid 12").pid, None);
        assert_eq!(Holder::parse(b"pid 12\nsin").pid, Some(12));
        assert_eq!(Holder::parse(&[0xff, 0xfe, b'\n']), Holder::default());
    }

    #[test]
    fn a_lock_file_that_is_not_a_file_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(LOCK_FILE)).unwrap();
        let e = Lock::take(dir.path()).unwrap_err().to_string();
        assert!(e.contains("lock"), "{e}");
    }

    /// What the child process below prints, on a line of its own, once it holds the lock.
    const LOCKED: &str = "holder-locked";

    /// Run as a child process by the test below (and a no-op in the ordinary run): takes the
    /// lock of the directory it is given, says so, and holds it until it is killed or its
    /// standard input closes (the parent gone).
    #[test]
    fn holds_a_lock_when_run_as_the_other_process() {
        let Some(dir) = std::env::var_os(HOLDER_DIR) else {
            return;
        };
        let _lock = Lock::take(Path::new(&dir)).unwrap();
        println!("\n{LOCKED}");
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
    }

    #[test]
    fn another_process_holding_the_lock_is_named_and_taken_over_once_it_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "storage::lock::tests::holds_a_lock_when_run_as_the_other_process",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(HOLDER_DIR, dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let locked = stdout
            .lines()
            .map_while(Result::ok)
            .any(|line| line == LOCKED);
        assert!(locked, "the child never took the lock");
        let e = Lock::take(dir.path()).unwrap_err();
        let StorageError::Locked { holder, .. } = &e else {
            panic!("{e}");
        };
        assert_eq!(holder.pid, Some(child.id()), "{e}");
        assert!(e.to_string().contains(&format!("process {}", child.id())));
        // A crash: the kernel drops its lock, and the file still names it.
        child.kill().unwrap();
        child.wait().unwrap();
        let lock = Lock::take(dir.path()).unwrap();
        assert_eq!(lock.took_over().and_then(|h| h.pid), Some(child.id()));
    }
}
