//! Migration statistics over time, and migration code checks.

use crate::helpers::*;

#[tokio::test]
async fn a_migration_progresses_with_the_clock_and_completes() {
    let sim = hosting_sim();
    let app = loopback_app(&sim);
    let path = "/api/migrations/MG00000007/stats";
    let aggregate = |body: Value| body["aggregate"].clone();
    let pending = aggregate(call(&app, get(path, TOKEN)).await.json());
    assert_eq!(pending["status"], "pending");
    assert_eq!(pending["messages"]["migrated"], 0);
    assert_eq!(pending["finished_at"], Value::Null);

    sim.clock().advance(Duration::from_secs(11 * 60));
    let running = aggregate(call(&app, get(path, TOKEN)).await.json());
    assert_eq!(running["status"], "running");
    assert_eq!(running["started_at"], "2026-11-22 07:01:00");
    assert_eq!(running["updated_at"], "2026-11-22 07:11:00");
    assert_eq!(
        running["accounts"],
        json!({"total": 3, "pending": 0, "running": 3, "completed": 0, "failed": 0})
    );
    let migrated = running["messages"]["migrated"].as_i64().expect("migrated");
    // Three lanes of 33.3 messages a minute, each rounded down.
    assert_eq!(migrated, 999);
    assert_eq!(running["bytes"]["migrated"], 999_000);
    assert_eq!(running["throughput"]["messages_per_minute"], 100);

    sim.clock().advance(Duration::from_secs(6 * 60));
    let later = aggregate(call(&app, get(path, TOKEN)).await.json());
    assert_eq!(later["accounts"]["failed"], 1);
    assert!(later["errors"].as_i64().expect("errors") >= 1);
    assert!(later["messages"]["migrated"].as_i64() > Some(migrated));

    sim.clock().advance(Duration::from_secs(3600));
    let done = aggregate(call(&app, get(path, TOKEN)).await.json());
    assert_eq!(done["status"], "completed");
    assert_eq!(done["accounts"]["completed"], 2);
    assert_eq!(done["messages"]["migrated"], 2500);
    assert_eq!(done["finished_at"], "2026-11-22 07:31:00");
    assert_eq!(
        Some(done.clone()),
        sim.migration_stats("MG00000007").map(aggregate)
    );
    assert!(sim.migration_stats("MG99999999").is_none());
}

#[tokio::test]
async fn migration_codes_are_checked_and_unknown_ones_answer_404() {
    let app = loopback_app(&hosting_sim());
    for code in ["MG1", "mg00000007", "XX00000007", "MG000000070"] {
        let message = call(&app, get(&format!("/api/migrations/{code}/stats"), TOKEN))
            .await
            .error(StatusCode::BAD_REQUEST);
        assert!(message.contains("`migration_code`"), "{message}");
    }
    call(&app, get("/api/migrations/MG00000008/stats", TOKEN))
        .await
        .error(StatusCode::NOT_FOUND);
    call(
        &app,
        request(Method::GET, "/api/migrations/MG00000007/stats", None, None),
    )
    .await
    .error(StatusCode::UNAUTHORIZED);
    // Migrations are not Delivery accounts: a scoped token reads them too.
    let answer = call(&app, get("/api/migrations/MG00000007/stats", SCOPED)).await;
    assert_eq!(answer.status, StatusCode::OK);
}
