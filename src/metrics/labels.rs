//! The label sets every collector shares and those of the exporter's own series, as typed structs,
//! and every bounded label value. A collector's own label sets are in its `series.rs`; the table
//! below gives every label and its bound, so that cardinality can be reviewed at a glance.
//!
//! | label        | values                                                  |
//! |--------------|---------------------------------------------------------|
//! | `tenant`     | configured tenant names ([`TenantLabel`]); none for a single-token config |
//! | `collector`  | [`crate::collectors::CollectorName`]                          |
//! | `target`     | one per configured target (account id, ...)             |
//! | `endpoint`   | [`Endpoint`]: a route name, never a raw path            |
//! | `reason`     | [`FailureReason`]: a fixed vocabulary, never error text |
//! | `code`       | [`Code`]: HTTP status code of an upstream answer, or `none` |
//! | `le`         | the fixed buckets of the request latency histogram      |
//! | `account_id` | configured Delivery account ids; top-list account ids, at most `limit` |
//! | `account`, `domain` | configured dashboard views (`collectors::tracemail_dashboard::series::ViewLabels`) |
//! | `domain`     | per account, at most `top_domains` sending domains      |
//! | `status`, `group`, `state`, `archive_status` | names from the API, sanitised by [`crate::upstream::model::names::sanitize`], at most [`crate::upstream::model::names::MAX_NAMES`] per record |
//! | `migration`, `mailbox` | configured codes                              |
//! | `key`        | dotted paths inside a migration `aggregate`, at most 64 |
//! | info labels  | strings from the API, escaped and cut at [`MAX_LABEL_VALUE_LEN`] characters |
//! | build labels | constants of this build                                 |
//!
//! Every string value goes through [`Value`], which bounds it; the vocabularies are enums.

use std::fmt::Write as _;

use prometheus_client::encoding::{
    EncodeLabelKey, EncodeLabelSet, EncodeLabelValue, LabelSetEncoder, LabelValueEncoder,
};

use crate::tenant::TenantName;
use crate::upstream::endpoint::Endpoint;
use crate::upstream::error::FailureReason;

/// Longest label value we expose; longer values from the API are cut (with `…`), so a
/// misbehaving upstream cannot blow up series size.
pub const MAX_LABEL_VALUE_LEN: usize = 128;

/// A label value from the configuration or the API. Escaped by the encoder; cut here at
/// [`MAX_LABEL_VALUE_LEN`] characters, and control characters other than a newline (which the
/// encoder escapes) shown as spaces: legal, but useless in a label.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Value(String);

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value(s)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value(s.to_owned())
    }
}

impl From<&String> for Value {
    fn from(s: &String) -> Self {
        Value(s.clone())
    }
}

impl From<&Option<String>> for Value {
    /// A missing string is an empty label value: the series keeps its label set.
    fn from(s: &Option<String>) -> Self {
        Value(s.clone().unwrap_or_default())
    }
}

impl EncodeLabelValue for Value {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        Borrowed(&self.0).encode(encoder)
    }
}

/// A label value borrowed from what is rendered (an id, a string of a record), bounded and
/// cleaned as [`Value`] is: a rendering of a large fleet writes each label from where it lives,
/// without a copy of it per series.
#[derive(Clone, Copy, Debug)]
pub struct Borrowed<'a>(pub &'a str);

impl<'a> From<&'a Option<String>> for Borrowed<'a> {
    /// A missing string is an empty label value: the series keeps its label set.
    fn from(s: &'a Option<String>) -> Self {
        Borrowed(s.as_deref().unwrap_or_default())
    }
}

impl EncodeLabelValue for Borrowed<'_> {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        let plain = self.0.char_indices().nth(MAX_LABEL_VALUE_LEN).is_none()
            && !self.0.chars().any(|c| c.is_control() && c != '\n');
        if plain {
            return encoder.write_str(self.0);
        }
        let mut bounded = String::with_capacity(MAX_LABEL_VALUE_LEN + 4);
        for (i, c) in self.0.chars().enumerate() {
            if i == MAX_LABEL_VALUE_LEN {
                bounded.push('…');
                break;
            }
            bounded.push(if c.is_control() && c != '\n' { ' ' } else { c });
        }
        encoder.write_str(&bounded)
    }
}

/// Writes one label `key="value"` of a label set written by hand (a set that borrows its
/// values), as the derived sets write each field.
pub fn write_label(
    encoder: &mut LabelSetEncoder,
    key: &str,
    value: &impl EncodeLabelValue,
) -> Result<(), std::fmt::Error> {
    let mut label = encoder.encode_label();
    let mut k = label.encode_label_key()?;
    EncodeLabelKey::encode(&key, &mut k)?;
    let mut v = k.encode_label_value()?;
    EncodeLabelValue::encode(value, &mut v)?;
    v.finish()
}

// The vocabularies are defined with the upstream client; their label spelling is `as_str`.

impl EncodeLabelValue for Endpoint {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.as_str())
    }
}

impl EncodeLabelValue for FailureReason {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.as_str())
    }
}

/// The HTTP status code of an upstream answer; `none` when there was no answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Code(pub Option<u16>);

impl EncodeLabelValue for Code {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        match self.0 {
            Some(code) => write!(encoder, "{code}"),
            None => encoder.write_str("none"),
        }
    }
}

/// The `tenant` label: the tenant's name, or no label at all for the one tenant of a
/// single-token config (whose series read as they did before tenants existed).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TenantLabel(pub TenantName);

impl EncodeLabelSet for TenantLabel {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        if self.0.is_default() {
            return Ok(());
        }
        // A configured name, already checked: written as it is.
        write_label(encoder, "tenant", &self.0.as_str())
    }
}

/// Whose series: the tenant, and the target's own label value (account id, code, ...).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Owner {
    pub tenant: TenantLabel,
    pub id: Value,
}

/// An owner's labels, borrowed: `tenant` (if any) and `key="id"` ([`AccountLabels`] without
/// copying them for each series).
#[derive(Clone, Copy, Debug)]
pub struct OwnerLabels<'a> {
    pub owner: &'a Owner,
    /// The name of the target's label (`account_id`, ...).
    pub key: &'static str,
}

impl EncodeLabelSet for OwnerLabels<'_> {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        self.owner.tenant.encode(encoder)?;
        write_label(encoder, self.key, &self.owner.id)
    }
}

// ---------------------------------------------------------------------------------------------
// Self-metrics.

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct EndpointLabels {
    pub endpoint: Endpoint,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct TenantEndpointLabels {
    #[prometheus(flatten)]
    pub tenant: TenantLabel,
    pub endpoint: Endpoint,
}

impl TenantEndpointLabels {
    pub fn new(tenant: &TenantName, endpoint: Endpoint) -> Self {
        let tenant = TenantLabel(tenant.clone());
        TenantEndpointLabels { tenant, endpoint }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RequestLabels {
    pub endpoint: Endpoint,
    pub code: Code,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct FailureLabels {
    #[prometheus(flatten)]
    pub tenant: TenantLabel,
    pub endpoint: Endpoint,
    pub reason: FailureReason,
}

impl FailureLabels {
    pub fn new(tenant: &TenantName, endpoint: Endpoint, reason: FailureReason) -> Self {
        let tenant = TenantLabel(tenant.clone());
        FailureLabels {
            tenant,
            endpoint,
            reason,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ProbeRefusedLabels {
    #[prometheus(flatten)]
    pub tenant: TenantLabel,
    /// `not_allowed` or `max_targets`.
    pub reason: &'static str,
}

/// Build facts for `mailhost_build_info` (and the landing page).
#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: &'static str,
    pub revision: &'static str,
    pub rustc_version: &'static str,
}

impl BuildLabels {
    /// This build's.
    pub fn current() -> Self {
        BuildLabels {
            version: env!("CARGO_PKG_VERSION"),
            revision: env!("MAILHOST_BUILD_REVISION"),
            rustc_version: env!("MAILHOST_RUSTC_VERSION"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Exporter health, from the snapshot.

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CollectorLabels {
    #[prometheus(flatten)]
    pub tenant: TenantLabel,
    /// [`crate::collectors::CollectorName::as_str`].
    pub collector: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct TargetLabels {
    #[prometheus(flatten)]
    pub tenant: TenantLabel,
    /// [`crate::collectors::CollectorName::as_str`].
    pub collector: &'static str,
    pub target: Value,
}

/// A failing target and why: at most one per target.
#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct TargetFailureLabels {
    #[prometheus(flatten)]
    pub tenant: TenantLabel,
    /// [`crate::collectors::CollectorName::as_str`].
    pub collector: &'static str,
    pub target: Value,
    pub reason: FailureReason,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct AccountLabels {
    #[prometheus(flatten)]
    pub tenant: TenantLabel,
    pub account_id: Value,
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode_registry;
    use prometheus_client::metrics::family::Family;
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::registry::Registry;

    use super::*;

    fn written<S>(labels: &[S]) -> String
    where
        S: EncodeLabelSet + Clone + std::hash::Hash + Eq + std::fmt::Debug + Send + Sync + 'static,
    {
        let family = Family::<S, Gauge>::default();
        for l in labels {
            family.get_or_create(l).set(1);
        }
        let mut registry = Registry::default();
        registry.register("x", "h", family);
        let mut out = String::new();
        encode_registry(&mut out, &registry).unwrap();
        out
    }

    #[test]
    fn label_values_are_escaped_and_bounded() {
        let exact = "é".repeat(MAX_LABEL_VALUE_LEN);
        for (value, want) in [
            ("a\"b\\c\nd\te".to_owned(), r#"a\"b\\c\nd e"#.to_owned()),
            (
                "y".repeat(500),
                format!("{}…", "y".repeat(MAX_LABEL_VALUE_LEN)),
            ),
            (exact.clone(), exact),
        ] {
            let out = written(&[AccountLabels {
                tenant: TenantLabel::default(),
                account_id: Value::from(value),
            }]);
            let series = format!("x{{account_id=\"{want}\"}} 1");
            assert_eq!(out.lines().last().unwrap(), series, "{out}");
        }
    }

    /// One series of `OwnerLabels`, written as the collectors write borrowed label sets.
    #[derive(Debug)]
    struct Borrowing(Owner);

    impl prometheus_client::collector::Collector for Borrowing {
        fn encode(
            &self,
            mut enc: prometheus_client::encoding::DescriptorEncoder,
        ) -> std::fmt::Result {
            let labels = OwnerLabels {
                owner: &self.0,
                key: "account_id",
            };
            crate::metrics::family::gauges(&mut enc, "x", "h", None, [(&labels, 1.0)])
        }
    }

    #[test]
    fn borrowed_labels_are_written_as_the_owned_ones() {
        let tenants = [
            TenantLabel::default(),
            TenantLabel(TenantName::parse("acme").unwrap()),
        ];
        let values = [
            "1004".to_owned(),
            "a\"b\\c\nd\te".to_owned(),
            "y".repeat(500),
            "é".repeat(MAX_LABEL_VALUE_LEN),
        ];
        for tenant in &tenants {
            for value in &values {
                let owned = written(&[AccountLabels {
                    tenant: tenant.clone(),
                    account_id: Value::from(value.as_str()),
                }]);
                let mut registry = Registry::default();
                registry.register_collector(Box::new(Borrowing(Owner {
                    tenant: tenant.clone(),
                    id: Value::from(value.as_str()),
                })));
                let mut borrowed = String::new();
                encode_registry(&mut borrowed, &registry).unwrap();
                let series = |out: &str| out.lines().last().unwrap().replace(".0", "");
                assert!(series(&owned).starts_with("x{"), "{owned}");
                assert_eq!(series(&borrowed), series(&owned), "{tenant:?} {value:?}");
            }
        }
        assert_eq!(
            Borrowed::from(&None).0,
            "",
            "a missing string is an empty value"
        );
    }

    #[test]
    fn vocabularies_are_written_as_their_label_names() {
        let out = written(&[FailureLabels {
            tenant: TenantLabel::default(),
            endpoint: Endpoint::new("tracemail_domains_rank"),
            reason: FailureReason::RateLimited,
        }]);
        assert!(out.contains("x{endpoint=\"tracemail_domains_rank\",reason=\"rate_limited\"} 1"));
        let out = written(&[RequestLabels {
            endpoint: Endpoint::new("email_account"),
            code: Code(None),
        }]);
        assert!(out.contains("x{endpoint=\"email_account\",code=\"none\"} 1"));
    }
}
