//! The storage directory: the one module that owns the files the exporter keeps across a
//! restart (`--storage.path DIR`, as Alertmanager names it), their formats, their versions and
//! the records kept in them: of each target in `DIR/targets.json` ([`targets`]), of each
//! token's pacer in `DIR/pace.json` ([`pace`]). Callers hand it plain data and take plain data
//! back: what to write when, and what to take back into the running config, is the engine's
//! (`engine/checkpoint.rs`, `engine/paces.rs`).
//!
//! - [`Dir::open`] creates the directory (0700) if it is missing and locks it, so that two
//!   exporters never share one (`lock.rs`); leftovers of a write a crash interrupted are
//!   removed.
//! - [`Dir::write`] replaces one state file whole: a temporary file in the directory (0600),
//!   fsync, rename over the old one, fsync of the directory. A crash at any point leaves the
//!   previous file or the new one, never half of one; a failed write names the file and a
//!   cause from a fixed set ([`WriteCause`]).
//! - [`Dir::read`] tells a cold start (no file) from a good file, an older format and each kind
//!   of bad file ([`Problem`]), with a reason for one warn line; it never panics, whatever the
//!   file holds. Every file is bounded by [`MAX_STATE_BYTES`], when written and when read.
//!
//! What may be stored: what the exporter learned from the provider and from its own polling
//! (values, when they were fetched, outcomes and failure reasons, learned paces), keyed by
//! names from the config (tenant, collector, target). Never a token, a password, a key, a URL
//! with its userinfo or query, nor anything else the redaction rules keep out of logs: the
//! files outlive the process, travel with volumes and backups, and are read by whoever can read
//! the directory. This module cannot tell a secret from a value, so keeping them out is the
//! callers' duty. It logs nothing itself, and its errors and reasons name files, formats and
//! causes, never what a file holds.
//!
//! Everything here is blocking file I/O: callers run it on a blocking thread, never on a worker
//! that answers scrapes.

mod envelope;
mod error;
mod found;
mod lock;
pub mod pace;
pub mod targets;

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::files;

pub use envelope::{Bad, Older, Problem, ReadOutcome, Stored, Versioned};
pub use error::{StorageError, WriteCause};
pub use found::Found;
pub use lock::{Holder, LOCK_FILE};

/// Largest state file written or read: a write that would pass it is refused and leaves the
/// previous file in place; a file past it is refused after reading one byte more than the bound.
pub const MAX_STATE_BYTES: u64 = 256 * 1024 * 1024;

/// Longest state name, in characters.
pub const MAX_NAME_CHARS: usize = 64;

/// How temporary files end: what [`Dir::open`] removes as leftovers of an interrupted write.
const TEMP_SUFFIX: &str = ".tmp";

/// An open, locked storage directory. Dropping it releases the lock.
#[derive(Debug)]
pub struct Dir {
    path: PathBuf,
    lock: lock::Lock,
    /// Numbers temporary files, so that two writes at once never share one.
    next_temp: AtomicU64,
}

/// A state file written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteReport {
    pub path: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// The time written into it.
    pub written_at: SystemTime,
    /// How long the write took, fsyncs included.
    pub took: Duration,
}

impl Dir {
    /// Opens the storage directory at `path`, creating it (0700, and its missing parents) if
    /// it is missing, and locks it. Refused when `path` is not a directory, or when another
    /// [`Dir`] (of this process or another) holds it, naming the holder.
    pub fn open(path: &Path) -> Result<Dir, StorageError> {
        create(path)?;
        let lock = lock::Lock::take(path)?;
        remove_leftovers(path).map_err(|source| StorageError::Open {
            path: path.to_owned(),
            source,
        })?;
        Ok(Dir {
            path: path.to_owned(),
            lock,
            next_temp: AtomicU64::new(0),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The holder named by a stale lock file that this one took over: a previous exporter
    /// that did not end cleanly (a crash, SIGKILL, an OOM kill).
    pub fn took_over(&self) -> Option<&Holder> {
        self.lock.took_over()
    }

    /// The file the state `name` is kept in: `DIR/NAME.json`.
    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(format!("{name}.json"))
    }

    /// Replaces the state `name` with `data`, whole, or leaves the previous file as it was.
    pub fn write<T: Serialize + Versioned>(
        &self,
        name: &str,
        data: &T,
    ) -> Result<WriteReport, StorageError> {
        self.write_within(name, data, MAX_STATE_BYTES)
    }

    /// What the state `name` holds for a reader of `T`.
    pub fn read<T: DeserializeOwned + Versioned>(&self, name: &str) -> ReadOutcome<T> {
        self.read_within(name, MAX_STATE_BYTES)
    }

    fn write_within<T: Serialize + Versioned>(
        &self,
        name: &str,
        data: &T,
        limit: u64,
    ) -> Result<WriteReport, StorageError> {
        let started = Instant::now();
        let target = self.file(name);
        if !is_state_name(name) {
            return Err(StorageError::write(target, WriteCause::InvalidName, None));
        }
        let temp = self.path.join(format!(
            ".{name}.json.{}-{}{TEMP_SUFFIX}",
            std::process::id(),
            self.next_temp.fetch_add(1, Ordering::Relaxed)
        ));
        let written_at = jiff::Timestamp::now();
        let bytes = write_temp(&temp, &target, data, written_at, limit).inspect_err(|_| {
            let _ = fs::remove_file(&temp);
        })?;
        if let Err(e) = fs::rename(&temp, &target) {
            let _ = fs::remove_file(&temp);
            return Err(StorageError::write(target, WriteCause::of(&e), Some(&e)));
        }
        // The rename is durable only once the directory is.
        if let Err(e) = File::open(&self.path).and_then(|dir| dir.sync_all()) {
            return Err(StorageError::Write {
                detail: format!(
                    "it was written, but the directory could not be synced ({e}): a crash now may bring back the previous file"
                ),
                path: target,
                cause: WriteCause::of(&e),
            });
        }
        Ok(WriteReport {
            path: target,
            bytes,
            written_at: SystemTime::from(written_at),
            took: started.elapsed(),
        })
    }

    fn read_within<T: DeserializeOwned + Versioned>(
        &self,
        name: &str,
        limit: u64,
    ) -> ReadOutcome<T> {
        let path = self.file(name);
        let bad = |problem, detail: String| {
            ReadOutcome::Bad(Bad {
                path: path.clone(),
                problem,
                detail,
            })
        };
        if !is_state_name(name) {
            return bad(
                Problem::Unreadable,
                WriteCause::InvalidName.describe().to_owned(),
            );
        }
        match files::read_bounded(&path, limit) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => ReadOutcome::Missing,
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => bad(
                Problem::Unreadable,
                "it is not a regular file (a directory, a FIFO, a socket or a device is in its place): remove what is there".to_owned(),
            ),
            Err(e) => bad(Problem::Unreadable, format!("it cannot be read ({e})")),
            Ok(None) => bad(
                Problem::TooLarge,
                format!("it is larger than its bound of {}", bytes_in_words(limit)),
            ),
            Ok(Some(bytes)) => envelope::decode(&path, &bytes),
        }
    }
}

/// A state name: 1 to [`MAX_NAME_CHARS`] letters, digits, `_` and `-`, so that a name is one
/// file in the directory, never the lock file, a temporary file or a path elsewhere.
fn is_state_name(name: &str) -> bool {
    (1..=MAX_NAME_CHARS).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Creates the directory, 0700, unless it is there. One that is there is left as it is
/// (a mounted volume's owner and mode are the operator's); the files in it are 0600 whatever.
fn create(path: &Path) -> Result<(), StorageError> {
    let open_error = |source| StorageError::Open {
        path: path.to_owned(),
        source,
    };
    match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => {
            return Err(StorageError::NotADirectory {
                path: path.to_owned(),
            });
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(open_error(e)),
    }
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(0o700);
    }
    builder.create(path).map_err(open_error)
}

/// Removes the temporary files of writes a crash interrupted: with the lock held, no write is
/// under way. One that cannot be removed stays, and is never read.
fn remove_leftovers(dir: &Path) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') && name.ends_with(TEMP_SUFFIX) && entry.file_type()?.is_file() {
            let _ = fs::remove_file(entry.path());
        }
    }
    Ok(())
}

/// Writes `data` in its envelope to the new file `temp` (0600), and fsyncs it: its size. A
/// failure is a failed write of `target`.
fn write_temp<T: Serialize + Versioned>(
    temp: &Path,
    target: &Path,
    data: &T,
    written_at: jiff::Timestamp,
    limit: u64,
) -> Result<u64, StorageError> {
    let failed = |cause, source: &dyn std::fmt::Display| {
        StorageError::write(target.to_owned(), cause, Some(source))
    };
    let io = |e: io::Error| failed(WriteCause::of(&e), &e);
    let file = create_new(temp).map_err(io)?;
    let mut out = envelope::Bounded::new(BufWriter::new(file), limit);
    if let Err(e) = envelope::encode(&mut out, data, written_at) {
        return Err(if out.exceeded {
            let bound = format!("more than {}", bytes_in_words(limit));
            failed(WriteCause::TooLarge, &bound)
        } else if e.is_io() {
            io(io::Error::from(e))
        } else {
            failed(WriteCause::Encode, &e)
        });
    }
    let bytes = out.written;
    let file = out
        .into_inner()
        .into_inner()
        .map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    Ok(bytes)
}

fn create_new(path: &Path) -> io::Result<File> {
    owner_only(OpenOptions::new().write(true).create_new(true)).open(path)
}

/// Files this module creates are read and written by their owner only (0600).
fn owner_only(options: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    options
}

/// `256 MiB`, or `1000 bytes` for a bound that is no whole number of MiB.
fn bytes_in_words(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
    struct Paces {
        per_endpoint: BTreeMap<String, f64>,
    }

    impl Versioned for Paces {
        const VERSION: u32 = 1;
    }

    fn paces(rate: f64) -> Paces {
        Paces {
            per_endpoint: [("delivery_account".to_owned(), rate)].into(),
        }
    }

    fn current<T: std::fmt::Debug>(outcome: ReadOutcome<T>) -> Stored<T> {
        match outcome {
            ReadOutcome::Current(stored) => stored,
            other => panic!("not a current file: {other:?}"),
        }
    }

    fn bad<T: std::fmt::Debug>(outcome: ReadOutcome<T>) -> Bad {
        match outcome {
            ReadOutcome::Bad(bad) => bad,
            other => panic!("not refused: {other:?}"),
        }
    }

    /// The names in `dir`, sorted.
    fn listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[cfg(unix)]
    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt as _;
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[cfg(unix)]
    fn set_mode(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt as _;
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    /// Whether this process may write into `dir` though its mode says no (root, or a
    /// capability that overrides permissions): then a test of permissions proves nothing.
    #[cfg(unix)]
    fn permissions_are_overridden(dir: &Path) -> bool {
        let probe = dir.join("probe-of-permissions");
        let overridden = fs::write(&probe, b"").is_ok();
        let _ = fs::remove_file(&probe);
        overridden
    }

    #[cfg(unix)]
    #[test]
    fn open_creates_a_missing_directory_0700_and_refuses_a_path_that_is_not_one() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("data/exporter");
        let dir = Dir::open(&path).unwrap();
        assert_eq!(dir.path(), path);
        assert_eq!(mode(&path), 0o700);
        assert_eq!(mode(&path.join(LOCK_FILE)), 0o600);
        assert_eq!(listing(&path), [LOCK_FILE]);

        let file = tmp.path().join("a-file");
        fs::write(&file, "x").unwrap();
        let e = Dir::open(&file).unwrap_err();
        assert!(matches!(e, StorageError::NotADirectory { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            format!(
                "the storage path {} is not a directory: name a directory (it is created if missing), or move what is there",
                file.display()
            )
        );
        let e = Dir::open(&file.join("below")).unwrap_err();
        assert!(
            e.to_string().contains("cannot open the storage directory"),
            "{e}"
        );
    }

    #[test]
    fn a_second_open_is_refused_naming_the_holder_until_the_first_is_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let first = Dir::open(tmp.path()).unwrap();
        let e = Dir::open(tmp.path()).unwrap_err();
        assert_eq!(e.cause(), None);
        let text = e.to_string();
        assert!(
            text.starts_with(&format!(
                "the storage directory {} is in use by process {} (since ",
                tmp.path().display(),
                std::process::id()
            )),
            "{text}"
        );
        assert!(text.ends_with("stop the other exporter, or give this one a directory of its own"));
        drop(first);
        let second = Dir::open(tmp.path()).unwrap();
        assert_eq!(second.took_over(), None, "released cleanly");
    }

    #[cfg(unix)]
    #[test]
    fn what_is_written_is_read_back_from_a_0600_file_and_no_temporary_file_stays() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open(tmp.path()).unwrap();
        assert!(matches!(dir.read::<Paces>("paces"), ReadOutcome::Missing));
        let before = SystemTime::now();
        let report = dir.write("paces", &paces(50.0)).unwrap();
        assert_eq!(report.path, tmp.path().join("paces.json"));
        assert_eq!(report.bytes, fs::metadata(&report.path).unwrap().len());
        assert!(report.written_at >= before - Duration::from_secs(1));
        assert_eq!(mode(&report.path), 0o600);
        let stored = current(dir.read::<Paces>("paces"));
        assert_eq!(stored.data, paces(50.0));
        assert_eq!(stored.version, 1);
        assert_eq!(stored.written_at, report.written_at);

        dir.write("paces", &paces(25.0)).unwrap();
        assert_eq!(current(dir.read::<Paces>("paces")).data, paces(25.0));
        assert_eq!(listing(tmp.path()), [LOCK_FILE, "paces.json"]);
    }

    #[test]
    fn a_leftover_temporary_file_of_a_crash_is_ignored_and_removed_at_open_and_the_previous_file_survives()
     {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open(tmp.path()).unwrap();
        dir.write("paces", &paces(50.0)).unwrap();
        // A crash between the temporary file's creation and its rename: half a file beside the
        // good one, and a lock file that names the dead holder.
        let good = fs::read(dir.file("paces")).unwrap();
        let leftover = tmp.path().join(".paces.json.4242-7.tmp");
        fs::write(&leftover, &good[..good.len() / 2]).unwrap();
        assert_eq!(current(dir.read::<Paces>("paces")).data, paces(50.0));
        drop(dir);
        fs::write(
            tmp.path().join(LOCK_FILE),
            "pid 4242\nsince 2026-01-02T03:04:05Z\n",
        )
        .unwrap();

        let dir = Dir::open(tmp.path()).unwrap();
        assert_eq!(dir.took_over().and_then(|h| h.pid), Some(4242));
        assert!(!leftover.exists());
        assert_eq!(current(dir.read::<Paces>("paces")).data, paces(50.0));
        assert_eq!(listing(tmp.path()), [LOCK_FILE, "paces.json"]);
    }

    #[test]
    fn a_failed_write_leaves_the_previous_file_whole_and_no_temporary_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open(tmp.path()).unwrap();
        dir.write("paces", &paces(50.0)).unwrap();
        let good = fs::read(dir.file("paces")).unwrap();

        let e = dir.write_within("paces", &paces(25.0), 40).unwrap_err();
        assert_eq!(e.cause(), Some(WriteCause::TooLarge));
        assert_eq!(
            e.to_string(),
            format!(
                "cannot write the state file {}: the state would pass its bound (more than 40 bytes); the previous file, if any, is left as it was",
                dir.file("paces").display()
            )
        );

        // Keys that are not strings: serde_json refuses half way through the data.
        #[derive(Serialize)]
        struct Odd(BTreeMap<(u8, u8), u8>);
        impl Versioned for Odd {
            const VERSION: u32 = 1;
        }
        let e = dir.write("paces", &Odd([((1, 2), 3)].into())).unwrap_err();
        assert_eq!(e.cause(), Some(WriteCause::Encode), "{e}");
        assert!(e.to_string().contains("cannot be written as JSON"), "{e}");

        assert_eq!(fs::read(dir.file("paces")).unwrap(), good);
        assert_eq!(listing(tmp.path()), [LOCK_FILE, "paces.json"]);
    }

    #[test]
    fn a_missing_file_is_a_cold_start_and_each_unreadable_one_is_refused_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open(tmp.path()).unwrap();
        assert!(matches!(dir.read::<Paces>("paces"), ReadOutcome::Missing));

        dir.write("paces", &paces(50.0)).unwrap();
        let too_large = bad(dir.read_within::<Paces>("paces", 20));
        assert_eq!(too_large.problem, Problem::TooLarge);
        assert_eq!(
            too_large.to_string(),
            format!(
                "state file {} not used: it is larger than its bound of 20 bytes",
                dir.file("paces").display()
            )
        );

        fs::create_dir(dir.file("a-directory")).unwrap();
        let directory = bad(dir.read::<Paces>("a-directory"));
        assert_eq!(directory.problem, Problem::Unreadable);
        assert!(
            directory.to_string().contains("not a regular file"),
            "{directory}"
        );
        assert!(
            directory
                .to_string()
                .contains(&dir.file("a-directory").display().to_string())
        );

        fs::write(dir.file("cut"), r#"{"version":1,"written_at":"2026-"#).unwrap();
        let cut = bad(dir.read::<Paces>("cut"));
        assert_eq!(cut.problem, Problem::Truncated, "{cut}");
        fs::write(dir.file("empty"), "").unwrap();
        assert_eq!(bad(dir.read::<Paces>("empty")).problem, Problem::Empty);
    }

    #[cfg(unix)]
    #[test]
    fn a_file_without_read_permission_is_refused_as_unreadable() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open(tmp.path()).unwrap();
        dir.write("paces", &paces(50.0)).unwrap();
        set_mode(&dir.file("paces"), 0o000);
        if files::read_bounded(&dir.file("paces"), 10).is_ok() {
            eprintln!(
                "SKIPPED: this test runs with privileges that read any file (root?): an unreadable file cannot be made"
            );
            return;
        }
        let e = bad(dir.read::<Paces>("paces"));
        assert_eq!(e.problem, Problem::Unreadable);
        assert!(
            e.to_string()
                .contains("it cannot be read (Permission denied"),
            "{e}"
        );
    }

    #[test]
    fn a_file_from_a_newer_version_is_refused_and_an_older_one_returned() {
        #[derive(Serialize)]
        struct PacesV2 {
            per_route: BTreeMap<String, f64>,
        }
        impl Versioned for PacesV2 {
            const VERSION: u32 = 2;
        }
        #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
        struct PacesV0(f64);
        impl Versioned for PacesV0 {
            const VERSION: u32 = 0;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open(tmp.path()).unwrap();
        dir.write(
            "paces",
            &PacesV2 {
                per_route: BTreeMap::new(),
            },
        )
        .unwrap();
        let newer = bad(dir.read::<Paces>("paces"));
        assert_eq!(newer.problem, Problem::NewerVersion);
        assert!(
            newer
                .to_string()
                .contains("written by a newer version of the exporter, in format 2; this one reads format 1 and older: refused"),
            "{newer}"
        );

        dir.write("old", &PacesV0(0.5)).unwrap();
        let ReadOutcome::Older(older) = dir.read::<Paces>("old") else {
            panic!("not older");
        };
        assert_eq!(older.version, 0);
        assert_eq!(older.decode::<PacesV0>().unwrap(), PacesV0(0.5));
    }

    #[cfg(unix)]
    #[test]
    fn a_write_into_a_read_only_directory_fails_naming_the_file_and_the_cause() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open(tmp.path()).unwrap();
        dir.write("paces", &paces(50.0)).unwrap();
        set_mode(tmp.path(), 0o500);
        if permissions_are_overridden(tmp.path()) {
            set_mode(tmp.path(), 0o700);
            eprintln!(
                "SKIPPED: this test runs as root (or with a capability that overrides permissions): a read-only directory cannot be made by chmod"
            );
            return;
        }
        let e = dir.write("paces", &paces(25.0)).unwrap_err();
        set_mode(tmp.path(), 0o700);
        assert_eq!(e.cause(), Some(WriteCause::NotWritable));
        let text = e.to_string();
        assert!(
            text.contains(&dir.file("paces").display().to_string()),
            "{text}"
        );
        assert!(
            text.contains("read-only or not writable by this user"),
            "{text}"
        );
        assert_eq!(current(dir.read::<Paces>("paces")).data, paces(50.0));
    }

    #[test]
    fn a_write_into_a_vanished_directory_fails_naming_the_file_and_the_cause() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("state");
        let dir = Dir::open(&path).unwrap();
        fs::remove_dir_all(&path).unwrap();
        let e = dir.write("paces", &paces(50.0)).unwrap_err();
        assert_eq!(e.cause(), Some(WriteCause::Vanished), "{e}");
        let text = e.to_string();
        assert!(
            text.contains(&path.join("paces.json").display().to_string()),
            "{text}"
        );
        assert!(text.contains("the storage directory is gone"), "{text}");
        assert!(matches!(dir.read::<Paces>("paces"), ReadOutcome::Missing));
    }

    #[test]
    fn a_name_is_one_file_in_the_directory_never_a_path_the_lock_or_a_temporary_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open(tmp.path()).unwrap();
        let long = "x".repeat(MAX_NAME_CHARS + 1);
        for name in ["", "../escape", "a/b", ".paces.json.1-1.tmp", &long] {
            let e = dir.write(name, &paces(1.0)).unwrap_err();
            assert_eq!(e.cause(), Some(WriteCause::InvalidName), "{name}: {e}");
            let refused = bad(dir.read::<Paces>(name));
            assert_eq!(refused.problem, Problem::Unreadable, "{name}");
            assert!(refused.detail.contains("not a state name"), "{refused}");
        }
        // `lock` is a name like another: its file is `lock.json`, not the lock.
        dir.write("lock", &paces(1.0)).unwrap();
        assert!(tmp.path().join("lock.json").exists());
        assert_eq!(listing(tmp.path()), [LOCK_FILE, "lock.json"]);
        assert!(!tmp.path().parent().unwrap().join("escape.json").exists());
    }
}
