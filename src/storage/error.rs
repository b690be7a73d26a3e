//! What the storage directory tells its caller when it cannot do its work: an error that names
//! the path, the cause and the fix, and for a failed write a cause from a fixed set, so that a
//! series can count failed writes by it without ever taking an error's text as a label.

use std::io;
use std::path::PathBuf;

use super::lock::Holder;

/// Why a state file could not be written. A fixed set: a series can count failed writes by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WriteCause {
    /// The file system is full, or the user's quota on it is used up.
    NoSpace,
    /// The directory cannot be written: a read-only mount, or permissions this user lacks.
    NotWritable,
    /// The directory is gone (removed, or its volume unmounted) since it was opened.
    Vanished,
    /// The state would be larger than the bound ([`super::MAX_STATE_BYTES`]).
    TooLarge,
    /// The data cannot be written as JSON (the caller's type: a map whose keys are not strings).
    Encode,
    /// The name is not a state name (1 to 64 letters, digits, `_` and `-`).
    InvalidName,
    /// Any other I/O error.
    Io,
}

impl WriteCause {
    pub const ALL: [WriteCause; 7] = [
        WriteCause::NoSpace,
        WriteCause::NotWritable,
        WriteCause::Vanished,
        WriteCause::TooLarge,
        WriteCause::Encode,
        WriteCause::InvalidName,
        WriteCause::Io,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            WriteCause::NoSpace => "no_space",
            WriteCause::NotWritable => "not_writable",
            WriteCause::Vanished => "vanished",
            WriteCause::TooLarge => "too_large",
            WriteCause::Encode => "encode",
            WriteCause::InvalidName => "invalid_name",
            WriteCause::Io => "io",
        }
    }

    /// The cause of an I/O error met while writing into the directory.
    pub(super) fn of(e: &io::Error) -> WriteCause {
        match e.kind() {
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => WriteCause::NoSpace,
            io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => {
                WriteCause::NotWritable
            }
            // The temporary file is created new in the directory: not found means no directory.
            io::ErrorKind::NotFound | io::ErrorKind::StaleNetworkFileHandle => WriteCause::Vanished,
            _ => WriteCause::Io,
        }
    }

    /// What it means, and what to do.
    pub(super) fn describe(self) -> &'static str {
        match self {
            WriteCause::NoSpace => {
                "the file system is full (or the quota on it used up): free space, or move the storage directory"
            }
            WriteCause::NotWritable => {
                "the directory is read-only or not writable by this user: make it writable, or move the storage directory"
            }
            WriteCause::Vanished => {
                "the storage directory is gone (removed or unmounted since the start): restart the exporter to create it again"
            }
            WriteCause::TooLarge => "the state would pass its bound",
            WriteCause::Encode => "its data cannot be written as JSON",
            WriteCause::InvalidName => "not a state name (1 to 64 letters, digits, `_` and `-`)",
            WriteCause::Io => "an I/O error",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error(
        "the storage path {path} is not a directory: name a directory (it is created if missing), or move what is there"
    )]
    NotADirectory { path: PathBuf },
    #[error(
        "cannot open the storage directory {path}: {source} (check the path, and that this user may create and write it)"
    )]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "the storage directory {path} is in use by {holder}, and two exporters never share one: stop the other exporter, or give this one a directory of its own"
    )]
    Locked { path: PathBuf, holder: Holder },
    /// `detail` says what happened to the previous file, and why.
    #[error("cannot write the state file {path}: {detail}")]
    Write {
        path: PathBuf,
        cause: WriteCause,
        detail: String,
    },
}

impl StorageError {
    /// Why a write failed; `None` for an error of [`super::Dir::open`].
    pub fn cause(&self) -> Option<WriteCause> {
        match self {
            StorageError::Write { cause, .. } => Some(*cause),
            _ => None,
        }
    }

    /// A write that failed for `cause`, with the I/O error behind it if any.
    pub(super) fn write(
        path: PathBuf,
        cause: WriteCause,
        source: Option<&dyn std::fmt::Display>,
    ) -> StorageError {
        let mut detail = cause.describe().to_owned();
        if let Some(source) = source {
            detail.push_str(&format!(" ({source})"));
        }
        detail.push_str("; the previous file, if any, is left as it was");
        StorageError::Write {
            path,
            cause,
            detail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_full_disk_a_read_only_mount_and_a_missing_directory_each_have_their_cause() {
        let cause = |errno| WriteCause::of(&io::Error::from_raw_os_error(errno));
        assert_eq!(cause(libc::ENOSPC), WriteCause::NoSpace);
        assert_eq!(cause(libc::EDQUOT), WriteCause::NoSpace);
        assert_eq!(cause(libc::EROFS), WriteCause::NotWritable);
        assert_eq!(cause(libc::EACCES), WriteCause::NotWritable);
        assert_eq!(cause(libc::EPERM), WriteCause::NotWritable);
        assert_eq!(cause(libc::ENOENT), WriteCause::Vanished);
        assert_eq!(cause(libc::EIO), WriteCause::Io);
        let e = StorageError::write(
            PathBuf::from("/var/lib/x/targets.json"),
            WriteCause::NoSpace,
            Some(&io::Error::from_raw_os_error(libc::ENOSPC)),
        );
        let text = e.to_string();
        assert!(text.contains("/var/lib/x/targets.json"), "{text}");
        assert!(text.contains("the file system is full"), "{text}");
        assert!(text.contains("left as it was"), "{text}");
        assert_eq!(e.cause(), Some(WriteCause::NoSpace));
    }

    #[test]
    fn every_cause_has_its_own_label() {
        let labels: std::collections::BTreeSet<_> =
            WriteCause::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(labels.len(), WriteCause::ALL.len());
        assert!(
            labels
                .iter()
                .all(|l| { l.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') })
        );
    }
}
