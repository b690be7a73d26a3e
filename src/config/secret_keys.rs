//! Which of the config file's fields can hold a secret: the value of any other that fails to
//! parse is shown in its error (redacted, cut and escaped by [`crate::redact`]), so that
//! `interval: 5x` is told as `"5x"`. A field of unknown secrecy is hidden.

/// Keys whose values are never secret, wherever they stand in the file: schedules, time zones and
/// date formats, sizes, bounds and rates, switches, target ids and codes, tenant names, and the
/// `probe:`, `discovery:` and `collectors:` blocks, which hold nothing else.
const SHOWN: &[&str] = &[
    // Schedules and collectors' settings.
    "enabled",
    "interval",
    "deadline",
    "max_age",
    "timezone",
    "date_format",
    "top_domains",
    "limit",
    "identity_labels",
    // Targets.
    "accounts",
    "migrations",
    "mailboxes",
    "domain",
    "mailbox",
    "views",
    "account",
    "team_members",
    // The API's pace and bounds.
    "timeout",
    "concurrency",
    "rate_limit",
    "endpoint_rate_limits",
    "max_response_bytes",
    "max_retries",
    "retry_backoff",
    "retry_max_backoff",
    "circuit_breaker_failures",
    "circuit_breaker_cooldown",
    // The way to the provider, but for addresses and files.
    "no_proxy",
    "proxy_from_environment",
    "server_name",
    "min_version",
    // Tenants, `/probe` and discovery.
    "name",
    "idle_intervals",
    "max_targets",
    "new_per_interval",
    "first_fetches",
    "allow",
    "deny",
    "domains",
    "max_accounts",
    "max_domains",
    // Blocks of the keys above only.
    "collectors",
    "delivery_account",
    "tracemail_dashboard",
    "tracemail_daily",
    "migration",
    "mailbox",
    "team_member",
    "probe",
    "discovery",
];

/// Keys whose values may hold a secret: a token file's path (a token gets pasted there), a
/// token's variable, addresses that may carry a user and password, the TLS files (a key may be
/// pasted in place of its path), and the blocks that hold them (a value in a block's place may be
/// any of its keys'). Every key not in [`SHOWN`] is hidden, listed here or not; a test holds
/// every key of the schema to be in exactly one of the two lists.
const HIDDEN: &[&str] = &[
    "token_file",
    "token_env",
    "base_url",
    "proxy_url",
    "ca_file",
    "cert_file",
    "key_file",
    "api",
    "tls_config",
    "tenants",
];

/// Maps keyed by the operator whose values are never secret: their entries are shown.
const SHOWN_MAPS: &[&str] = &["endpoint_rate_limits"];

/// Whether the value at `path` (`collectors.migration.interval`, `tenants[2].concurrency`,
/// `api.endpoint_rate_limits.migration_stats`), as serde_yaml_ng names a field, holds no secret.
pub(super) fn shown(path: &str) -> bool {
    let keys: Vec<&str> = path
        .split('.')
        .map(|segment| segment.split('[').next().unwrap_or(segment))
        .collect();
    match keys.as_slice() {
        [.., map, _] if SHOWN_MAPS.contains(map) => true,
        [.., key] => SHOWN.contains(key) && !HIDDEN.contains(key),
        [] => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::raw::RawConfig;
    use super::*;
    use crate::collectors::CollectorName;

    /// The keys serde lists for the block that `yaml` puts the unknown key `zz` in.
    fn keys_of(yaml: &str) -> Vec<String> {
        let e = serde_yaml_ng::from_str::<RawConfig>(yaml)
            .unwrap_err()
            .to_string();
        let listed = e
            .split_once("unknown field `zz`, expected ")
            .unwrap_or_else(|| panic!("{yaml}: {e}"))
            .1;
        listed
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn every_key_of_the_file_is_either_shown_or_hidden_and_none_is_both() {
        let mut blocks = vec![
            "zz: 1\n".to_owned(),
            "api: {zz: 1}\n".to_owned(),
            "api: {tls_config: {zz: 1}}\n".to_owned(),
            "collectors: {zz: 1}\n".to_owned(),
            "collectors: {mailbox: {mailboxes: [{zz: 1}]}}\n".to_owned(),
            "collectors: {tracemail_dashboard: {views: [{zz: 1}]}}\n".to_owned(),
            "probe: {zz: 1}\n".to_owned(),
            "discovery: {zz: 1}\n".to_owned(),
            "tenants: [{zz: 1}]\n".to_owned(),
            "tenants: [{tls_config: {zz: 1}}]\n".to_owned(),
            "tenants: [{collectors: {zz: 1}}]\n".to_owned(),
            "tenants: [{probe: {zz: 1}}]\n".to_owned(),
            "tenants: [{discovery: {zz: 1}}]\n".to_owned(),
        ];
        for name in CollectorName::ALL {
            blocks.push(format!("collectors: {{{name}: {{zz: 1}}}}\n"));
            blocks.push(format!(
                "tenants: [{{collectors: {{{name}: {{zz: 1}}}}}}]\n"
            ));
        }
        let mut seen = 0;
        for yaml in blocks {
            for key in keys_of(&yaml) {
                let (shown, hidden) = (SHOWN.contains(&&*key), HIDDEN.contains(&&*key));
                assert!(
                    shown != hidden,
                    "{key} (in {yaml}) must be in exactly one of SHOWN and HIDDEN"
                );
                seen += 1;
            }
        }
        assert!(seen > 100, "{seen}");
    }

    #[test]
    fn a_field_is_shown_by_its_key_and_an_entry_of_a_rate_map_by_the_map() {
        for path in [
            "collectors.migration.interval",
            "api.timeout",
            "tenants[3].concurrency",
            "tenants[0].collectors.delivery_account.accounts[2]",
            "collectors.mailbox.mailboxes[1].domain",
            "api.endpoint_rate_limits.migration_stats",
            "tenants[1].endpoint_rate_limits.anything",
            "probe.allow[0]",
        ] {
            assert!(shown(path), "{path}");
        }
        for path in [
            "",
            "api",
            "api.token_file",
            "tenants[0].token_env",
            "tenants[0]",
            "api.base_url",
            "tenants[2].proxy_url",
            "api.tls_config.key_file",
            "tenants[0].tls_config",
            "not_a_key",
            "?",
        ] {
            assert!(!shown(path), "{path}");
        }
    }
}
