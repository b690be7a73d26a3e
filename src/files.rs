//! Reading a file the config or a flag names (the config, token files, the web config, its
//! certificates and keys): only a regular file, opened without blocking, so that a FIFO nobody
//! writes to or a device can neither hang a start or a reload nor feed it forever, and never
//! more than a bound.

use std::fs::File;
use std::io::{self, Read as _};
use std::path::Path;

/// Largest web config file, certificate, key or CA bundle read.
pub const MAX_WEB_FILE_BYTES: u64 = 1024 * 1024;

/// The file at `path`, or `None` when it is larger than `limit` bytes (only `limit + 1` are
/// read). Anything but a regular file is refused with an error of kind `InvalidInput` whose
/// text says so (and names no path: callers add the field that named it).
pub fn read_bounded(path: &Path, limit: u64) -> io::Result<Option<Vec<u8>>> {
    let file = open_without_blocking(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "it is not a regular file (a directory, a FIFO, a socket or a device); name a file",
        ));
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
}

/// Opens for reading without waiting for a writer (a FIFO's open blocks until one comes).
#[cfg(unix)]
fn open_without_blocking(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_without_blocking(path: &Path) -> io::Result<File> {
    File::open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_regular_file_is_read_and_never_past_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "0123456789").unwrap();
        assert_eq!(read_bounded(&file, 10).unwrap().unwrap(), b"0123456789");
        assert_eq!(read_bounded(&file, 9).unwrap(), None, "one byte over");
        let e = read_bounded(dir.path(), 10).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "a directory: {e}");
        assert!(e.to_string().contains("not a regular file"));
        assert_eq!(
            read_bounded(&dir.path().join("missing"), 10)
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_nobody_writes_to_is_refused_at_once_and_a_device_too() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // Without O_NONBLOCK this open would wait for a writer forever.
        let e = read_bounded(&fifo, 10).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        // An endless device is a character device, not a file: refused before reading.
        let e = read_bounded(Path::new("/dev/zero"), 10).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    }
}
