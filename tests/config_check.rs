//! `--config.check`: the shipped example passes; each bad fixture fails with its exact message.
//! `--config.syntax-only` checks the file alone, leaving what it names outside itself unread.

use std::process::Command;

fn check(file: &str, token: Option<&str>) -> (bool, String, String) {
    check_with(file, token, &[])
}

/// `--config.check` of `file`, with `flags` besides.
fn check_with(file: &str, token: Option<&str>, flags: &[&str]) -> (bool, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mailhost_exporter"));
    cmd.arg(format!("--config.file={file}"))
        .arg("--config.check")
        .args(flags)
        .env_remove("MAILHOST_API_TOKEN");
    if let Some(t) = token {
        cmd.env("MAILHOST_API_TOKEN", t);
    }
    let out = cmd.output().expect("run mailhost_exporter");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The fixtures that are wrong only in what they name outside the file: a token that is not set
/// or a token file that does not exist.
const WRONG_OUTSIDE_ONLY: [&str; 3] = [
    "missing-token.yml",
    "unreadable-token-file.yml",
    "token-pasted-in-token-file.yml",
];

#[test]
fn the_shipped_example_config_is_accepted() {
    let (ok, stdout, stderr) = check(
        &crate::helpers::repo_root()
            .join("examples/config.yml")
            .display()
            .to_string(),
        Some("example-token"),
    );
    assert!(ok, "{stderr}");
    assert_eq!(stdout, "ok\n");
}

#[test]
fn a_token_file_is_read_and_the_env_is_then_not_needed() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "secret-from-file\n").unwrap();
    let config = dir.path().join("config.yml");
    std::fs::write(
        &config,
        format!(
            "api:\n  base_url: https://api.example.net\n  token_file: {}\ncollectors:\n  delivery_account:\n    accounts: [1]\n",
            token.display()
        ),
    )
    .unwrap();
    let (ok, stdout, stderr) = check(config.to_str().unwrap(), None);
    assert!(ok, "{stderr}");
    assert_eq!(stdout, "ok\n");
}

#[test]
fn every_bad_fixture_is_refused_with_a_message_that_names_the_problem_and_the_fix() {
    let cases = [
        (
            "unknown-key.yml",
            "collectors.delivery_account: unknown field `acounts`, expected one of `enabled`, `interval`, `deadline`, `max_age`, `accounts` at line 6 column 5 (remove or correct the key; see examples/config.yml)",
        ),
        (
            "unknown-top-level-key.yml",
            "unknown field `collector`, expected one of `api`, `collectors`, `tenants`, `probe`, `discovery` at line 3 column 1 (remove or correct the key; see examples/config.yml)",
        ),
        (
            "id-out-of-range.yml",
            "collectors.delivery_account.accounts[1]: 2147483648 is out of range: Delivery account ids are int32, from 1 to 2147483647",
        ),
        (
            "bad-duration.yml",
            "api.timeout: invalid value: string \"10 parsecs\", expected a duration at line 3 column 12 (write durations like 30s, 5m or 1h30m)",
        ),
        (
            "missing-token.yml",
            "api.token_file: no API token: set api.token_file to a file holding the token, or set MAILHOST_API_TOKEN",
        ),
        (
            "unreadable-token-file.yml",
            "api.token_file: cannot read the file it names (no such file); check that it is the path of a readable file holding the token, not the token itself",
        ),
        (
            "bad-timezone.yml",
            "collectors.tracemail_dashboard.timezone: \"Mars/Olympus_Mons\" is not a known time zone; use an IANA name such as UTC or Europe/Rome",
        ),
        (
            "bad-date-format.yml",
            "collectors.tracemail_daily.date_format: \"YYYY/MM\" is not a date format: write YYYY, MM and DD once each with separators, e.g. YYYY-MM-DD",
        ),
        (
            "bad-view.yml",
            "collectors.tracemail_dashboard.views[0]: give exactly one of account (an id) or domain (a name)",
        ),
        (
            "bad-migration-code.yml",
            "collectors.migration.migrations[1]: \"MG123\" is not a valid code: expected MG followed by 8 digits, e.g. MG00000001",
        ),
        (
            "bad-mailbox-code.yml",
            "collectors.mailbox.mailboxes[0].mailbox: \"EA123\" is not a valid code: expected EA followed by 8 digits (e.g. EA00000001), or P followed by 9 digits for a postmaster",
        ),
        (
            "too-many-top-domains.yml",
            "collectors.tracemail_daily.top_domains: 5000 is out of range: use 1 to 200",
        ),
        (
            "top-limit-too-large.yml",
            "collectors.tracemail_dashboard.limit: 1001 is out of range: use 1 to 1000",
        ),
        (
            "not-http.yml",
            "api.base_url: \"file:///etc/passwd\" is not an http(s) address; write it like https://api.example.net",
        ),
        (
            "token-pasted-in-token-file.yml",
            "api.token_file: cannot read the file it names (no such file); check that it is the path of a readable file holding the token, not the token itself",
        ),
        (
            "base-url-with-credentials-and-bad-port.yml",
            "api.base_url: \"http://api.example.net:99999/v1\" is not an http(s) address (invalid port number); write it like https://api.example.net",
        ),
        (
            "secret-in-a-number-field.yml",
            "api.concurrency: invalid type: string \"[redacted]\", expected usize at line 3 column 16",
        ),
        (
            "interval-too-long.yml",
            "collectors.delivery_account.interval: 2days is out of range: use 1s to 1day, for example 60s",
        ),
        (
            "max-age-too-long.yml",
            "collectors.migration.max_age: 30days is out of range: use at most 7days; values older than that are of no use",
        ),
        (
            "timeout-too-long.yml",
            "api.timeout: 1h is out of range: use 1ms to 5m, for example 10s",
        ),
        (
            "cooldown-too-long.yml",
            "api.circuit_breaker_cooldown: 316years 10months 17days 8h 10m 40s is out of range: use 1s to 1h, for example 60s",
        ),
        (
            "retry-backoff-too-long.yml",
            "api.retry_max_backoff: 1day is out of range: use 1ms to 5m, for example 5s",
        ),
        (
            "breaker-failures-too-many.yml",
            "api.circuit_breaker_failures: 4294967295 is out of range: use 0 (never open) to 1000, for example 5",
        ),
        (
            "rate-limit-out-of-range.yml",
            "api.rate_limit: 1000000000 is out of range: give the requests per second the provider allows the token, from 0.01 to 10000, e.g. 50 (or leave it out: the exporter learns the limit from the provider's answers)",
        ),
        (
            "endpoint-rate-limit-unknown-endpoint.yml",
            "api.endpoint_rate_limits.tracemail: no such endpoint: name one of delivery_account, tracemail_dashboard, tracemail_daily, tracemail_domains_rank, migration_stats, email_account, team_member (the values of the endpoint label)",
        ),
        (
            "endpoint-rate-limit-out-of-range.yml",
            "api.endpoint_rate_limits.tracemail_daily: 0 is out of range: give the requests per second the provider allows the token, from 0.01 to 10000, e.g. 50 (or leave it out: the exporter learns the limit from the provider's answers)",
        ),
        (
            "max-response-bytes-too-large.yml",
            "api.max_response_bytes: 18446744073709551615 is out of range: use 1024 to 268435456 (256 MiB), for example 4194304",
        ),
        (
            "empty.yml",
            "the config file is empty: start from examples/config.yml; at least api.base_url and one collector are needed",
        ),
        (
            "deep-nesting.yml",
            "[ ] and { } are nested more than 64 deep at line 5 column 79; the config needs at most 4",
        ),
        (
            "yaml-nested-aliases.yml",
            "collectors.tracemail_daily.accounts[0]: invalid type: sequence, expected i64 at line 5 column 15",
        ),
    ];
    for (file, message) in cases {
        let path = format!("tests/fixtures/config/{file}");
        // The token is supplied except where its absence is the point.
        let token = (file != "missing-token.yml").then_some("t");
        let (ok, stdout, stderr) = check(&path, token);
        assert!(!ok, "{file} was accepted");
        assert_eq!(stdout, "", "{file}");
        assert_eq!(stderr, format!("{path}: {message}\n"), "{file}");
    }
}

/// Secrets pasted in the wrong place: none of them reaches the output of `--config.check`.
#[test]
fn a_secret_pasted_in_the_wrong_field_is_never_quoted() {
    for (file, secrets) in [
        (
            "token-pasted-in-token-file.yml",
            &["mh_live_7fQ2x9Lk3Vb8Zp4Rt6Yw1Nc5"][..],
        ),
        (
            "base-url-with-credentials-and-bad-port.yml",
            &["S3cretT0kenValue", "admin", "mh_live_abc123", "token="][..],
        ),
        (
            "secret-in-a-number-field.yml",
            &["mh_live_7fQ2x9Lk3Vb8Zp4Rt6Yw1Nc5"][..],
        ),
        ("secret-as-a-key.yml", &["mh_live_S3cretT0kenPasted"][..]),
    ] {
        let (ok, stdout, stderr) = check(&format!("tests/fixtures/config/{file}"), Some("t"));
        assert!(!ok, "{file}");
        for secret in secrets {
            assert!(
                !stdout.contains(secret) && !stderr.contains(secret),
                "{file}: {secret} was quoted in {stderr}"
            );
        }
    }
}

#[test]
fn a_config_file_over_its_size_limit_is_refused_without_being_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.yml");
    // Sparse: costs no disk, reads as zeros.
    std::fs::File::create(&path)
        .unwrap()
        .set_len(mailhost_exporter::settings::limits::CONFIG_FILE_BYTES + 1)
        .unwrap();
    let (ok, _, stderr) = check(path.to_str().unwrap(), Some("t"));
    assert!(!ok);
    assert!(
        stderr.ends_with("is larger than 16 MiB; is it the right file?\n"),
        "{stderr}"
    );
}

#[test]
fn the_good_minimal_fixture_is_accepted() {
    let (ok, stdout, _) = check("tests/fixtures/config/good-minimal.yml", Some("t"));
    assert!(ok);
    assert_eq!(stdout, "ok\n");
}

#[test]
fn without_config_or_demo_it_says_how_to_start() {
    let out = Command::new(env!("CARGO_BIN_EXE_mailhost_exporter"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--config.file") && stderr.contains("--demo"),
        "{stderr}"
    );
}

/// `--config.check` under an open-file limit of `limit`.
fn check_under_limit(config: &str, limit: u32) -> (bool, String, String) {
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "ulimit -Sn {limit} -Hn {limit} && exec \"$0\" \"$@\""
        ))
        .arg(env!("CARGO_BIN_EXE_mailhost_exporter"))
        .arg(format!("--config.file={config}"))
        .arg("--config.check")
        .env_remove("MAILHOST_API_TOKEN")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_config_asking_for_more_upstream_calls_than_the_open_file_limit_allows_is_told_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "t").unwrap();
    let mut yaml = String::from(
        "api:\n  base_url: http://127.0.0.1:9\n  concurrency: 8\ncollectors:\n  delivery_account:\n    interval: 60s\ntenants:\n",
    );
    for t in 0..300 {
        yaml.push_str(&format!(
            "  - name: t{t}\n    token_file: {}\n    collectors:\n      delivery_account:\n        accounts: [{}]\n",
            token.display(),
            t + 1
        ));
    }
    let path = dir.path().join("many.yml");
    std::fs::write(&path, yaml).unwrap();
    let path = path.to_str().unwrap();
    // A warning, not an error: the calls beyond wait for a turn.
    let (ok, stdout, stderr) = check_under_limit(path, 1024);
    assert!(ok, "{stderr}");
    assert_eq!(stdout, "ok\n");
    assert!(
        stderr.contains("warning: the open-file limit (1024) leaves room for 240 upstream calls")
            && stderr.contains("adds up to 2400")
            && stderr.contains("Raise the limit to at least 3424"),
        "{stderr}"
    );
    // Under a limit where everything fits, nothing is said.
    let (ok, _, stderr) = check_under_limit(path, 8192);
    assert!(ok && stderr.is_empty(), "{stderr}");
}

#[test]
fn syntax_only_accepts_missing_token_and_tls_files_and_names_the_fields_it_left() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yml");
    std::fs::write(
        &config,
        "api:\n  base_url: https://api.example.net\n  token_file: /run/secrets/absent-token\n  tls_config:\n    ca_file: /run/secrets/absent-ca.crt\n    cert_file: /run/secrets/absent.crt\n    key_file: /run/secrets/absent.key\ncollectors:\n  delivery_account:\n    accounts: [1001]\n",
    )
    .unwrap();
    let path = config.to_str().unwrap();
    let (ok, stdout, stderr) = check_with(path, None, &["--config.syntax-only"]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout, "ok\n");
    assert_eq!(
        stderr,
        format!(
            "{path}: not checked (--config.syntax-only): api.token_file, api.tls_config.ca_file, api.tls_config.cert_file, api.tls_config.key_file; what they name is read at start and on every reload\n"
        )
    );
    // Without the flag the check is whole: the missing token file is refused, as before.
    let (ok, stdout, stderr) = check(path, None);
    assert!(!ok);
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        format!(
            "{path}: api.token_file: cannot read the file it names (no such file); check that it is the path of a readable file holding the token, not the token itself\n"
        )
    );
}

#[test]
fn syntax_only_refuses_every_bad_fixture_but_those_wrong_only_outside_the_file() {
    for entry in std::fs::read_dir("tests/fixtures/config").unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_str().unwrap().to_owned();
        let path = path.to_str().unwrap();
        let (ok, stdout, stderr) = check_with(path, None, &["--config.syntax-only"]);
        if file.starts_with("good-") || WRONG_OUTSIDE_ONLY.contains(&file.as_str()) {
            assert!(ok, "{file}: {stderr}");
            assert_eq!(stdout, "ok\n", "{file}");
            assert!(
                stderr.contains(": not checked (--config.syntax-only): "),
                "{file}: {stderr}"
            );
            continue;
        }
        // Refused with the very message of the full check.
        let (_, _, full) = check(path, Some("t"));
        assert!(!ok, "{file} was accepted");
        assert_eq!(stdout, "", "{file}");
        assert_eq!(stderr, full, "{file}");
    }
}

#[test]
fn syntax_only_is_a_mode_of_the_check_and_needs_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_mailhost_exporter"))
        .args([
            "--config.file=tests/fixtures/config/good-minimal.yml",
            "--config.syntax-only",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--config.check"), "{stderr}");
}

/// `--config.check` of YAML `text` written to a file: whether it passed, and what it said.
fn check_text(text: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yml");
    std::fs::write(&config, text).unwrap();
    let (ok, stdout, stderr) = check(config.to_str().unwrap(), Some("t"));
    let path = format!("{}: ", config.display());
    (ok, format!("{stdout}{}", stderr.replace(&path, "")))
}

#[test]
fn a_bad_value_of_a_field_that_holds_no_secret_is_shown_cut_and_escaped() {
    let config = |interval: &str| {
        format!(
            "api:\n  base_url: https://api.example.net\ncollectors:\n  migration:\n    interval: {interval}\n    migrations: [MG00000001]\n"
        )
    };
    let (ok, said) = check_text(&config("5x"));
    assert!(!ok);
    assert_eq!(
        said,
        "collectors.migration.interval: invalid value: string \"5x\", expected a duration at line 5 column 15 (write durations like 30s, 5m or 1h30m)\n"
    );
    // A long value is cut; control characters (an ANSI escape that would clear the screen, a
    // bell, a carriage return) are escaped, never written to the terminal.
    let (ok, said) = check_text(&config(&format!(
        "\"\\e[2J\\a\\r{}\"",
        "5 minutes ".repeat(500)
    )));
    assert!(!ok);
    assert!(
        said.starts_with("collectors.migration.interval: invalid value: string \"\\u{1b}[2J\\u{7}\\r5 minutes 5 minutes")
            && said.contains("...\" (cut at 64 characters), expected a duration"),
        "{said}"
    );
    assert!(said.len() < 300, "{said}");
    assert!(
        !said.contains(['\u{1b}', '\u{7}', '\r']),
        "a control character reached the output: {said:?}"
    );
}

#[test]
fn a_value_in_the_place_of_a_field_that_may_hold_a_secret_is_never_shown() {
    // Secrets that do not look like tokens: only the field tells that they must be hidden.
    let secret = "correct horse battery staple";
    for text in [
        format!(
            "api:\n  base_url: https://api.example.net\n  tls_config: {secret}\ncollectors:\n  delivery_account:\n    accounts: [1]\n"
        ),
        format!("api: {secret}\ncollectors:\n  delivery_account:\n    accounts: [1]\n"),
        format!(
            "api:\n  base_url: https://api.example.net\ncollectors:\n  delivery_account: {{}}\ntenants:\n  - {secret}\n"
        ),
    ] {
        let (ok, said) = check_text(&text);
        assert!(!ok, "{text}");
        assert!(said.contains("(value hidden)"), "{said}");
        assert!(!said.contains("horse"), "{said}");
    }
    // A token pasted in a field that holds no secret is redacted all the same.
    let (ok, said) = check_text(
        "api:\n  base_url: https://api.example.net\n  timeout: mh_live_7fQ2x9Lk3Vb8Zp4Rt6Yw1Nc5\ncollectors:\n  delivery_account:\n    accounts: [1]\n",
    );
    assert!(!ok);
    assert!(
        said.starts_with("api.timeout: invalid value: string \"[redacted]\""),
        "{said}"
    );
    assert!(!said.contains("7fQ2x9Lk3Vb8Zp4Rt6Yw1Nc5"), "{said}");
}
