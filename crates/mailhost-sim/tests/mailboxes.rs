//! Email account (mailbox) records, their living counters and path checks.

use crate::helpers::*;

#[tokio::test]
async fn the_mailbox_record_has_every_documented_field() {
    let sim = hosting_sim();
    let app = loopback_app(&sim);
    let answer = call(&app, get(MAILBOX, TOKEN)).await;
    assert_eq!(
        answer.json()["pagination"],
        json!({"page": 1, "per_page": 1, "total": 1})
    );
    let record = answer.record();
    let members = record.as_object().expect("object");
    for field in MAILBOX_RECORD_FIELDS {
        assert!(members.contains_key(field), "missing {field}");
    }
    assert_eq!(members.len(), MAILBOX_RECORD_FIELDS.len());
    assert_eq!(record["type"], "EmailAccount");
    assert_eq!(record["email_address"], "info@acme.example");
    assert_eq!(record["domain_code"], "D000000901");
    assert_eq!(record["quota"], 1000);
    assert_eq!(record["quota_human"], "1000 MB");
    assert_eq!(record["max_email_quota"], 2048);
    assert_eq!(record["outbound_limit_period"], 24);
    assert_eq!(record["password_expiration"], -1);
    assert_eq!(record["status"], "enabled");
    assert_eq!(record["status_detail"], "ok");
    assert!(record["lastauth"].is_i64());
    assert!(record["archive"].is_boolean());
    let delegates = record["delegates"].as_array().expect("delegates");
    assert_eq!(record["delegates_no"], delegates.len());
    assert!(!delegates.is_empty(), "EA...11 has one delegate");
    for delegate in delegates {
        let members = delegate.as_object().expect("delegate");
        for field in DELEGATE_RECORD_FIELDS {
            assert!(members.contains_key(field), "delegate misses {field}");
        }
    }
    assert_eq!(Some(record), sim.mailbox_record("D000000901", "EA00000011"));

    let postmaster = call(
        &app,
        get("/api/domains/D000000901/email_accounts/P000000012", TOKEN),
    )
    .await
    .record();
    assert_eq!(postmaster["type"], "Postmaster");
    assert_eq!(postmaster["email_address"], "postmaster@acme.example");
}

#[tokio::test]
async fn mailbox_quota_grows_with_the_clock_and_tests_can_change_it() {
    let sim = hosting_sim();
    let app = loopback_app(&sim);
    sim.clock().advance(Duration::from_secs(30 * 60));
    let record = call(&app, get(MAILBOX, TOKEN)).await.record();
    assert_eq!(record["quota"], 1060);
    assert_eq!(record["quota_human"], "1.04 GB");
    assert!(record["messages"].as_i64() > Some(50));

    assert!(sim.update_mailbox("EA00000011", |m| {
        m.quota_used_mib = 2040;
        m.archive = true;
        m.archive_status = "activating".into();
        m.password_expired = true;
        m.outbound_limit = 10;
        m.outbound_sent = 10;
    }));
    assert!(!sim.update_mailbox("EA99999999", |_| {}));
    let record = call(&app, get(MAILBOX, TOKEN)).await.record();
    assert_eq!(record["quota"], 2040);
    assert_eq!(record["archive_status"], "activating");
    assert_eq!(record["archive_import_status"], "running");
    assert_eq!(record["password_expired"], true);
    assert_eq!(record["outbound_limit_status"], 10);
    sim.clock().advance(Duration::from_secs(3600));
    let record = call(&app, get(MAILBOX, TOKEN)).await.record();
    assert_eq!(record["quota"], 2048, "growth stops at the limit");
    assert_eq!(
        sim.mailbox("EA00000011").map(|m| m.quota_used_mib),
        Some(2048)
    );
}

#[tokio::test]
async fn mailbox_paths_are_checked_and_unknown_pairs_answer_404() {
    let app = loopback_app(&hosting_sim());
    for (path, parameter) in [
        (
            "/api/domains/D901/email_accounts/EA00000011",
            "`domain_code`",
        ),
        (
            "/api/domains/D000000901/email_accounts/EA11",
            "`email_account_code`",
        ),
        (
            "/api/domains/D000000901/email_accounts/P00000012",
            "`email_account_code`",
        ),
        (
            "/api/domains/D000000901/email_accounts/T000000012",
            "`email_account_code`",
        ),
    ] {
        let message = call(&app, get(path, TOKEN))
            .await
            .error(StatusCode::BAD_REQUEST);
        assert!(message.contains(parameter), "{path}: {message}");
    }
    for path in [
        "/api/domains/D000000902/email_accounts/EA00000011",
        "/api/domains/D000000901/email_accounts/EA00000099",
    ] {
        call(&app, get(path, TOKEN))
            .await
            .error(StatusCode::NOT_FOUND);
    }
}

#[tokio::test]
async fn security_fields_follow_update_mailbox() {
    let sim = hosting_sim();
    let app = loopback_app(&sim);
    let flags = [
        "otp",
        "force_otp",
        "domain_force_otp",
        "api_enabled",
        "smtp_disabled",
        "imap_disabled",
        "pop_disabled",
        "apply_allow_nets_webmail",
    ];
    let record = call(&app, get(MAILBOX, TOKEN)).await.record();
    for flag in flags {
        assert_eq!(record[flag], false, "{flag}");
    }
    assert!(sim.update_mailbox("EA00000011", |m| {
        m.api_enabled = true;
        m.otp = false;
        m.force_otp = true;
        m.domain_force_otp = true;
        m.smtp_disabled = true;
        m.imap_disabled = true;
        m.pop_disabled = true;
        m.apply_allow_nets_webmail = true;
    }));
    let record = call(&app, get(MAILBOX, TOKEN)).await.record();
    assert_eq!(record["api_enabled"], true);
    assert_eq!(record["otp"], false);
    for flag in &flags[1..] {
        assert_eq!(record[*flag], true, "{flag}");
    }
    assert!(sim.update_mailbox("EA00000011", |m| {
        m.otp = true;
        m.smtp_disabled = false;
    }));
    let record = call(&app, get(MAILBOX, TOKEN)).await.record();
    assert_eq!(record["otp"], true);
    assert_eq!(record["smtp_disabled"], false);
    assert!(sim.update_mailbox("EA00000011", |m| m.enabled = false));
    let record = call(&app, get(MAILBOX, TOKEN)).await.record();
    assert_eq!(
        record["smtp_disabled"], true,
        "a disabled mailbox shows SMTP off"
    );
}
