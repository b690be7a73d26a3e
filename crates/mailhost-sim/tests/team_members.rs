//! Team members on the wire: the record, path checks, the password and permission update, what a
//! restricted token may do, changes made by tests, and the fault and rate-limit layers.

use crate::helpers::*;

const NOW: &str = "2026-11-22T10:00:00Z";
const MEMBER: &str = "T000000201";
const OTHER: &str = "T000000202";
const PATH: &str = "/api/team_members/T000000201";

fn member_seeds() -> Vec<TeamMember> {
    vec![
        TeamMember {
            code: MEMBER.into(),
            firstname: "Laura".into(),
            lastname: "Verdi".into(),
            email_address: "laura.verdi@acme.example".into(),
            otp: true,
            allow_nets: vec![
                "192.0.2.7/32".parse().expect("net"),
                "10.0.0.0/8".parse().expect("net"),
            ],
            permissions: vec!["api".into(), "delivery".into()],
            is_customer_trial: true,
            ..TeamMember::default()
        },
        TeamMember {
            code: OTHER.into(),
            email_address: "paolo.neri@acme.example".into(),
            ..TeamMember::default()
        },
    ]
}

/// The test fleet with two team members, on a clock frozen at [`NOW`].
fn team_sim() -> Simulator {
    let config = SimConfig {
        team_members: member_seeds(),
        ..config()
    };
    Simulator::try_with_clock(config, SimClock::frozen(ts(NOW))).expect("valid config")
}

fn put(path: &str, token: &str, body: Value) -> Request<Body> {
    mgmt(Method::PUT, path, token, Some(body))
}

#[tokio::test]
async fn the_team_member_record_has_every_documented_field_with_its_shape() {
    let sim = team_sim();
    let app = loopback_app(&sim);
    let answer = call(&app, get(PATH, TOKEN)).await;
    assert_eq!(
        answer.json()["pagination"],
        json!({"page": 1, "per_page": 1, "total": 1})
    );
    let record = answer.record();
    let members = record.as_object().expect("object");
    for field in TEAM_MEMBER_RECORD_FIELDS {
        assert!(members.contains_key(field), "missing {field}");
    }
    assert_eq!(members.len(), TEAM_MEMBER_RECORD_FIELDS.len());
    assert_eq!(record["code"], MEMBER);
    assert_eq!(record["type"], "TeamMember");
    assert_eq!(record["status"], "enabled");
    assert_eq!(record["status_detail"], "customer");
    assert_eq!(record["fullname"], "Laura Verdi");
    assert_eq!(record["email_address"], "laura.verdi@acme.example");
    assert_eq!(record["language"], "it");
    assert_eq!(record["timezone"], "Europe/Rome");
    assert_eq!(record["otp"], true);
    assert_eq!(record["api_access_blocked"], false);
    assert_eq!(record["allow_nets"], json!(["192.0.2.7", "10.0.0.0/8"]));
    assert_eq!(record["permissions"], json!(["api", "delivery"]));
    assert_eq!(record["is_customer_trial"], true);
    assert_eq!(record["is_customer_disabled"], false);
    assert_eq!(record["is_customer_reseller"], false);
    assert_eq!(record["customer_code"], "C000000042");
    assert_eq!(record["created_at"], "2026-05-06 10:00:00");
    assert_eq!(record["updated_at"], "2026-05-07 10:00:00");
    for flag in [
        "is_customer_wholesale",
        "is_partner_customer",
        "basic_plan_available",
        "basic_plan_available_for_non_reseller_order",
        "can_access_delivery",
        "requires_delivery_business_email",
        "can_edit_outbound_limits",
        "catch_all",
    ] {
        assert!(record[flag].is_boolean(), "{flag}: {}", record[flag]);
    }
    assert_eq!(Some(record), sim.team_member_record(MEMBER));
}

#[tokio::test]
async fn malformed_codes_answer_400_naming_the_parameter_and_unknown_ones_404() {
    let app = loopback_app(&team_sim());
    let huge = format!("T{}", "9".repeat(10_000));
    for code in [
        "T12",
        "T0000002011",
        "t000000201",
        "X000000201",
        "T00000020x",
        "EA00000001",
        huge.as_str(),
    ] {
        let path = format!("/api/team_members/{code}");
        for request in [
            get(&path, TOKEN),
            put(&path, TOKEN, json!({"permissions": []})),
        ] {
            let message = call(&app, request).await.error(StatusCode::BAD_REQUEST);
            assert!(message.contains("`team_member_code`"), "{message}");
            assert!(message.len() < 200, "the message quotes a bounded part");
        }
    }
    // Not UTF-8 once percent-decoded: rejected by axum's path extractor, still as JSON.
    call(&app, get("/api/team_members/%FF", TOKEN))
        .await
        .error(StatusCode::BAD_REQUEST);
    for request in [
        get("/api/team_members/T999999999", TOKEN),
        put(
            "/api/team_members/T999999999",
            TOKEN,
            json!({"permissions": []}),
        ),
    ] {
        call(&app, request).await.error(StatusCode::NOT_FOUND);
    }
    call(&app, request(Method::GET, PATH, None, None))
        .await
        .error(StatusCode::UNAUTHORIZED);
    call(&app, mgmt(Method::DELETE, PATH, TOKEN, None))
        .await
        .error(StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn a_put_sets_the_permissions_and_the_password_and_answers_an_empty_204() {
    let sim = team_sim();
    let app = loopback_app(&sim);
    sim.clock().advance(Duration::from_secs(3600));
    let answer = call(
        &app,
        put(
            PATH,
            TOKEN,
            json!({
                "password": "s3cret-enough",
                "password_confirmation": "s3cret-enough",
                "permissions": ["email_accounts", "api", "email_accounts"],
            }),
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    assert!(answer.bytes.is_empty());
    let member = sim.team_member(MEMBER).expect("member");
    assert_eq!(member.permissions, ["email_accounts", "api"]);
    assert_eq!(member.password_changed_at, Some(ts("2026-11-22T11:00:00Z")));
    let record = call(&app, get(PATH, TOKEN)).await;
    assert_eq!(
        record.record()["permissions"],
        json!(["email_accounts", "api"])
    );
    assert_eq!(record.record()["updated_at"], "2026-11-22 11:00:00");
    assert!(!String::from_utf8_lossy(&record.bytes).contains("s3cret"));

    // Every member is optional: `[]` clears the permissions, the password is left alone.
    let answer = call(&app, put(PATH, TOKEN, json!({"permissions": []}))).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    let member = sim.team_member(MEMBER).expect("member");
    assert!(member.permissions.is_empty());
    assert_eq!(member.password_changed_at, Some(ts("2026-11-22T11:00:00Z")));

    // So is the body; `null` members count as absent.
    for body in [None, Some("{}"), Some("{\"permissions\": null}")] {
        let answer = call(
            &app,
            request(
                Method::PUT,
                PATH,
                Some((MANAGEMENT_TOKEN_HEADER, TOKEN.to_owned())),
                body,
            ),
        )
        .await;
        assert_eq!(answer.status, StatusCode::NO_CONTENT, "{body:?}");
    }
    assert!(
        sim.team_member(MEMBER)
            .expect("member")
            .permissions
            .is_empty()
    );
}

#[tokio::test]
async fn invalid_put_bodies_answer_400_without_echoing_the_password_and_change_nothing() {
    let sim = team_sim();
    let app = loopback_app(&sim);
    let before = sim.team_member_record(MEMBER);
    let pair = |password: &str| json!({"password": password, "password_confirmation": password});
    let too_many: Vec<String> = (0..=TEAM_MEMBER_MAX_PERMISSIONS)
        .map(|i| format!("p{i}"))
        .collect();
    for (body, needle) in [
        (pair("Ab1cdef"), "at least 8"),
        (pair("abcdefgh"), "number"),
        (pair("12345678"), "letter"),
        (
            pair(&format!("a1{}", "z".repeat(TEAM_MEMBER_PASSWORD_MAX_CHARS))),
            "at most",
        ),
        (
            json!({"password": "abcdefg1", "password_confirmation": "abcdefg2"}),
            "does not match",
        ),
        (json!({"password": "abcdefg1"}), "`password_confirmation`"),
        (
            json!({"password_confirmation": "abcdefg1"}),
            "`password_confirmation`",
        ),
        (json!({"password": 12345678}), "`password`"),
        (json!({"permissions": "api"}), "`permissions`"),
        (json!({"permissions": ["api", 1]}), "`permissions`"),
        (json!({"permissions": ["api", "two words"]}), "item 1"),
        (json!({"permissions": [""]}), "`permissions`"),
        (json!({"permissions": too_many}), "at most"),
        // Checked whole: a valid permission list is not applied beside a bad password.
        (
            json!({"permissions": ["api"], "password": "short1", "password_confirmation": "short1"}),
            "`password`",
        ),
    ] {
        let message = call(&app, put(PATH, TOKEN, body.clone()))
            .await
            .error(StatusCode::BAD_REQUEST);
        assert!(message.contains(needle), "{body}: {message}");
        for secret in ["Ab1cdef", "abcdefg1", "abcdefg2", "short1"] {
            assert!(!message.contains(secret), "{message}");
        }
    }
    let auth = || Some((MANAGEMENT_TOKEN_HEADER, TOKEN.to_owned()));
    for body in ["[1]", "{\"password\":", "\"abcdefg1\""] {
        call(&app, request(Method::PUT, PATH, auth(), Some(body)))
            .await
            .error(StatusCode::BAD_REQUEST);
    }
    let huge = format!("{{\"password\":\"{}\"}}", "a1".repeat(2 * 1024 * 1024));
    call(&app, request(Method::PUT, PATH, auth(), Some(&huge)))
        .await
        .error(StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(sim.team_member_record(MEMBER), before);
    assert_eq!(
        sim.team_member(MEMBER).and_then(|m| m.password_changed_at),
        None
    );
}

#[tokio::test]
async fn a_restricted_token_reads_team_members_but_may_not_change_them() {
    let sim = team_sim();
    let app = loopback_app(&sim);
    let record = call(&app, get(PATH, SCOPED)).await.record();
    assert_eq!(record["code"], MEMBER);
    let message = call(&app, put(PATH, SCOPED, json!({"permissions": ["api"]})))
        .await
        .error(StatusCode::FORBIDDEN);
    assert!(message.contains("restricted"), "{message}");
    // Scope is checked before existence, so a restricted token cannot probe for codes.
    call(
        &app,
        put(
            "/api/team_members/T999999999",
            SCOPED,
            json!({"permissions": []}),
        ),
    )
    .await
    .error(StatusCode::FORBIDDEN);
    assert_eq!(
        sim.team_member(MEMBER).expect("member").permissions,
        ["api", "delivery"]
    );
}

#[tokio::test]
async fn tests_change_add_and_remove_team_members_and_the_record_follows() {
    let sim = team_sim();
    let app = loopback_app(&sim);
    assert!(sim.update_team_member(OTHER, |m| {
        m.otp = true;
        m.api_access_blocked = true;
        m.enabled = false;
        m.allow_nets = vec!["2001:db8::/32".parse().expect("net")];
        m.is_customer_disabled = true;
    }));
    assert!(!sim.update_team_member("T999999999", |_| {}));
    let record = call(&app, get("/api/team_members/T000000202", TOKEN))
        .await
        .record();
    assert_eq!(record["otp"], true);
    assert_eq!(record["api_access_blocked"], true);
    assert_eq!(record["status"], "disabled");
    assert_eq!(record["allow_nets"], json!(["2001:db8::/32"]));
    assert_eq!(record["is_customer_disabled"], true);
    assert!(sim.update_team_member(OTHER, |m| m.allow_nets.clear()));
    assert_eq!(
        sim.team_member_record(OTHER).expect("record")["allow_nets"],
        json!([])
    );

    let added = TeamMember {
        code: "T000000203".into(),
        ..TeamMember::default()
    };
    sim.insert_team_member(&added).expect("a new code");
    assert!(
        sim.insert_team_member(&added).is_err(),
        "the same code again"
    );
    call(&app, get("/api/team_members/T000000203", TOKEN))
        .await
        .record();
    let state = call(&app, get("/_sim/state", TOKEN)).await.json();
    assert_eq!(state["team_members"].as_array().map(Vec::len), Some(3));

    assert!(sim.remove_team_member(OTHER));
    assert!(!sim.remove_team_member(OTHER));
    call(&app, get("/api/team_members/T000000202", TOKEN))
        .await
        .error(StatusCode::NOT_FOUND);
}

#[test]
fn bad_team_member_seeds_are_refused() {
    let mut duplicate = SimConfig {
        team_members: member_seeds(),
        ..config()
    };
    duplicate
        .team_members
        .push(duplicate.team_members[0].clone());
    let error = Simulator::try_new(duplicate).err().map(|e| e.to_string());
    assert!(error.is_some_and(|e| e.contains(MEMBER) && e.contains("twice")));
    let mut bad_code = SimConfig {
        team_members: member_seeds(),
        ..config()
    };
    bad_code.team_members[1].code = "T2".into();
    assert!(matches!(
        Simulator::try_new(bad_code),
        Err(SimConfigError::BadTeamMember { .. })
    ));
}

#[tokio::test]
async fn team_member_routes_sit_behind_their_faults_targeted_by_code() {
    let sim = team_sim();
    let app = loopback_app(&sim);
    for route in [Route::TeamMemberGet, Route::TeamMemberPut] {
        sim.set_fault(
            route,
            FaultSpec {
                error_rate: 1.0,
                error_status: Some(503),
                only_ids: Some(vec![MEMBER.into()]),
                ..FaultSpec::default()
            },
        );
    }
    call(&app, get(PATH, TOKEN))
        .await
        .error(StatusCode::SERVICE_UNAVAILABLE);
    call(&app, put(PATH, TOKEN, json!({})))
        .await
        .error(StatusCode::SERVICE_UNAVAILABLE);
    call(&app, get("/api/team_members/T000000202", TOKEN))
        .await
        .record();
    sim.clear_faults();
    sim.set_fault(
        Route::TeamMemberGet,
        FaultSpec {
            body: Some(BodyFault::EmptyResources),
            ..FaultSpec::default()
        },
    );
    let body = call(&app, get(PATH, TOKEN)).await.json();
    assert_eq!(body["resources"], json!([]));
    let answer = call(
        &app,
        mgmt(
            Method::PUT,
            "/_sim/faults/team_member_put",
            TOKEN,
            Some(json!({"error_rate": 1.0})),
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
    call(&app, put(PATH, TOKEN, json!({})))
        .await
        .error(StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(sim.hits(PATH), 4);
}

#[tokio::test(start_paused = true)]
async fn team_member_routes_are_rate_limited_like_every_management_route() {
    let sim = team_sim();
    let app = loopback_app(&sim);
    sim.set_rate_limit(
        Some(TOKEN),
        Some(RateLimit {
            burst: Some(2.0),
            ..RateLimit::per_second(1.0)
        }),
    )
    .expect("valid limit");
    call(&app, get(PATH, TOKEN)).await.record();
    let answer = call(&app, put(PATH, TOKEN, json!({}))).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    for request in [get(PATH, TOKEN), put(PATH, TOKEN, json!({}))] {
        call(&app, request)
            .await
            .error(StatusCode::TOO_MANY_REQUESTS);
    }
    let stats = sim.rate_limit_stats(TOKEN).expect("limited");
    assert_eq!((stats.allowed, stats.limited), (2, 2));
}
