//! The `tenants:` list: each tenant's name, token, API settings, static targets and its own
//! `probe:` and `discovery:` blocks (read in `crate::settings::probe` and
//! `crate::settings::discovery`), checked against the `collectors` block whose settings they
//! share.

use std::collections::HashSet;

use secrecy::SecretString;

use super::raw::RawTenant;
use super::{CollectorsConfig, TenantConfig};
use crate::redact::quote;
use crate::settings::discovery::discovery;
use crate::settings::probe::tenant_probe;
use crate::settings::validate::{base_url, concurrency, endpoint_rate_limits, rate_limit, token};
use crate::settings::{ApiConfig, ConfigError, DiscoveryConfig, Outside, ProbeConfig, invalid};
use crate::tenant::{MAX_TENANTS, TenantName};

/// Longest name of a token variable.
const MAX_ENV_NAME_CHARS: usize = 128;

/// Every tenant, validated: its collectors are those of `collectors` with its own lists.
pub(super) fn tenants(
    list: Vec<RawTenant>,
    api: &ApiConfig,
    collectors: &CollectorsConfig,
    defaults: (&ProbeConfig, &DiscoveryConfig),
    outside: &Outside,
) -> Result<Vec<TenantConfig>, ConfigError> {
    if list.is_empty() {
        return Err(invalid(
            "tenants",
            "is empty; list at least one tenant with a name and a token_file or token_env, or remove tenants: and use api.token_file",
        ));
    }
    if list.len() > MAX_TENANTS {
        return Err(invalid(
            "tenants",
            format!(
                "lists {} tenants; at most {MAX_TENANTS} are supported by one exporter (split them over several)",
                list.len()
            ),
        ));
    }
    let mut seen = HashSet::with_capacity(list.len());
    let mut out = Vec::with_capacity(list.len());
    let mut distinct: Vec<crate::settings::http_client::HttpClientSettings> = Vec::new();
    for (i, raw) in list.into_iter().enumerate() {
        let at = format!("tenants[{i}]");
        let name = TenantName::parse(&raw.name)
            .map_err(|why| invalid(format!("{at}.name"), format!("{}: {why}", quote(&raw.name))))?;
        if !seen.insert(name.clone()) {
            return Err(invalid(
                format!("{at}.name"),
                format!("{name} is listed twice; each tenant needs its own name"),
            ));
        }
        let t = tenant(&at, name, raw, api, collectors, defaults, outside)?;
        // Each distinct proxy and TLS setting is a connection pool of its own.
        if !t.api.http.is_default() && !distinct.contains(&t.api.http) {
            if distinct.len() == crate::settings::http_client::MAX_DISTINCT {
                return Err(invalid(
                    format!("{at}.tls_config"),
                    format!(
                        "is the {}th distinct proxy and TLS setting; at most {} are supported (each is a connection pool): let tenants share them",
                        distinct.len() + 1,
                        crate::settings::http_client::MAX_DISTINCT
                    ),
                ));
            }
            distinct.push(t.api.http.clone());
        }
        out.push(t);
    }
    Ok(out)
}

fn tenant(
    at: &str,
    name: TenantName,
    mut raw: RawTenant,
    api: &ApiConfig,
    collectors: &CollectorsConfig,
    (probe, discovery_defaults): (&ProbeConfig, &DiscoveryConfig),
    outside: &Outside,
) -> Result<TenantConfig, ConfigError> {
    let token = tenant_token(at, &raw, outside)?;
    let tenant_api = tenant_api(at, &mut raw, api, token, outside)?;
    let mut own = collectors.clone();
    raw.collectors.apply(&mut own, at)?;
    let probe = match raw.probe {
        Some(p) => tenant_probe(&format!("{at}.probe"), p, probe)?,
        None => probe.clone(),
    };
    let discovery = discovery(
        &format!("{at}.discovery"),
        raw.discovery,
        discovery_defaults,
    )?;
    Ok(TenantConfig {
        name,
        api: tenant_api,
        collectors: own,
        probe,
        discovery,
    })
}

/// A tenant's token, from its `token_file` or the variable its `token_env` names (one of the
/// two, not both).
fn tenant_token(at: &str, raw: &RawTenant, outside: &Outside) -> Result<SecretString, ConfigError> {
    let var = match (&raw.token_file, &raw.token_env) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                at,
                "give one of token_file and token_env, not both",
            ));
        }
        (None, None) => {
            return Err(invalid(
                at,
                "has no token: set token_file to a file holding the tenant's token, or token_env to the name of a variable holding it",
            ));
        }
        (Some(_), None) => None,
        (None, Some(var)) => Some(token_env(at, var)?),
    };
    // The variable's name is safe to show; its value never is.
    let from_env = || {
        match var {
        None => Ok(String::new()),
        Some(var) => outside.var(var).ok_or_else(|| {
            invalid(
                format!("{at}.token_env"),
                format!("the variable {var} is not set; export it with the tenant's token, or use token_file"),
            )
        }),
    }
    };
    token(
        &format!("{at}.token_file"),
        raw.token_file.as_deref(),
        from_env,
        outside,
    )
}

/// The name of the variable a tenant's `token_env` names, checked.
fn token_env<'a>(at: &str, var: &'a str) -> Result<&'a str, ConfigError> {
    let valid = !var.is_empty()
        && var.len() <= MAX_ENV_NAME_CHARS
        && !var.starts_with(|c: char| c.is_ascii_digit())
        && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(invalid(
            format!("{at}.token_env"),
            "is not a variable name: use letters, digits and _, e.g. ACME_MAILHOST_TOKEN",
        ));
    }
    Ok(var)
}

/// The `api` settings with the tenant's token and what the tenant sets over them: its
/// address, pace, concurrency, proxy and TLS.
fn tenant_api(
    at: &str,
    raw: &mut RawTenant,
    api: &ApiConfig,
    token: SecretString,
    outside: &Outside,
) -> Result<ApiConfig, ConfigError> {
    let mut tenant_api = ApiConfig {
        token,
        ..api.clone()
    };
    if let Some(url) = &raw.base_url {
        tenant_api.base_url = base_url(&format!("{at}.base_url"), url)?;
    }
    if raw.rate_limit.is_some() {
        tenant_api.rate_limit = rate_limit(&format!("{at}.rate_limit"), raw.rate_limit)?;
    }
    if raw.endpoint_rate_limits.is_some() {
        tenant_api.endpoint_rate_limits = endpoint_rate_limits(
            &format!("{at}.endpoint_rate_limits"),
            raw.endpoint_rate_limits.take(),
        )?;
    }
    if raw.concurrency.is_some() {
        tenant_api.concurrency = concurrency(&format!("{at}.concurrency"), raw.concurrency)?;
    }
    tenant_api.http = crate::settings::http_client::settings(
        at,
        &tenant_api.base_url,
        raw.http_client(),
        &api.http,
        outside,
    )?;
    Ok(tenant_api)
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use secrecy::ExposeSecret;

    const BASE: &str = "api:\n  base_url: https://api.example.net\n  concurrency: 4\ncollectors:\n  delivery_account:\n    interval: 30s\n  tracemail_daily: {}\n";

    fn parse(tenants: &str) -> Result<Config, String> {
        let env = |name: &str| match name {
            "ACME" => Some("acme-token".to_owned()),
            "EMPTY" => Some("  ".to_owned()),
            "SPACED" => Some("acme token".to_owned()),
            "BELL" => Some("acme\u{7}token".to_owned()),
            "HUGE" => Some("t".repeat(2000)),
            _ => None,
        };
        Config::parse_with_env(&format!("{BASE}{tenants}"), &env).map_err(|e| e.to_string())
    }

    #[test]
    fn each_tenant_gets_its_token_settings_and_own_targets() {
        let c = parse(
            "tenants:\n  - name: acme\n    token_env: ACME\n    concurrency: 2\n    rate_limit: 12.5\n    endpoint_rate_limits: {tracemail_daily: 2.5}\n    collectors:\n      delivery_account:\n        accounts: [1, 2]\n  - name: bare\n    token_env: ACME\n    base_url: http://127.0.0.1:9/\n",
        )
        .unwrap();
        assert_eq!(c.tenants.len(), 2);
        let acme = &c.tenants[0];
        assert_eq!(acme.name.as_str(), "acme");
        assert_eq!(acme.api.token.expose_secret(), "acme-token");
        assert_eq!(acme.api.concurrency, 2);
        assert_eq!(acme.api.rate_limit, Some(12.5));
        assert_eq!(
            acme.api.endpoint_rate_limits,
            std::collections::BTreeMap::from([("tracemail_daily".to_owned(), 2.5)])
        );
        assert_eq!(acme.api.base_url, "https://api.example.net");
        assert_eq!(
            acme.collectors[0].targets(),
            [1, 2].map(crate::collectors::Target::DeliveryAccount)
        );
        // No static targets: a valid tenant whose targets come from /probe.
        let bare = &c.tenants[1];
        assert_eq!(bare.api.concurrency, 4);
        assert_eq!(bare.api.rate_limit, None, "no ceiling unless one is given");
        assert!(bare.api.endpoint_rate_limits.is_empty());
        assert_eq!(bare.api.base_url, "http://127.0.0.1:9");
        let names: Vec<_> = bare.collectors.iter().map(|c| c.name()).collect();
        assert_eq!(
            names,
            [
                crate::collectors::CollectorName::DeliveryAccount,
                crate::collectors::CollectorName::TracemailDaily
            ]
        );
        assert!(bare.collectors[0].targets().is_empty());
        assert_eq!(c.probe_idle_intervals, 3);
    }

    #[test]
    fn a_single_token_config_is_one_tenant_without_a_name() {
        let text = "api:\n  base_url: https://api.example.net\ncollectors:\n  delivery_account:\n    accounts: [7]\n";
        let c = Config::parse(text, Some("tok".into())).unwrap();
        assert_eq!(c.tenants.len(), 1);
        assert!(c.tenants[0].name.is_default());
        assert_eq!(c.tenants[0].api.token.expose_secret(), "tok");
    }

    #[test]
    fn bad_tenants_are_refused_naming_the_field_and_the_fix() {
        let cases = [
            (
                "tenants: []\n",
                "tenants: is empty; list at least one tenant",
            ),
            (
                "tenants:\n  - name: a b\n    token_env: ACME\n",
                "tenants[0].name: \"a b\": use letters, digits, _, - and . only",
            ),
            (
                "tenants:\n  - name: a\n    token_env: ACME\n  - name: a\n    token_env: ACME\n",
                "tenants[1].name: a is listed twice",
            ),
            ("tenants:\n  - name: a\n", "tenants[0]: has no token"),
            // A bad token names its tenant and where it came from, never itself.
            (
                "tenants:\n  - name: a\n    token_env: ACME\n  - name: b\n    token_env: ACME\n  - name: c\n    token_env: SPACED\n",
                "tenants[2].token_env: the token contains spaces or control characters",
            ),
            (
                "tenants:\n  - name: a\n    token_env: BELL\n",
                "tenants[0].token_env: the token contains spaces or control characters",
            ),
            (
                "tenants:\n  - name: a\n    token_env: HUGE\n",
                "tenants[0].token_env: the token is longer than 1024 characters",
            ),
            (
                "tenants:\n  - name: a\n    token_env: ACME\n    rate_limit: 0\n",
                "tenants[0].rate_limit: 0 is out of range: give the requests per second the provider allows the token, from 0.01 to 10000",
            ),
            (
                "tenants:\n  - name: a\n    token_env: ACME\n    rate_limit: .nan\n",
                "tenants[0].rate_limit: NaN is out of range",
            ),
            (
                "tenants:\n  - name: a\n    token_env: ACME\n    endpoint_rate_limits: {tracemail_daily: 0}\n",
                "tenants[0].endpoint_rate_limits.tracemail_daily: 0 is out of range",
            ),
            (
                "tenants:\n  - name: a\n    token_env: ACME\n  - name: b\n    token_env: ACME\n    endpoint_rate_limits: {daily: 1}\n",
                "tenants[1].endpoint_rate_limits.daily: no such endpoint: name one of delivery_account",
            ),
            (
                "tenants:\n  - name: a\n    token_env: ACME\n    token_file: /x\n",
                "tenants[0]: give one of token_file and token_env",
            ),
            (
                "tenants:\n  - name: a\n    token_env: NOPE\n",
                "tenants[0].token_env: the variable NOPE is not set",
            ),
            (
                "tenants:\n  - name: a\n    token_env: EMPTY\n",
                "tenants[0].token_env: the variable it names is empty",
            ),
            (
                "tenants:\n  - name: a\n    token_env: 9X\n",
                "tenants[0].token_env: is not a variable name",
            ),
            (
                "tenants:\n  - name: a\n    token_file: /nonexistent/token\n",
                "tenants[0].token_file: cannot read the file it names",
            ),
            (
                "tenants:\n  - name: a\n    token_env: ACME\n    collectors:\n      migration:\n        migrations: [MG00000001]\n",
                "tenants[0].collectors.migration: the migration collector is not enabled",
            ),
            (
                "tenants:\n  - name: a\n    token_env: ACME\n    collectors:\n      delivery_account:\n        accounts: [0]\n",
                "tenants[0].collectors.delivery_account.accounts[0]: 0 is out of range",
            ),
            (
                "tenants:\n  - name: a\n    token_env: ACME\n    probe:\n      allow: [-1]\n",
                "tenants[0].probe.allow[0]: -1 is out of range",
            ),
            (
                "probe:\n  idle_intervals: 0\ntenants:\n  - name: a\n    token_env: ACME\n",
                "probe.idle_intervals: 0 is out of range",
            ),
            (
                "tenants:\n  - name: a\n    token_env: ACME\n    base_url: ftp://x\n",
                "tenants[0].base_url: \"ftp://x\" is not an http(s) address",
            ),
            // What the operator wrote is cut and escaped, never written raw to the terminal.
            (
                "tenants:\n  - name: \"\\e[2J\\r\"\n    token_env: ACME\n",
                "tenants[0].name: \"\\u{1b}[2J\\r\": use letters",
            ),
            (
                "tenants:\n  - name: a\n    token_env: ACME\n    endpoint_rate_limits: {\"\\e[2J\": 1}\n",
                "tenants[0].endpoint_rate_limits.(key hidden): no such endpoint",
            ),
            (
                "tenants:\n  - name: a\n    token_env: ACME\n    endpoint_rate_limits: {\"\\e[2J\": 0}\n",
                "tenants[0].endpoint_rate_limits.(key hidden): 0 is out of range",
            ),
        ];
        for (tenants, expected) in cases {
            let e = parse(tenants).unwrap_err();
            assert!(e.starts_with(expected), "{tenants}\n{e}");
            for secret in ["acme-token", "acme token", "ttttttttttttttttttttttttt"] {
                assert!(!e.contains(secret), "{e}");
            }
        }
        let e = parse(&format!(
            "tenants:\n  - name: {}\n    token_env: ACME\n",
            "n".repeat(5000)
        ))
        .unwrap_err();
        assert_eq!(
            e,
            format!(
                "tenants[0].name: \"{}...\" (cut at 64 characters): a tenant name has 1 to 64 characters",
                "n".repeat(64)
            )
        );
    }

    #[test]
    fn with_tenants_targets_and_the_token_belong_to_the_tenants() {
        for (from, to, want) in [
            (
                "interval: 30s",
                "interval: 30s\n    accounts: [1]",
                "collectors.delivery_account.accounts: with tenants:, targets belong to a tenant: move the list to tenants[].collectors.delivery_account.accounts",
            ),
            (
                "concurrency: 4",
                "concurrency: 4\n  token_file: /run/token",
                "api.token_file: with tenants:",
            ),
        ] {
            let text = format!(
                "{}tenants:\n  - name: a\n    token_env: ACME\n",
                BASE.replace(from, to)
            );
            let e = Config::parse_with_env(&text, &|_| Some("t".to_owned()))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(want), "{e}");
        }
    }

    #[test]
    fn discovery_is_off_unless_asked_and_a_tenant_overrides_the_defaults() {
        let c = parse("tenants:\n  - name: a\n    token_env: ACME\n").unwrap();
        assert!(!c.tenants[0].discovery.accounts && !c.tenants[0].discovery.domains);
        let c = parse(
            "discovery:\n  accounts: true\n  max_accounts: 5\n  deny: [3]\ntenants:\n  - name: a\n    token_env: ACME\n  - name: b\n    token_env: ACME\n    discovery:\n      domains: true\n      allow: [1, 2]\n",
        )
        .unwrap();
        let (a, b) = (&c.tenants[0].discovery, &c.tenants[1].discovery);
        assert!(a.accounts && !a.domains && a.max_accounts == 5 && a.allow.is_none());
        assert!(b.accounts && b.domains && b.max_accounts == 5);
        assert_eq!(b.allow.as_ref().unwrap().len(), 2);
        assert!(b.deny.contains(&3));
        let e = parse(
            "discovery:\n  max_domains: 2000000\ntenants:\n  - name: a\n    token_env: ACME\n",
        )
        .unwrap_err();
        assert!(
            e.starts_with("discovery.max_domains: 2000000 is out of range"),
            "{e}"
        );
        let e =
            parse("tenants:\n  - name: a\n    token_env: ACME\n    discovery:\n      deny: [0]\n")
                .unwrap_err();
        assert!(
            e.starts_with("tenants[0].discovery.deny[0]: 0 is out of range"),
            "{e}"
        );
    }

    #[test]
    fn probe_settings_default_from_the_probe_block_and_a_tenant_overrides_them() {
        let c = parse(
            "probe:\n  idle_intervals: 5\n  max_targets: 10\n  allow: [1, 2]\ntenants:\n  - name: a\n    token_env: ACME\n  - name: b\n    token_env: ACME\n    probe:\n      max_targets: 0\n",
        )
        .unwrap();
        assert_eq!(c.probe_idle_intervals, 5);
        assert_eq!(c.tenants[0].probe.max_targets, 10);
        assert_eq!(c.tenants[0].probe.allow, Some([1, 2].into()));
        assert_eq!(c.tenants[1].probe.max_targets, 0);
        assert!(c.tenants[1].probe.allow.is_some());
    }

    /// A tenant's way to the provider: proxy and TLS.
    mod http_client {
        use super::super::super::Config;
        use crate::settings::http_client::{HttpClientSettings, MAX_DISTINCT, TlsVersion};

        fn parse(text: &str) -> Result<Config, String> {
            Config::parse_with_env(text, &|_| Some("tok".to_owned())).map_err(|e| e.to_string())
        }

        const API: &str = "api:\n  base_url: https://api.example.net\n  proxy_url: http://proxy.example.net:3128\n  tls_config:\n    server_name: api.example.net\ncollectors:\n  delivery_account: {}\ntenants:\n";

        #[test]
        fn a_tenant_takes_the_api_blocks_settings_and_replaces_what_it_names() {
            let c = parse(&format!(
                "{API}  - name: same\n    token_env: T\n  - name: direct\n    token_env: T\n    proxy_url: http://other.example.net:8080\n    no_proxy: .internal\n    tls_config:\n      min_version: TLS13\n"
            ))
            .unwrap();
            let (same, direct) = (&c.tenants[0].api.http, &c.tenants[1].api.http);
            assert_eq!(
                same.proxy_url.as_deref(),
                Some("http://proxy.example.net:3128")
            );
            assert_eq!(same.tls.server_name.as_deref(), Some("api.example.net"));
            assert_eq!(
                direct.proxy_url.as_deref(),
                Some("http://other.example.net:8080")
            );
            assert_eq!(direct.no_proxy.as_deref(), Some(".internal"));
            // tls_config replaces the api block's whole: no server_name here.
            assert_eq!(direct.tls.server_name, None);
            assert_eq!(direct.tls.min_version, TlsVersion::Tls13);
            assert!(HttpClientSettings::default().is_default() && !same.is_default());
        }

        #[test]
        fn more_distinct_settings_than_pools_are_refused_naming_the_tenant() {
            let tenant = |i: usize| {
                format!(
                    "  - name: t{i}\n    token_env: T\n    tls_config:\n      server_name: t{i}.example.net\n"
                )
            };
            let fits: String = (0..MAX_DISTINCT).map(tenant).collect();
            assert!(parse(&format!("{API}{fits}")).is_ok());
            let over: String = (0..=MAX_DISTINCT).map(tenant).collect();
            let e = parse(&format!("{API}{over}")).unwrap_err();
            assert!(
                e.starts_with(&format!(
                    "tenants[{MAX_DISTINCT}].tls_config: is the 65th distinct"
                )),
                "{e}"
            );
        }

        #[test]
        fn a_proxy_password_is_never_shown_by_debug() {
            let c = parse(
                "api:\n  base_url: https://api.example.net\n  proxy_url: http://user:hunter2@proxy.example.net:3128\ncollectors:\n  delivery_account: {}\ntenants:\n  - name: a\n    token_env: T\n",
            )
            .unwrap();
            let shown = format!("{:?}", c.tenants[0].api);
            assert!(
                shown.contains("proxy.example.net") && !shown.contains("hunter2"),
                "{shown}"
            );
        }
    }
}
