//! The store's tests: what the snapshot holds and renders as runs hand their results over.

use super::*;

use crate::collectors::delivery_account::fixtures::answered;
use crate::engine::spec::fixtures::accounts;

fn spec() -> CollectorSpec {
    accounts(&[1, 2], Duration::from_secs(10))
}

#[test]
fn the_prepared_gzip_of_each_format_holds_its_body_as_one_member_per_section() {
    use std::io::Read as _;
    let mut s = Snapshot::default();
    let t0 = Timestamp::from_second(1_000_000).unwrap();
    s.apply_run(&spec(), answered(&[(1, 5.0), (2, 6.0)]), Duration::ZERO, t0);
    let prepared = Prepared::render(s);
    for format in [Format::Classic, Format::OpenMetrics] {
        let body = prepared.body(format);
        assert!(body.len() > 100);
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&prepared.gzip(format)[..])
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(&out[..], &body[..]);
    }
    assert_ne!(
        prepared.body(Format::Classic),
        prepared.body(Format::OpenMetrics)
    );
}

#[test]
fn a_body_past_the_kept_size_is_kept_only_gzipped_and_reads_back_whole() {
    let encode = |last: Option<&Encoded>, pieces: &[&str]| {
        let mut out = Output::sized_like(last);
        for p in pieces {
            out.write(p);
        }
        out.finish()
    };
    let small = encode(None, &["x 1\n"]);
    assert_eq!(small.identity.as_deref(), Some(&b"x 1\n"[..]));
    let line = "mailhost_delivery_remaining_messages{account_id=\"100001\"} 5.0\n";
    let lines = MAX_KEPT_IDENTITY_BYTES / line.len() + 1;
    let big: String = line.repeat(lines);
    let encoded = encode(None, &vec![line; lines]);
    assert!(encoded.identity.is_none());
    assert_eq!(encoded.identity_len, big.len() as u64);
    assert!(encoded.gzip.len() < big.len() / 10);
    assert_eq!(encoded.plain(), big.as_bytes());
    // Sized after the last rendering: the same bodies either way, whatever the last was.
    for last in [&small, &encoded] {
        let again = encode(Some(last), &vec![line; lines]);
        assert!(again.identity.is_none());
        assert_eq!(again.plain(), big.as_bytes());
        let shrunk = encode(Some(last), &["x 1\n"]);
        assert_eq!(shrunk.plain(), &b"x 1\n"[..]);
    }
    // A body past the bound last time is not kept this time, however small it became: the
    // scrape inflates it, the same bytes.
    assert!(encode(Some(&encoded), &["x 1\n"]).identity.is_none());
    assert!(encode(Some(&small), &["x 1\n"]).identity.is_some());
}

/// Applies the end of a run of `spec` that took no time, in which the accounts answered `values`.
fn ran(store: &Store, spec: &CollectorSpec, values: &[(i32, f64)]) {
    store.apply(vec![Handoff::End(Finished {
        spec: spec.clone(),
        results: answered(values),
        duration: Duration::ZERO,
        urgent: false,
    })]);
}

/// Whether `before` and `after` share the rendering of `section`.
fn shared(before: &Prepared, after: &Prepared, section: Section) -> bool {
    let of = |p: &Prepared| {
        p.sections
            .iter()
            .find(|(s, _)| *s == section)
            .unwrap()
            .1
            .clone()
    };
    Arc::ptr_eq(&of(before), &of(after))
}

/// A store of two tenants' collectors, the second of a tenant named `gone`.
fn kept_and_gone() -> (CollectorSpec, CollectorSpec, Arc<Store>) {
    let kept = spec();
    let gone = CollectorSpec::new(
        crate::tenant::TenantName::parse("gone").unwrap(),
        kept.collector.clone(),
    );
    let store = Store::new(&[kept.clone(), gone.clone()]);
    (kept, gone, store)
}

#[test]
fn a_run_of_a_collector_a_reload_removed_brings_nothing_back() {
    let (kept, gone, store) = kept_and_gone();
    ran(&store, &gone, &[(1, 5.0)]);
    let tenant = |store: &Store| store.classic_text().contains("tenant=\"gone\"");
    assert!(tenant(&store));
    store.reconfigure(std::slice::from_ref(&kept));
    assert!(!tenant(&store));
    // The run that ended before its collector was stopped, applied after the reload.
    ran(&store, &gone, &[(1, 6.0)]);
    assert!(!tenant(&store));
    assert!(!store.lock().collectors.contains_key(&gone.key()));
    // The collector still configured goes on.
    ran(&store, &kept, &[(1, 7.0)]);
    let body = store.classic_text();
    assert!(body.contains(" 7"), "{body:?}");
}

#[test]
fn a_part_of_a_run_is_published_at_once_and_one_of_a_collector_a_reload_removed_is_dropped() {
    let (kept, gone, store) = kept_and_gone();
    let part = |spec: &CollectorSpec, left| {
        Handoff::Part(RunPart {
            spec: spec.clone(),
            results: answered(&[(1, left)]),
        })
    };
    store.apply(vec![part(&kept, 5.0)]);
    let shown = store.classic_text();
    assert!(
        shown.contains("mailhost_delivery_remaining_messages{account_id=\"1\"} 5"),
        "{shown}"
    );
    assert!(
        !shown.contains("mailhost_collector_duration_seconds{"),
        "the run's own series wait for its end:\n{shown}"
    );
    // A part the collector of a removed tenant handed over before it was stopped, applied
    // after the reload: dropped, as a run's end would be.
    store.reconfigure(std::slice::from_ref(&kept));
    store.apply(vec![part(&gone, 6.0)]);
    assert!(!store.classic_text().contains("tenant=\"gone\""));
    assert!(!store.lock().collectors.contains_key(&gone.key()));
}

#[test]
fn a_restart_is_counted_from_zero_published_at_once_and_leaves_with_its_tenant() {
    let (kept, gone, store) = kept_and_gone();
    let kept_line = "mailhost_collector_restarts_total{collector=\"delivery_account\"}";
    let gone_line =
        "mailhost_collector_restarts_total{tenant=\"gone\",collector=\"delivery_account\"}";
    let shown = store.classic_text();
    assert!(shown.contains("# TYPE mailhost_collector_restarts_total counter\n"));
    assert!(shown.contains(&format!("{kept_line} 0\n")), "{shown}");
    assert!(shown.contains(&format!("{gone_line} 0\n")), "{shown}");
    let before = store.prepared();
    store.restarted(&gone.key());
    let shown = store.classic_text();
    assert!(shown.contains(&format!("{gone_line} 1\n")), "{shown}");
    assert!(shown.contains(&format!("{kept_line} 0\n")), "{shown}");
    // Only the health section is rendered again.
    let after = store.prepared();
    assert!(shared(&before, &after, Section::Collector(gone.name)));
    // A collector whose loop panicked before its first run ended does not hold readiness
    // back; one that has not run yet still does.
    assert!(!store.prepared().snapshot.ready());
    ran(&store, &kept, &[(1, 5.0)]);
    assert!(store.prepared().snapshot.ready());
    // Gone with its tenant, and a late restart of its loop brings nothing back.
    store.reconfigure(std::slice::from_ref(&kept));
    store.restarted(&gone.key());
    let shown = store.classic_text();
    assert!(!shown.contains("tenant=\"gone\""), "{shown}");
    assert!(shown.contains(&format!("{kept_line} 0\n")), "{shown}");
}

#[test]
fn a_run_renders_its_own_section_and_the_health_one_and_shares_the_rest() {
    let delivery = spec();
    // Any second collector will do: only its name keys its section.
    let migration = CollectorSpec::new(
        crate::tenant::TenantName::default(),
        crate::engine::spec::Collector::Migration(Arc::new(crate::collectors::Configured {
            schedule: delivery.schedule,
            settings: Arc::new(()),
            targets: vec!["MG1".into()],
        })),
    );
    let store = Store::new(&[delivery.clone(), migration.clone()]);
    let before = store.prepared();
    ran(&store, &delivery, &[(1, 5.0)]);
    let after = store.prepared();
    assert!(shared(&before, &after, Section::Collector(migration.name)));
    assert!(!shared(&before, &after, Section::Collector(delivery.name)));
    assert!(!shared(&before, &after, Section::Health));
    // What is shared is what a full render gives.
    let fresh = Prepared::render((*after.snapshot).clone());
    assert_eq!(after.body(Format::Classic), fresh.body(Format::Classic));
    assert_eq!(
        after.body(Format::OpenMetrics),
        fresh.body(Format::OpenMetrics)
    );
}
