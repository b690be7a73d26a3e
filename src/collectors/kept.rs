//! What the storage directory keeps of one target between two processes (`--storage.path`):
//! the target, its last good data and when it was fetched, and the last attempt's outcome and
//! failure reason. Written from the snapshot by [`crate::engine::checkpoint`], read back for each
//! collector by [`super::CollectorName::read_kept`], which knows the collector's own types.
//!
//! Nothing here is a secret: the data is what `/metrics` shows (a team member's name and
//! address only when `identity_labels` shows them, as the collector reads them), and a failure's
//! detail is what the log line says, with URLs already redacted.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::upstream::error::{FailureReason, UpstreamError};

/// Longest failure detail kept, in bytes: a longer one is cut on a character boundary.
pub const MAX_DETAIL_BYTES: usize = 512;

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
/// ([`crate::engine::checkpoint`]); a digest of other settings cannot be checked and is dropped.
pub const NO_SETTINGS_DIGEST_V1: &str = "07e11f07b4a6665a";

/// A failure as kept: its reason and detail (the trail of the poll stays with the process).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptError {
    pub reason: FailureReason,
    pub detail: String,
}

impl KeptError {
    pub fn of(e: &UpstreamError) -> Self {
        KeptError {
            reason: e.reason,
            detail: cut(&e.detail).to_owned(),
        }
    }

    /// The failure as the snapshot holds it: with no trail, not deferred, and of the target's
    /// own when the reason says so (a kept `rate_limited` waits as the token's, as a deferred
    /// target does, until its next attempt).
    pub fn into_error(self) -> UpstreamError {
        UpstreamError::new(self.reason, cut(&self.detail).to_owned())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_keeps_its_reason_and_a_bounded_detail() {
        let long = "é".repeat(MAX_DETAIL_BYTES);
        let kept = KeptError::of(&UpstreamError::new(FailureReason::ServerError, long));
        assert!(kept.detail.len() <= MAX_DETAIL_BYTES);
        assert!(kept.detail.chars().all(|c| c == 'é'));
        let back = kept.into_error();
        assert_eq!(back.reason, FailureReason::ServerError);
        assert!(back.trail.is_none() && !back.deferred && !back.own);
    }

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

    #[test]
    fn every_reason_is_kept_by_its_label_value() {
        for reason in FailureReason::ALL {
            let json = serde_json::to_string(&reason).unwrap();
            assert_eq!(json, format!("\"{}\"", reason.as_str()));
            assert_eq!(
                serde_json::from_str::<FailureReason>(&json).unwrap(),
                reason
            );
        }
    }
}
