//! The format of a state file, `{"version": N, "written_at": "...", "data": ...}`: written
//! within a bound, and read without trusting a byte of it. What a file holds is told apart as
//! the current format, an older one, a newer one, or a bad file with its reason in words that
//! quote nothing from the file (line and column, never a value).

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::error::Category;
use serde_json::value::RawValue;

/// A type kept in the storage directory, and the format version of the file it is written as.
pub trait Versioned {
    /// From 1 up; raised whenever the shape of the data changes, so that a file of another
    /// shape is never read as this one.
    const VERSION: u32;
}

/// What reading a state file found.
#[derive(Debug)]
pub enum ReadOutcome<T> {
    /// No file: a cold start, not an error.
    Missing,
    /// A file of the current format.
    Current(Stored<T>),
    /// A file of an older format: the caller reads it with that format's type, or refuses it.
    Older(Older),
    /// A file that cannot be used, and why.
    Bad(Bad),
}

/// The data of a file of the current format.
#[derive(Debug, PartialEq)]
pub struct Stored<T> {
    pub version: u32,
    pub written_at: SystemTime,
    pub data: T,
}

/// A file of an older format than the one the caller reads, its data not yet decoded.
#[derive(Debug)]
pub struct Older {
    pub path: PathBuf,
    /// Its format.
    pub version: u32,
    /// The format the caller reads.
    pub current: u32,
    pub written_at: SystemTime,
    data: Box<RawValue>,
}

impl Older {
    /// Its data, read with the type of its format.
    pub fn decode<U: DeserializeOwned>(&self) -> Result<U, Bad> {
        serde_json::from_str(self.data.get()).map_err(|e| Bad {
            path: self.path.clone(),
            problem: Problem::Corrupt,
            detail: data_mismatch(self.version, &e),
        })
    }

    /// The file refused, in so many words.
    pub fn refuse(&self) -> Bad {
        Bad {
            path: self.path.clone(),
            problem: Problem::OlderVersion,
            detail: format!(
                "it is in format {}, older than the format {} this version reads, and is not converted: refused",
                self.version, self.current
            ),
        }
    }
}

/// A state file that cannot be used: [`fmt::Display`] is one warn line that names the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bad {
    pub path: PathBuf,
    pub problem: Problem,
    /// Why, in words: never a value from the file.
    pub detail: String,
}

impl fmt::Display for Bad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "state file {} not used: {}",
            self.path.display(),
            self.detail
        )
    }
}

/// What is wrong with a bad state file. A fixed set: a series can count refused files by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Problem {
    /// Nothing in it, or only white space.
    Empty,
    /// JSON that ends before it is complete.
    Truncated,
    /// Not JSON, not UTF-8, not this exporter's envelope, or data of another shape.
    Corrupt,
    /// Written by a newer version of the exporter, in a format this one does not know.
    NewerVersion,
    /// An older format, refused by the caller ([`Older::refuse`]).
    OlderVersion,
    /// Larger than the bound ([`super::MAX_STATE_BYTES`]).
    TooLarge,
    /// Could not be read: permissions, or a directory (or a FIFO, a device) in its place.
    Unreadable,
}

impl Problem {
    pub const ALL: [Problem; 7] = [
        Problem::Empty,
        Problem::Truncated,
        Problem::Corrupt,
        Problem::NewerVersion,
        Problem::OlderVersion,
        Problem::TooLarge,
        Problem::Unreadable,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Problem::Empty => "empty",
            Problem::Truncated => "truncated",
            Problem::Corrupt => "corrupt",
            Problem::NewerVersion => "newer_version",
            Problem::OlderVersion => "older_version",
            Problem::TooLarge => "too_large",
            Problem::Unreadable => "unreadable",
        }
    }
}

#[derive(Serialize)]
struct Out<'a, T> {
    version: u32,
    written_at: String,
    data: &'a T,
}

/// Writes `data` in its envelope to `out`.
pub(super) fn encode<T: Serialize + Versioned>(
    out: impl Write,
    data: &T,
    written_at: jiff::Timestamp,
) -> serde_json::Result<()> {
    let envelope = Out {
        version: T::VERSION,
        written_at: written_at.to_string(),
        data,
    };
    serde_json::to_writer(out, &envelope)
}

/// The envelope as read: each member kept unparsed, so that the version is looked at before
/// anything else is asked of the file (a newer format may have changed the rest). Unknown
/// members are skipped, for the same reason.
#[derive(Deserialize)]
struct In<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    version: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    written_at: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    data: Option<&'a RawValue>,
}

/// A member that is there, even as `null` (which is data: `()` or `None` written).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Why a file is not used: its problem, and the reason in words.
type Refusal = (Problem, String);

/// What `bytes`, the text of the state file at `path`, holds for a reader of `T`. Never panics.
pub(super) fn decode<T: DeserializeOwned + Versioned>(path: &Path, bytes: &[u8]) -> ReadOutcome<T> {
    let bad = |(problem, detail): Refusal| {
        ReadOutcome::Bad(Bad {
            path: path.to_owned(),
            problem,
            detail,
        })
    };
    let (version, written_at, data) = match parse(bytes).and_then(|e| head(e, T::VERSION)) {
        Ok(head) => head,
        Err(refusal) => return bad(refusal),
    };
    if version < T::VERSION {
        return ReadOutcome::Older(Older {
            path: path.to_owned(),
            version,
            current: T::VERSION,
            written_at,
            data: data.to_owned(),
        });
    }
    match serde_json::from_str(data.get()) {
        Ok(data) => ReadOutcome::Current(Stored {
            version,
            written_at,
            data,
        }),
        Err(e) => bad((Problem::Corrupt, data_mismatch(version, &e))),
    }
}

/// The envelope in `bytes`, its members unparsed.
fn parse(bytes: &[u8]) -> Result<In<'_>, Refusal> {
    let not_a_state_file = "it is not a state file of this exporter: not an object with `version`, `written_at` and `data`";
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err((Problem::Empty, "it is empty".to_owned()));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        (
            Problem::Corrupt,
            format!("it is not UTF-8 text (byte {at})"),
        )
    })?;
    match serde_json::from_str(text) {
        // serde reads a struct from an array too, in the order of its fields.
        Ok(_) if !text.trim_start().starts_with('{') => {
            Err((Problem::Corrupt, not_a_state_file.to_owned()))
        }
        Ok(envelope) => Ok(envelope),
        Err(e) => {
            let at = format!("line {}, column {}", e.line(), e.column());
            Err(match e.classify() {
                Category::Eof => (
                    Problem::Truncated,
                    format!("it is cut short: its JSON ends unfinished at {at}"),
                ),
                Category::Syntax | Category::Io => {
                    (Problem::Corrupt, format!("it is not JSON ({at})"))
                }
                Category::Data => (Problem::Corrupt, format!("{not_a_state_file} ({at})")),
            })
        }
    }
}

/// The envelope's version (refused if newer than `current`), time and data.
fn head(envelope: In<'_>, current: u32) -> Result<(u32, SystemTime, &RawValue), Refusal> {
    let corrupt = |detail: &str| (Problem::Corrupt, detail.to_owned());
    let version = envelope
        .version
        .ok_or_else(|| corrupt("it has no `version`: not a state file of this exporter"))?;
    let version = serde_json::from_str::<u32>(version.get())
        .map_err(|_| corrupt("its `version` is not a whole number from 0 to 4294967295"))?;
    if version > current {
        return Err((
            Problem::NewerVersion,
            format!(
                "it was written by a newer version of the exporter, in format {version}; this one reads format {current} and older: refused, as a newer format is never read as an older one"
            ),
        ));
    }
    let written_at = envelope
        .written_at
        .and_then(|raw| serde_json::from_str::<&str>(raw.get()).ok())
        .and_then(|text| text.parse::<jiff::Timestamp>().ok())
        .ok_or_else(|| corrupt("its `written_at` is missing or not a time"))?;
    let data = envelope.data.ok_or_else(|| corrupt("it has no `data`"))?;
    Ok((version, SystemTime::from(written_at), data))
}

fn data_mismatch(version: u32, e: &serde_json::Error) -> String {
    format!(
        "its data does not have the shape of format {version} (line {}, column {} of the data)",
        e.line(),
        e.column()
    )
}

/// A writer that refuses to pass `limit` bytes: a state too large is found while it is
/// written, never built whole in memory first.
pub(super) struct Bounded<W> {
    inner: W,
    limit: u64,
    pub(super) written: u64,
    pub(super) exceeded: bool,
}

impl<W: Write> Bounded<W> {
    pub(super) fn new(inner: W, limit: u64) -> Bounded<W> {
        Bounded {
            inner,
            limit,
            written: 0,
            exceeded: false,
        }
    }

    pub(super) fn into_inner(self) -> W {
        self.inner
    }
}

impl<W: Write> Write for Bounded<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.written.saturating_add(buf.len() as u64) > self.limit {
            self.exceeded = true;
            return Err(io::Error::other("the state passes its bound"));
        }
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng as _, SeedableRng as _};
    use std::collections::BTreeMap;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Counts {
        per_target: BTreeMap<String, u64>,
    }

    impl Versioned for Counts {
        const VERSION: u32 = 2;
    }

    fn encoded(data: &impl Serialize, version: u32) -> Vec<u8> {
        // The envelope of any version, as another build of the exporter would write it.
        let mut out = Vec::new();
        serde_json::to_writer(
            &mut out,
            &serde_json::json!({
                "version": version,
                "written_at": "2026-03-04T05:06:07Z",
                "data": data,
            }),
        )
        .unwrap();
        out
    }

    fn counts() -> Counts {
        Counts {
            per_target: [("a".to_owned(), 1), ("b".to_owned(), 2)].into(),
        }
    }

    fn read(bytes: &[u8]) -> ReadOutcome<Counts> {
        decode(Path::new("/state/counts.json"), bytes)
    }

    fn bad(bytes: &[u8]) -> Bad {
        match read(bytes) {
            ReadOutcome::Bad(bad) => bad,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn what_is_written_is_read_back_with_its_version_and_time() {
        let mut out = Vec::new();
        let at: jiff::Timestamp = "2026-03-04T05:06:07.5Z".parse().unwrap();
        encode(&mut out, &counts(), at).unwrap();
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(
            text.starts_with(r#"{"version":2,"written_at":"2026-03-04T05:06:07.5Z","data":{"#),
            "{text}"
        );
        let ReadOutcome::Current(stored) = read(&out) else {
            panic!("{text}");
        };
        assert_eq!(stored.version, 2);
        assert_eq!(stored.written_at, SystemTime::from(at));
        assert_eq!(stored.data, counts());
    }

    #[test]
    fn each_bad_file_is_refused_with_its_problem_and_a_reason_that_names_it() {
        let cases: [(&[u8], Problem, &str); 12] = [
            (b"", Problem::Empty, "it is empty"),
            (b" \n\t", Problem::Empty, "it is empty"),
            (
                br#"{"version":2,"written_at":"2026-03-04T05:06:07Z","data":{"per_tar"#,
                Problem::Truncated,
                "cut short",
            ),
            (b"\x00\x01garbage", Problem::Corrupt, "it is not JSON"),
            (b"{\"a\": \xff}", Problem::Corrupt, "not UTF-8 text (byte 6)"),
            (b"[1, 2]", Problem::Corrupt, "not a state file of this exporter"),
            (br#"{"data": {}}"#, Problem::Corrupt, "it has no `version`"),
            (
                br#"{"version": -1, "written_at": "2026-03-04T05:06:07Z", "data": {}}"#,
                Problem::Corrupt,
                "`version` is not a whole number",
            ),
            (
                br#"{"version": 2, "written_at": "yesterday", "data": {}}"#,
                Problem::Corrupt,
                "`written_at` is missing or not a time",
            ),
            (
                br#"{"version": 2, "written_at": "2026-03-04T05:06:07Z"}"#,
                Problem::Corrupt,
                "it has no `data`",
            ),
            (
                br#"{"version": 2, "written_at": "2026-03-04T05:06:07Z", "data": {"per_target": {"a": "secret-value"}}}"#,
                Problem::Corrupt,
                "does not have the shape of format 2",
            ),
            (
                br#"{"version": 3, "written_at": "a new shape", "data": [], "more": 1}"#,
                Problem::NewerVersion,
                "written by a newer version of the exporter, in format 3; this one reads format 2 and older: refused",
            ),
        ];
        for (bytes, problem, reason) in cases {
            let bad = bad(bytes);
            let line = bad.to_string();
            assert_eq!(bad.problem, problem, "{line}");
            assert!(line.contains(reason), "{line}");
            assert!(
                line.starts_with("state file /state/counts.json not used: "),
                "{line}"
            );
            assert!(
                !line.contains("secret-value"),
                "never quotes the file: {line}"
            );
        }
    }

    #[test]
    fn an_older_format_is_returned_to_be_read_with_its_type_or_refused() {
        #[derive(Debug, PartialEq, Deserialize, Serialize)]
        struct CountsV1(Vec<u64>);
        let ReadOutcome::Older(older) = read(&encoded(&CountsV1(vec![1, 2]), 1)) else {
            panic!("not older");
        };
        assert_eq!((older.version, older.current), (1, 2));
        assert_eq!(older.decode::<CountsV1>().unwrap(), CountsV1(vec![1, 2]));
        let wrong = older.decode::<Counts>().unwrap_err();
        assert_eq!(wrong.problem, Problem::Corrupt);
        assert!(wrong.detail.contains("shape of format 1"), "{wrong}");
        let refused = older.refuse();
        assert_eq!(refused.problem, Problem::OlderVersion);
        assert!(
            refused
                .to_string()
                .contains("it is in format 1, older than the format 2 this version reads, and is not converted: refused"),
            "{refused}"
        );
        // `null` is data (a `None` written), not a missing member.
        let ReadOutcome::Older(none) = read(&encoded(&None::<u8>, 0)) else {
            panic!("not older");
        };
        assert_eq!(none.decode::<Option<u8>>().unwrap(), None);
    }

    #[test]
    fn every_cut_of_a_good_file_is_refused_and_never_read_as_good() {
        let good = encoded(&counts(), 2);
        for end in 0..good.len() {
            let outcome = read(&good[..end]);
            assert!(
                matches!(
                    &outcome,
                    ReadOutcome::Bad(Bad {
                        problem: Problem::Empty | Problem::Truncated,
                        ..
                    })
                ),
                "cut at {end}: {outcome:?}"
            );
        }
    }

    #[test]
    fn no_input_reaches_a_panic_random_bytes_mutated_files_and_deep_nesting() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(41);
        let good = encoded(&counts(), 2);
        let alphabet: &[&[u8]] = &[
            b"{",
            b"}",
            b"[",
            b"]",
            b"\"",
            b":",
            b",",
            b" ",
            b"0",
            b"2",
            b"-1",
            b"1e999",
            b"null",
            b"true",
            b"\"version\"",
            b"\"written_at\"",
            b"\"data\"",
            b"\"2026-03-04T05:06:07Z\"",
            b"\"per_target\"",
            b"\\u0000",
            b"\\",
            b"\xff",
            b"\xe2\x82",
        ];
        let mut inputs: Vec<Vec<u8>> = Vec::new();
        for _ in 0..3_000 {
            let mut bytes = vec![0u8; rng.random_range(0..80)];
            rng.fill(&mut bytes[..]);
            inputs.push(bytes);
        }
        for _ in 0..3_000 {
            let mut bytes = good.clone();
            for _ in 0..rng.random_range(1..6) {
                let at = rng.random_range(0..bytes.len());
                match rng.random_range(0..3) {
                    0 => bytes[at] = rng.random(),
                    1 => bytes.insert(at, rng.random()),
                    _ => {
                        bytes.remove(at);
                    }
                }
            }
            inputs.push(bytes);
        }
        for _ in 0..3_000 {
            let tokens = rng.random_range(0..40);
            inputs.push(
                (0..tokens)
                    .flat_map(|_| alphabet[rng.random_range(0..alphabet.len())].to_vec())
                    .collect(),
            );
        }
        // Nesting far past serde_json's recursion limit, in the envelope and in the data.
        inputs.push([b"[".repeat(100_000), b"]".repeat(100_000)].concat());
        inputs.push(
            [
                br#"{"version":2,"written_at":"2026-03-04T05:06:07Z","data":"#.to_vec(),
                b"{\"per_target\":".repeat(50_000),
            ]
            .concat(),
        );
        inputs.push(
            [
                br#"{"version":2,"written_at":"2026-03-04T05:06:07Z","data":"#.to_vec(),
                b"[".repeat(100_000),
                b"]".repeat(100_000),
                b"}".to_vec(),
            ]
            .concat(),
        );
        let mut refused = 0;
        for bytes in &inputs {
            match read(bytes) {
                ReadOutcome::Bad(bad) => {
                    refused += 1;
                    assert!(!bad.detail.is_empty());
                }
                ReadOutcome::Older(older) => {
                    let _ = older.decode::<Counts>();
                }
                ReadOutcome::Current(_) | ReadOutcome::Missing => {}
            }
        }
        assert!(refused > inputs.len() / 2, "{refused} of {}", inputs.len());
    }

    #[test]
    fn the_bounded_writer_stops_at_its_bound_and_says_so() {
        let mut out = Bounded::new(Vec::new(), 10);
        out.write_all(b"0123456789").unwrap();
        assert!(!out.exceeded);
        assert!(out.write_all(b"x").is_err());
        assert!(out.exceeded);
        assert_eq!(out.written, 10);
        assert_eq!(out.into_inner(), b"0123456789");
    }

    #[test]
    fn every_problem_has_its_own_label() {
        let labels: std::collections::BTreeSet<_> =
            Problem::ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(labels.len(), Problem::ALL.len());
    }
}
