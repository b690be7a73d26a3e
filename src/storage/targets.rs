//! `DIR/targets.json`: what the storage directory keeps of each target between two processes.
//! Per collector, what it was made under (its tenant, the tenant's provider and a key of its
//! settings, [`settings_key`]); per target, the target, its last good data and when it was
//! fetched, and the last attempt's outcome and failure reason ([`Kept`]).
//!
//! The engine writes the file from the snapshot and takes back what belongs to the current
//! config (`engine/checkpoint.rs`); each collector reads its targets and data with its own types
//! (`CollectorName::read_kept`), and the client turns a failure into its record and back
//! (`UpstreamError::kept`). Nothing here is a secret: the data is what `/metrics` shows (a team
//! member's name and address only when `identity_labels` shows them, as the collector reads
//! them), and a failure's detail is what the log line says, with URLs already redacted.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::{Bad, Older, Versioned};

/// The state file of the targets: `DIR/targets.json`.
pub const TARGETS: &str = "targets";

/// The format of the targets' state file: raised whenever its shape changes. Format 2 keys a
/// collector by its settings' fields ([`settings_key`]); format 1 by a digest of their `Debug`
/// text, which another build could change: its collectors without settings are taken back
/// ([`older`]), the others dropped.
const FORMAT: u32 = 2;

/// The targets' state file: one entry per configured collector. `C` is a collector as written
/// (borrowed from the snapshot, streamed to the file) or as read ([`TargetsIn`]): one shape for
/// both, so that they cannot drift apart.
#[derive(Serialize, Deserialize)]
pub struct TargetsFile<C> {
    pub collectors: Vec<C>,
}

impl<C> Versioned for TargetsFile<C> {
    const VERSION: u32 = FORMAT;
}

/// One collector's targets, with what it was made under: `S` its names (borrowed when written,
/// owned when read), `L` its targets (a list of [`Kept`] when written, left unparsed when read
/// until the collector that reads them is known).
#[derive(Serialize, Deserialize)]
pub struct KeptCollector<S, L> {
    pub tenant: S,
    pub collector: S,
    /// The tenant's provider: its base URL without userinfo, query or fragment.
    pub origin: S,
    /// The collector's settings, as a key ([`settings_key`]); empty when read from format 1
    /// under a digest of settings that cannot be checked ([`older`]).
    pub settings: S,
    pub targets: L,
}

/// The state file as read: each collector's targets left unparsed until its collector is known.
pub type TargetsIn = TargetsFile<KeptCollector<String, Box<RawValue>>>;

/// One target as kept: `T` its target, `D` its data (the collector's own types when read, the
/// snapshot's references when written).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(bound(deserialize = "T: Deserialize<'de>, D: Deserialize<'de>"))]
pub struct Kept<T, D> {
    pub target: T,
    /// The last good data and when it was fetched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<(D, Timestamp)>,
    /// The last attempt's outcome: `None` before the first one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_ok: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempt: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_success: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<KeptError>,
}

impl<T, D> Kept<T, D> {
    /// The same target with its target and data turned by `target` and `data`.
    pub fn map<T2, D2>(
        self,
        target: impl FnOnce(T) -> T2,
        data: impl FnOnce(D) -> D2,
    ) -> Kept<T2, D2> {
        Kept {
            target: target(self.target),
            data: self.data.map(|(d, at)| (data(d), at)),
            last_ok: self.last_ok,
            last_attempt: self.last_attempt,
            last_success: self.last_success,
            last_failure: self.last_failure,
            last_error: self.last_error,
        }
    }
}

/// Longest failure detail kept, in bytes: a longer one is cut on a character boundary.
pub const MAX_DETAIL_BYTES: usize = 512;

/// A failure as kept: its reason by its label value (`server_error`, the `reason` label of the
/// series), and its detail (the trail of the poll stays with the process). Plain text: which
/// reasons there are is the client's to say (`UpstreamError::from_kept`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptError {
    pub reason: String,
    pub detail: String,
}

impl KeptError {
    /// A failure to keep, its detail cut at [`MAX_DETAIL_BYTES`].
    pub fn new(reason: &str, detail: &str) -> Self {
        KeptError {
            reason: reason.to_owned(),
            detail: cut(detail).to_owned(),
        }
    }

    /// The detail as read back, cut at [`MAX_DETAIL_BYTES`] as when written: the file may have
    /// been written by another hand.
    pub fn detail(&self) -> &str {
        cut(&self.detail)
    }
}

/// `detail` cut at [`MAX_DETAIL_BYTES`] on a character boundary.
fn cut(detail: &str) -> &str {
    if detail.len() <= MAX_DETAIL_BYTES {
        return detail;
    }
    let mut end = MAX_DETAIL_BYTES;
    while !detail.is_char_boundary(end) {
        end -= 1;
    }
    &detail[..end]
}

/// The form of [`settings_key`]: raised when the form changes, so that targets kept under
/// another form are dropped as made under other settings, never misread.
pub const SETTINGS_KEY_VERSION: u32 = 1;

/// The fields of a collector's settings that change how it reads the provider (another
/// `top_domains`, time zone or `identity_labels`), each by a name of its own and its value:
/// what [`settings_key`] is written from. A field added to a collector's settings is added here,
/// or its kept targets would be served under either value.
pub trait KeyFields {
    fn key_fields(&self) -> Vec<(&'static str, String)>;
}

/// A collector with no settings.
impl KeyFields for () {
    fn key_fields(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
}

/// What a collector's settings are, as the storage directory keeps its targets under them: a
/// collector takes back what it stored only under the same key. Written from the fields by
/// name, `v1;limit="10";timezone="UTC"`, each value a JSON string: the same settings give the
/// same key in every process and every version that keeps the form (whatever their `Debug`
/// prints); a changed form raises [`SETTINGS_KEY_VERSION`].
pub fn settings_key(settings: &dyn KeyFields) -> String {
    let mut key = format!("v{SETTINGS_KEY_VERSION}");
    for (name, value) in settings.key_fields() {
        key.push(';');
        key.push_str(name);
        key.push('=');
        key.push_str(&serde_json::Value::String(value).to_string());
    }
    key
}

/// The settings digest format 1 of `targets.json` kept for a collector with no settings (FNV-1a
/// of their `Debug` text, `()`): such a collector's targets are taken back from that format
/// ([`older`]); a digest of other settings cannot be checked and is dropped.
const NO_SETTINGS_DIGEST_V1: &str = "07e11f07b4a6665a";

/// A targets file of an older format, in today's: format 1 had today's shape, with each
/// collector's settings as a digest of their `Debug` text. A collector without settings had
/// one digest, and is taken back under today's key for no settings; another's digest cannot be
/// checked against today's settings, and its settings are left empty for the reader to drop.
pub fn older(file: &Older) -> Result<TargetsIn, Bad> {
    if file.version != 1 {
        return Err(file.refuse());
    }
    let mut targets: TargetsIn = file.decode()?;
    for c in &mut targets.collectors {
        c.settings = if c.settings == NO_SETTINGS_DIGEST_V1 {
            settings_key(&())
        } else {
            String::new()
        };
    }
    Ok(targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_settings_key_is_written_from_the_fields_by_name_with_its_version() {
        struct Two;
        impl KeyFields for Two {
            fn key_fields(&self) -> Vec<(&'static str, String)> {
                vec![("limit", "10".to_owned()), ("zone", "a\"b;c=d".to_owned())]
            }
        }
        assert_eq!(settings_key(&()), "v1");
        assert_eq!(settings_key(&Two), r#"v1;limit="10";zone="a\"b;c=d""#);
    }

    #[test]
    fn the_format_1_digest_of_no_settings_is_fnv_1a_of_their_debug_text() {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in format!("{:?}", ()).bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        assert_eq!(format!("{hash:016x}"), NO_SETTINGS_DIGEST_V1);
    }
}
