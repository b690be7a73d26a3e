//! The config file, whole: read, parsed and validated into the [`Config`] the exporter runs with.
//! Above the collectors, since its `collectors:` blocks are theirs (the [`crate::collectors`]
//! list); the blocks no collector shapes and the field parsers are [`crate::settings`]'s. Every
//! message names the field and the fix.

mod raw;
mod secret_keys;
mod tenants;

use std::collections::BTreeMap;
use std::path::Path;

use secrecy::SecretString;

use crate::collectors::{Collector, CollectorName, RawCollectors};
use crate::files::read_bounded;
use crate::settings::validate::{api_settings, check_flow_depth, validate_api};
use crate::settings::{
    ApiConfig, ConfigError, DiscoveryConfig, EMPTY_CONFIG, Outside, ProbeConfig, TOKEN_ENV,
    TargetFailureLog, describe_yaml_error, invalid, limits,
};
use crate::tenant::TenantName;
use raw::RawConfig;

/// The enabled collectors of a config or a tenant, in the order of the list of collectors.
pub type CollectorsConfig = Vec<Collector>;

/// The validated configuration the exporter runs with.
#[derive(Debug, Clone)]
pub struct Config {
    /// The API settings every tenant starts from; with `tenants:`, its token is empty and unused.
    pub api: ApiConfig,
    /// Every enabled collector's settings; without `tenants:`, with the one tenant's targets.
    pub collectors: CollectorsConfig,
    /// At least one: a single-token config is one tenant with the empty name.
    pub tenants: Vec<TenantConfig>,
    /// A probed target leaves the poll set after this many of its collector's intervals
    /// without a probe.
    pub probe_idle_intervals: u32,
    /// This process's share of the fleet (`--shard`), not a key of the file; a reload keeps it.
    pub shard: crate::shard::Shard,
    /// How loud a target's failures are in the log (`--log.target-failures`), not a key of the
    /// file; a reload keeps it.
    pub target_failures: TargetFailureLog,
    /// The collector flags this config was read with; a reload reads the file with them again.
    pub collector_switches: CollectorSwitches,
}

/// One tenant: its token and API settings, its collectors with its own static targets, and what
/// `/probe` may add to them.
#[derive(Debug, Clone)]
pub struct TenantConfig {
    pub name: TenantName,
    pub api: ApiConfig,
    pub collectors: CollectorsConfig,
    pub probe: ProbeConfig,
    pub discovery: DiscoveryConfig,
}

/// `--collector.NAME` and `--no-collector.NAME`, as node_exporter spells them: collectors
/// switched on or off over the config's `enabled` (a collector switched on that the config
/// does not name runs with its defaults; one switched off is validated but never run, and
/// tenants' targets of it are ignored). Applied at start, by `--config.check` and on every
/// reload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CollectorSwitches {
    pub on: Vec<CollectorName>,
    pub off: Vec<CollectorName>,
}

impl CollectorSwitches {
    fn apply(&self, raw: &mut RawConfig) -> Result<(), ConfigError> {
        for (names, on) in [(&self.on, true), (&self.off, false)] {
            for name in names {
                raw.collectors.switch(*name, on)?;
                if !on {
                    for tenant in raw.tenants.iter_mut().flatten() {
                        tenant.collectors.forget(*name);
                    }
                }
            }
        }
        Ok(())
    }
}

impl Config {
    /// Upstream calls in flight the config asks for at most: `api.concurrency` summed over its
    /// tenants (what the descriptor plan is asked to make room for).
    pub fn asked_upstream(&self) -> usize {
        self.tenants
            .iter()
            .fold(0usize, |sum, t| sum.saturating_add(t.api.concurrency))
    }

    /// [`Config::load`] with [`TOKEN_ENV`] read from the environment now. This is the one place
    /// the exporter reads the token's variable: at start, for `--config.check` and on every
    /// reload (so a reload sees a rotated token); the token file is read by the validation.
    pub fn load_switched(path: &Path, switches: &CollectorSwitches) -> Result<Config, ConfigError> {
        Self::load_with(path, std::env::var(TOKEN_ENV).ok(), switches)
    }

    /// Reads, parses and validates a config file; the token comes from `api.token_file` or,
    /// when that is unset, from [`TOKEN_ENV`] as given by `env_token`.
    pub fn load(path: &Path, env_token: Option<String>) -> Result<Config, ConfigError> {
        Self::load_with(path, env_token, &CollectorSwitches::default())
    }

    fn load_with(
        path: &Path,
        env_token: Option<String>,
        switches: &CollectorSwitches,
    ) -> Result<Config, ConfigError> {
        let text = read_text(path)?;
        // The single token may be given by the caller; tenants' variables are read now.
        let env = |name: &str| {
            if name == TOKEN_ENV {
                env_token.clone()
            } else {
                std::env::var(name).ok()
            }
        };
        Self::parse_switched(&text, &env, switches)
    }

    /// Parses and validates YAML text; see [`Config::load`]. Only [`TOKEN_ENV`] is looked up,
    /// and reads as `env_token`.
    pub fn parse(text: &str, env_token: Option<String>) -> Result<Config, ConfigError> {
        Self::parse_with_env(text, &|name| {
            env_token.clone().filter(|_| name == TOKEN_ENV)
        })
    }

    /// Parses and validates YAML text, reading token variables (the single token's
    /// [`TOKEN_ENV`], each tenant's `token_env`) through `env`.
    pub fn parse_with_env(
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        Self::parse_switched(text, env, &CollectorSwitches::default())
    }

    /// [`Config::parse_with_env`] with collectors switched on or off by flags.
    pub fn parse_switched(
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
        switches: &CollectorSwitches,
    ) -> Result<Config, ConfigError> {
        Self::parse_outside(text, switches, &Outside::read(env))
    }

    /// `--config.check --config.syntax-only`: reads and validates the file at `path` as
    /// [`Config::load_switched`] does, but reads nothing it names outside itself (token files,
    /// token variables, TLS files); [`SyntaxChecked::unread`] names the fields left.
    pub fn check_syntax(
        path: &Path,
        switches: &CollectorSwitches,
    ) -> Result<SyntaxChecked, ConfigError> {
        Self::parse_syntax_only(&read_text(path)?, switches)
    }

    /// [`Config::check_syntax`] of YAML text.
    pub fn parse_syntax_only(
        text: &str,
        switches: &CollectorSwitches,
    ) -> Result<SyntaxChecked, ConfigError> {
        let outside = Outside::syntax_only();
        // The config is only looked at: its tokens are empty and its TLS files unread.
        let config = Self::parse_outside(text, switches, &outside)?;
        Ok(SyntaxChecked {
            asked_upstream: config.asked_upstream(),
            unread: outside.into_unread(),
        })
    }

    /// Parses and validates YAML text, reading what it names outside itself as `outside` says.
    fn parse_outside(
        text: &str,
        switches: &CollectorSwitches,
        outside: &Outside,
    ) -> Result<Config, ConfigError> {
        // The YAML parser's own word for this ("EOF while parsing") does not help a new user.
        let blank = text
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'));
        if blank {
            return Err(ConfigError::Syntax(EMPTY_CONFIG.to_owned()));
        }
        // The YAML scanner takes time quadratic in the depth of `[`/`{` nesting: refuse a deep
        // file before it sees it.
        check_flow_depth(text)?;
        let mut raw: RawConfig = serde_yaml_ng::from_str(text).map_err(|e| {
            ConfigError::Syntax(describe_yaml_error(
                &e,
                "examples/config.yml",
                secret_keys::shown,
            ))
        })?;
        switches.apply(&mut raw)?;
        let tenant_mode = raw.tenants.is_some();
        let api = if tenant_mode {
            if raw.api.token_file.is_some() {
                return Err(invalid(
                    "api.token_file",
                    "with tenants:, each tenant names its own token (token_file or token_env); remove api.token_file",
                ));
            }
            api_settings(raw.api, SecretString::from(String::new()), outside)?
        } else {
            validate_api(raw.api, outside)?
        };
        let collectors = collectors(raw.collectors, !tenant_mode)?;
        let (probe_idle_intervals, probe) = crate::settings::probe::probe(raw.probe)?;
        let discovery = crate::settings::discovery::discovery(
            "discovery",
            raw.discovery,
            &DiscoveryConfig::default(),
        )?;
        let tenants = match raw.tenants {
            Some(list) => tenants::tenants(list, &api, &collectors, (&probe, &discovery), outside)?,
            None => vec![TenantConfig {
                name: TenantName::default(),
                api: api.clone(),
                collectors: collectors.clone(),
                probe,
                discovery,
            }],
        };
        known_endpoints("api.endpoint_rate_limits", &api.endpoint_rate_limits)?;
        for (i, t) in tenants.iter().enumerate() {
            if t.api.endpoint_rate_limits != api.endpoint_rate_limits {
                known_endpoints(
                    &format!("tenants[{i}].endpoint_rate_limits"),
                    &t.api.endpoint_rate_limits,
                )?;
            }
        }
        Ok(Config {
            api,
            collectors,
            tenants,
            probe_idle_intervals,
            shard: crate::shard::Shard::default(),
            target_failures: TargetFailureLog::default(),
            collector_switches: switches.clone(),
        })
    }
}

/// What `--config.check --config.syntax-only` found: the file is valid as written; what it names
/// outside itself was left unread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxChecked {
    /// Upstream calls in flight the config asks for at most ([`Config::asked_upstream`]).
    pub asked_upstream: usize,
    /// The fields whose files or variables were not read, in the order met: `api.token_file`,
    /// `MAILHOST_API_TOKEN` (the single token without a file), `tenants[N].token_file`,
    /// `tenants[N].token_env`, `....tls_config.ca_file`, `cert_file`, `key_file`.
    pub unread: Vec<String>,
}

/// Fields [`SyntaxChecked::unread_line`] names at most; a fleet of tenants is counted past them.
const UNREAD_NAMED: usize = 8;

impl SyntaxChecked {
    /// The one line that says what was not checked, naming the fields (at most
    /// [`UNREAD_NAMED`], then how many more), or `None` when the file names nothing outside
    /// itself. The fields come from the schema and indices, never from a value.
    pub fn unread_line(&self) -> Option<String> {
        let (named, rest) = self.unread.split_at(self.unread.len().min(UNREAD_NAMED));
        if named.is_empty() {
            return None;
        }
        let more = match rest.len() {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        Some(format!(
            "not checked (--config.syntax-only): {}{more}; what they name is read at start and on every reload",
            named.join(", ")
        ))
    }
}

/// The text of the config file at `path`, bounded and UTF-8.
fn read_text(path: &Path) -> Result<String, ConfigError> {
    let read = |source| ConfigError::Read {
        path: path.to_owned(),
        source,
    };
    let bytes = read_bounded(path, limits::CONFIG_FILE_BYTES).map_err(read)?;
    let Some(bytes) = bytes else {
        return Err(ConfigError::TooLarge {
            path: path.to_owned(),
        });
    };
    String::from_utf8(bytes).map_err(|_| {
        read(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "it is not UTF-8 text",
        ))
    })
}

/// Refuses an `endpoint_rate_limits` key that names no endpoint the exporter calls.
fn known_endpoints(at: &str, limits: &BTreeMap<String, f64>) -> Result<(), ConfigError> {
    let known: Vec<&str> = CollectorName::every_endpoint()
        .iter()
        .map(|e| e.as_str())
        .collect();
    for name in limits.keys() {
        if !known.contains(&name.as_str()) {
            return Err(invalid(
                format!("{at}.{}", crate::redact::map_key(name)),
                format!(
                    "no such endpoint: name one of {} (the values of the endpoint label)",
                    known.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// The `collectors` block: each enabled collector's schedule, settings and targets. With
/// `tenants:` (`lists` false) the targets are each tenant's, so lists here are refused.
fn collectors(c: RawCollectors, lists: bool) -> Result<Vec<Collector>, ConfigError> {
    if !lists && let Some(list) = c.first_list() {
        return Err(invalid(
            format!("collectors.{list}"),
            format!(
                "with tenants:, targets belong to a tenant: move the list to tenants[].collectors.{list}"
            ),
        ));
    }
    let collectors = c.validate(lists)?;
    if collectors.is_empty() {
        return Err(invalid(
            "collectors",
            "no collector is enabled: configure at least one, e.g. collectors.delivery_account.accounts",
        ));
    }
    Ok(collectors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::defaults;
    use secrecy::ExposeSecret;
    use std::time::Duration;

    const GOOD: &str = "api:\n  base_url: https://api.example.net/\ncollectors:\n  delivery_account:\n    interval: 30s\n    accounts: [1001, 1002]\n";

    /// The message `text` is refused with, the single token read as `token`.
    fn refused(text: &str, token: Option<&str>) -> String {
        Config::parse(text, token.map(str::to_owned))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_minimal_config_gets_the_named_defaults() {
        let c = Config::parse(GOOD, Some("tok".into())).unwrap();
        assert_eq!(c.api.base_url, "https://api.example.net");
        assert_eq!(c.api.timeout, defaults::TIMEOUT);
        assert_eq!(c.api.concurrency, defaults::CONCURRENCY);
        assert_eq!(c.api.token.expose_secret(), "tok");
        let d = &c.collectors[0];
        assert_eq!(
            d.targets(),
            [1001, 1002].map(crate::collectors::Target::DeliveryAccount)
        );
        assert_eq!(d.schedule().interval, Duration::from_secs(30));
        assert_eq!(d.schedule().deadline, Duration::from_secs(24));
        assert_eq!(d.schedule().max_age, Duration::from_secs(90));
    }

    #[test]
    fn a_deadline_as_long_as_the_interval_is_refused() {
        let text = GOOD.replace("interval: 30s", "interval: 30s\n    deadline: 30s");
        let e = refused(&text, Some("t"));
        assert_eq!(
            e,
            "collectors.delivery_account.deadline: 30s must be shorter than the interval (30s); a run may not overlap the next"
        );
    }

    #[test]
    fn a_non_http_base_url_or_no_enabled_collector_is_refused() {
        for (from, to, want) in [
            (
                "https://api.example.net/",
                "ftp://x",
                "api.base_url: \"ftp://x\" is not an http(s) address",
            ),
            // A disabled collector counts as absent.
            (
                "interval: 30s",
                "enabled: false",
                "collectors: no collector is enabled",
            ),
        ] {
            let e = refused(&GOOD.replace(from, to), Some("t"));
            assert!(e.starts_with(want), "{e}");
        }
    }

    #[test]
    fn a_bad_token_is_named_by_where_it_came_from_and_never_shown() {
        let yaml = "api:\n  base_url: https://api.example.net\ncollectors:\n  delivery_account:\n    accounts: [1]\n";
        let e = refused(yaml, Some("two words"));
        assert!(
            e.starts_with("MAILHOST_API_TOKEN: the token contains spaces"),
            "{e}"
        );
        assert!(!e.contains("two words"));
        let token_file = |path: &std::path::Path| {
            let line = format!("api.example.net\n  token_file: {}\n", path.display());
            yaml.replace("api.example.net\n", &line)
        };
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "T".repeat(1500)).unwrap();
        let e = refused(&token_file(&file), None);
        assert!(
            e.starts_with("api.token_file: the token is longer than 1024 characters"),
            "{e}"
        );
        assert!(!e.contains("TTTTTTTTTT"));
        // A directory named as the token file: refused, saying what it is.
        let e = refused(&token_file(dir.path()), None);
        assert!(
            e.contains("api.token_file") && e.contains("not a regular file"),
            "{e}"
        );
    }

    #[test]
    fn no_duration_reaches_a_panic_whatever_its_size() {
        let durations = [
            "0s",
            "1ns",
            "1ms",
            "999ms",
            "1s",
            "24h",
            "25h",
            "7days",
            "8days",
            "10000000000s",
            "18446744073709551615s",
            "584942417355y",
        ];
        let api_keys = [
            "timeout",
            "retry_backoff",
            "retry_max_backoff",
            "circuit_breaker_cooldown",
        ];
        for d in durations {
            for key in api_keys {
                let text = GOOD.replace(
                    "https://api.example.net/\n",
                    &format!("https://api.example.net/\n  {key}: {d}\n"),
                );
                let _ = Config::parse(&text, Some("t".into()));
            }
            for key in ["interval", "deadline", "max_age"] {
                let text = GOOD.replace("interval: 30s", &format!("{key}: {d}"));
                let _ = Config::parse(&text, Some("t".into()));
                let both = GOOD.replace("interval: 30s", &format!("interval: 24h\n    {key}: {d}"));
                if let Ok(c) = Config::parse(&both, Some("t".into())) {
                    let s = c.collectors[0].schedule();
                    assert!(s.deadline < s.interval && s.max_age <= limits::MAX_AGE);
                }
            }
        }
    }

    #[test]
    fn deep_flow_nesting_is_refused_before_the_yaml_scanner_sees_it() {
        // A megabyte of `[`: the scanner alone would take hours over it.
        let n = 500_000;
        let text = format!(
            "api:\n  base_url: https://api.example.net\ncollectors:\n  delivery_account:\n    accounts: {}{}\n",
            "[".repeat(n),
            "]".repeat(n)
        );
        let e = refused(&text, Some("t"));
        assert_eq!(
            e,
            "[ ] and { } are nested more than 64 deep at line 5 column 79; the config needs at most 4"
        );
    }

    #[test]
    fn brackets_in_quoted_values_and_comments_do_not_count_as_nesting() {
        let deep = "[".repeat(100);
        let text = format!(
            "# {deep}\napi:\n  base_url: https://api.example.net # {deep}\ncollectors:\n  tracemail_dashboard:\n    timezone: \"{deep}\\\"{deep}\"\n"
        );
        let e = refused(&text, Some("t"));
        assert!(e.contains("is not a known time zone"), "{e}");
        let text = format!(
            "api: {{base_url: 'https://api.example.net/''{deep}'}}\ncollectors: {{delivery_account: {{accounts: [1]}}}}\n"
        );
        if let Err(e) = Config::parse(&text, Some("t".into())) {
            panic!("{e}");
        }
        // A quote inside a plain value opens nothing, so brackets after it still count.
        let text = format!("api:\n  base_url: it's\ncollectors: {deep}\n");
        let e = refused(&text, Some("t"));
        assert!(e.contains("nested more than 64 deep"), "{e}");
    }

    fn switched(text: &str, on: &[CollectorName], off: &[CollectorName]) -> Result<Config, String> {
        let env = |name: &str| (name == TOKEN_ENV || name == "ACME").then(|| "tok".to_owned());
        let switches = CollectorSwitches {
            on: on.to_vec(),
            off: off.to_vec(),
        };
        Config::parse_switched(text, &env, &switches).map_err(|e| e.to_string())
    }

    fn names(c: &[Collector]) -> Vec<CollectorName> {
        c.iter().map(|c| c.name()).collect()
    }

    #[test]
    fn collector_flags_switch_collectors_over_the_config() {
        use CollectorName::{DeliveryAccount, TracemailDaily, TracemailDashboard};
        let text = "api:\n  base_url: https://api.example.net/\ncollectors:\n  delivery_account:\n    accounts: [1001]\n  tracemail_daily:\n    enabled: false\n    accounts: [1001]\n";
        // As written: the daily statistics are off.
        let c = switched(text, &[], &[]).unwrap();
        assert_eq!(names(&c.collectors), [DeliveryAccount]);
        // --collector.tracemail_daily turns them on with the block's settings.
        let c = switched(text, &[TracemailDaily], &[]).unwrap();
        assert_eq!(names(&c.collectors), [DeliveryAccount, TracemailDaily]);
        assert_eq!(c.collector_switches.on, [TracemailDaily]);
        // --collector.tracemail_dashboard runs a collector the file does not name, with its
        // defaults.
        let c = switched(text, &[TracemailDashboard], &[]).unwrap();
        assert!(names(&c.collectors).contains(&TracemailDashboard));
        // --no-collector.delivery_account leaves nothing to run: refused, as a file would be.
        let e = switched(text, &[], &[DeliveryAccount]).unwrap_err();
        assert!(e.contains("no collector is enabled"), "{e}");
        let c = switched(text, &[TracemailDaily], &[DeliveryAccount]).unwrap();
        assert_eq!(names(&c.collectors), [TracemailDaily]);
        // A collector switched on without the targets it needs names its list.
        let e = switched(
            "api:\n  base_url: https://api.example.net/\ncollectors:\n  delivery_account:\n    accounts: [1]\n",
            &[CollectorName::Migration],
            &[],
        )
        .unwrap_err();
        assert!(e.starts_with("collectors.migration"), "{e}");
    }

    #[test]
    fn a_collector_switched_off_ignores_the_tenants_lists_of_it() {
        let text = "api:\n  base_url: https://api.example.net/\ncollectors:\n  delivery_account: {}\n  migration: {}\ntenants:\n  - name: acme\n    token_env: ACME\n    collectors:\n      delivery_account:\n        accounts: [1]\n      migration:\n        migrations: [MG00000001]\n";
        let c = switched(text, &[], &[CollectorName::Migration]).unwrap();
        assert_eq!(
            names(&c.tenants[0].collectors),
            [CollectorName::DeliveryAccount]
        );
    }

    /// `--config.syntax-only` of `text`.
    fn syntax_only(text: &str) -> Result<SyntaxChecked, String> {
        Config::parse_syntax_only(text, &CollectorSwitches::default()).map_err(|e| e.to_string())
    }

    #[test]
    fn syntax_only_leaves_the_token_and_tls_files_unread_and_names_their_fields() {
        let text = "api:\n  base_url: https://api.example.net\n  token_file: /nonexistent/token\n  concurrency: 3\n  tls_config:\n    ca_file: /nonexistent/ca.crt\n    cert_file: /nonexistent/client.crt\n    key_file: /nonexistent/client.key\ncollectors:\n  delivery_account:\n    accounts: [1]\n";
        let checked = syntax_only(text).unwrap();
        assert_eq!(
            checked.unread,
            [
                "api.token_file",
                "api.tls_config.ca_file",
                "api.tls_config.cert_file",
                "api.tls_config.key_file"
            ]
        );
        assert_eq!(checked.asked_upstream, 3);
        assert_eq!(
            checked.unread_line().unwrap(),
            "not checked (--config.syntax-only): api.token_file, api.tls_config.ca_file, api.tls_config.cert_file, api.tls_config.key_file; what they name is read at start and on every reload"
        );
        // The full check reads them, and refuses the missing token file first.
        let e = refused(text, None);
        assert!(
            e.starts_with("api.token_file: cannot read the file it names (no such file)"),
            "{e}"
        );
        // A single token without a file comes from the variable, which is not read either.
        let checked = syntax_only(GOOD).unwrap();
        assert_eq!(checked.unread, ["MAILHOST_API_TOKEN"]);
    }

    #[test]
    fn syntax_only_leaves_the_tenants_tokens_unread_but_checks_how_they_are_named() {
        let base = "api:\n  base_url: https://api.example.net\ncollectors:\n  delivery_account: {}\ntenants:\n";
        let text = format!(
            "{base}  - name: a\n    token_env: UNSET_IN_THIS_TEST\n  - name: b\n    token_file: /nonexistent/token\n    tls_config:\n      ca_file: /nonexistent/ca.crt\n"
        );
        let checked = syntax_only(&text).unwrap();
        assert_eq!(
            checked.unread,
            [
                "tenants[0].token_env",
                "tenants[1].token_file",
                "tenants[1].tls_config.ca_file"
            ]
        );
        for (tenant, want) in [
            (
                "  - name: a\n    token_env: 9X\n",
                "tenants[0].token_env: is not a variable name",
            ),
            (
                "  - name: a\n    token_env: A\n    token_file: /x\n",
                "tenants[0]: give one of token_file and token_env, not both",
            ),
            ("  - name: a\n", "tenants[0]: has no token"),
            (
                "  - name: a\n    token_env: A\n    tls_config:\n      cert_file: /x\n",
                "tenants[0].tls_config: give cert_file and key_file together",
            ),
        ] {
            let e = syntax_only(&format!("{base}{tenant}")).unwrap_err();
            assert!(e.starts_with(want), "{tenant}: {e}");
        }
        // A fleet is named in one short line.
        let fleet: String = (0..20)
            .map(|i| format!("  - name: t{i}\n    token_file: /nonexistent/t{i}\n"))
            .collect();
        let line = syntax_only(&format!("{base}{fleet}"))
            .unwrap()
            .unread_line()
            .unwrap();
        assert!(
            line.contains("tenants[7].token_file and 12 more;") && !line.contains("tenants[8]"),
            "{line}"
        );
    }

    #[test]
    fn syntax_only_refuses_what_is_wrong_in_the_file_as_the_full_check_does() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token").display().to_string();
        std::fs::write(&token, "tok").unwrap();
        let with_token = GOOD.replace(
            "api.example.net/\n",
            "api.example.net/\n  token_file: /nonexistent/token\n",
        );
        for (from, to) in [
            ("interval: 30s", "interval: 5x"),
            ("interval: 30s", "intervl: 30s"),
            ("interval: 30s", "interval: 30s\n    deadline: 30s"),
            ("interval: 30s", "interval: 2days"),
            ("[1001, 1002]", "[1001, 0]"),
            ("[1001, 1002]", "[1001, 1001]"),
            ("https://api.example.net/", "ftp://x"),
            (
                "token_file: /nonexistent/token",
                "token_file: /nonexistent/token\n  concurrency: 1000",
            ),
            (
                "token_file: /nonexistent/token",
                "token_file: /nonexistent/token\n  proxy_url: http://p.example.net:3128\n  no_proxy: x\n  proxy_from_environment: true",
            ),
            (
                "token_file: /nonexistent/token",
                "token_file: /nonexistent/token\n  tls_config:\n    key_file: /nonexistent/k\n    min_version: TLS10",
            ),
            (
                "token_file: /nonexistent/token",
                "token_file: /nonexistent/token\n  endpoint_rate_limits: {daily: 1}",
            ),
        ] {
            let text = with_token.replace(from, to);
            let syntax = syntax_only(&text).unwrap_err();
            // The full check, with a token file that is there.
            let full = refused(&text.replace("/nonexistent/token", &token), None);
            assert_eq!(syntax, full, "{to}");
        }
    }
}
