//! The Helm chart `deploy/helm/mailhost-exporter`, checked as the kustomize manifests are:
//! `helm lint --strict` (with its values schema biting on bad values), `helm template` with the
//! default and a tenant fleet's values, the rendered objects against Kubernetes' and the
//! prometheus-operator's schemas, the rules inside through promtool, the dashboards and rules
//! it carries equal to the shipped ones, the configs and arguments it renders through
//! `--config.check`, the pod as locked down as the kustomize base's, and the storage directory
//! on an emptyDir or a claim as the base and its persistent overlay have it.

use std::path::Path;
use std::process::Command;

use serde_yaml_ng::{Mapping, Value};

use crate::helpers::{outcome, promtool, repo_root, run_with_input, tool};
use crate::kubernetes::{
    BASE, INSTALL, SECRET_DIR, STORAGE_DIR, config_check_args, named, object, operator_objects,
    relabel_as_the_fleet_example, seq, storage_volume, str_of,
};

const CHART: &str = "deploy/helm/mailhost-exporter";
const FLEET: &str = "tests/fixtures/helm/fleet-values.yaml";
const PERSISTENT: &str = "deploy/kubernetes/overlays/persistent";

fn helm() -> Option<&'static str> {
    tool("helm", INSTALL)
}

/// `helm ARGS` in the repository; its success and output.
fn run_helm(helm: &str, args: &[&str]) -> (bool, String) {
    outcome(Command::new(helm).args(args).current_dir(repo_root()))
}

/// Every object `helm template` renders with `values` (a file; none for the defaults).
fn template(helm: &str, values: Option<&str>) -> Vec<Value> {
    match values {
        Some(values) => template_with(helm, &["--values", values]),
        None => template_with(helm, &[]),
    }
}

/// `helm template` with these further arguments (`--values`, `--set`): its output and
/// standard error.
fn run_template(helm: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["template", "mailhost", CHART, "--namespace", "mailhost"];
    args.extend(extra);
    Command::new(helm)
        .args(&args)
        .current_dir(repo_root())
        .output()
        .unwrap()
}

/// Every object `helm template` renders with these further arguments (`--values`, `--set`).
fn template_with(helm: &str, extra: &[&str]) -> Vec<Value> {
    let out = run_template(helm, extra);
    assert!(
        out.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .split("\n---")
        .filter(|doc| doc.lines().any(|l| l.starts_with("kind:")))
        .map(|doc| serde_yaml_ng::from_str(doc).unwrap_or_else(|e| panic!("{e}\n{doc}")))
        .collect()
}

fn kinds(objects: &[Value]) -> Vec<&str> {
    let mut kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    kinds.sort_unstable();
    kinds
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn helm_lints_the_chart_and_its_values_schema_refuses_bad_values() {
    let Some(helm) = helm() else { return };
    for values in [None, Some(FLEET)] {
        let mut args = vec!["lint", "--strict", CHART];
        if let Some(v) = values {
            args.extend(["--values", v]);
        }
        let (ok, report) = run_helm(helm, &args);
        assert!(ok, "{values:?}: {report}");
    }
    for (set, named) in [
        ("replicaCount=-1", "replicaCount"),
        ("service.type=Internal", "service.type"),
        ("serviceMonitor.interval=soon", "serviceMonitor.interval"),
        ("image.pullPolicy=Sometimes", "image.pullPolicy"),
        ("config=", "config"),
        ("extraArgs[0]=oops", "extraArgs"),
        ("unknownKey=1", "unknownKey"),
        ("storage.path=var/lib/state", "storage.path"),
        (
            "storage.checkpointInterval=2h",
            "storage.checkpointInterval",
        ),
        ("storage.emptyDir.medium=Memory", "medium"),
        (
            "persistence.accessModes[0]=ReadOnlyMany",
            "persistence.accessModes",
        ),
        ("persistence.size=plenty", "persistence.size"),
    ] {
        let (ok, report) = run_helm(helm, &["lint", CHART, "--set", set]);
        assert!(!ok, "{set} should be refused: {report}");
        assert!(report.contains(named), "{set}: {report}");
    }
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn default_and_fleet_renders_fit_the_kubernetes_and_operator_schemas() {
    let Some(helm) = helm() else { return };
    let default = template(helm, None);
    assert_eq!(
        kinds(&default),
        ["ConfigMap", "Deployment", "Secret", "Service"]
    );
    let fleet = template(helm, Some(FLEET));
    assert_eq!(
        kinds(&fleet),
        [
            "ConfigMap",
            "ConfigMap",
            "ConfigMap",
            "ConfigMap",
            "ConfigMap",
            "Deployment",
            "PersistentVolumeClaim",
            "PrometheusRule",
            "ScrapeConfig",
            "Secret",
            "Service",
            "ServiceMonitor"
        ]
    );
    if let Some(validate) = tool("kubernetes-validate", INSTALL) {
        let tmp = tempfile::tempdir().unwrap();
        for (name, objects) in [("default.yml", &default), ("fleet.yml", &fleet)] {
            let core: Vec<String> = objects
                .iter()
                .filter(|o| {
                    !o["apiVersion"]
                        .as_str()
                        .unwrap()
                        .starts_with("monitoring.coreos.com/")
                })
                .map(|o| serde_yaml_ng::to_string(o).unwrap())
                .collect();
            let path = tmp.path().join(name);
            std::fs::write(&path, core.join("---\n")).unwrap();
            let (ok, report) = outcome(
                Command::new(validate)
                    .args(["--strict", "--no-warn"])
                    .arg(&path),
            );
            assert!(ok, "{name}:\n{report}");
            assert_eq!(
                report.matches(" passed for resource ").count(),
                core.len(),
                "{report}"
            );
        }
    }
    if let Some(validator) = tool("validate-prometheus-operator", INSTALL) {
        let operator = operator_objects(&fleet);
        assert_eq!(operator.len(), 3);
        let (ok, report) =
            run_with_input(validator, &[], &serde_json::to_string(&operator).unwrap());
        assert!(ok, "{report}");
    }
}

/// The chart's pod runs as the kustomize base's: the same security contexts, probes, mounts and
/// resources, no service-account token.
#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn the_chart_runs_the_pod_as_locked_down_as_the_kustomize_base() {
    let Some(helm) = helm() else { return };
    let Some(kubectl) = tool("kubectl", INSTALL) else {
        return;
    };
    let (chart_objects, base_objects) = (
        template(helm, None),
        crate::kubernetes::render(kubectl, BASE),
    );
    let pod =
        |objects: &[Value]| object(objects, "Deployment", None)["spec"]["template"]["spec"].clone();
    let (chart, base) = (pod(&chart_objects), pod(&base_objects));
    for key in [
        "securityContext",
        "automountServiceAccountToken",
        "enableServiceLinks",
    ] {
        assert_eq!(chart[key], base[key], "{key}");
    }
    let (c, b) = (&chart["containers"][0], &base["containers"][0]);
    for key in [
        "securityContext",
        "livenessProbe",
        "readinessProbe",
        "resources",
        "volumeMounts",
        "ports",
        "args",
    ] {
        assert_eq!(c[key], b[key], "container {key}");
    }
    assert_eq!(
        chart["volumes"][1]["secret"]["defaultMode"],
        base["volumes"][1]["secret"]["defaultMode"]
    );
    // The storage directory: the same emptyDir, and both rolled as Kubernetes rolls by default.
    assert_eq!(
        named(&chart["volumes"], "storage"),
        named(&base["volumes"], "storage")
    );
    let strategy =
        |objects: &[Value]| object(objects, "Deployment", None)["spec"]["strategy"].clone();
    assert_eq!(strategy(&chart_objects), strategy(&base_objects));

    // With persistence, as the persistent overlay: the same claim and the pod recreated.
    let chart = template_with(helm, &["--set", "persistence.enabled=true"]);
    let overlay = crate::kubernetes::render(kubectl, PERSISTENT);
    assert_eq!(strategy(&chart), strategy(&overlay));
    let claim = |objects: &[Value]| object(objects, "PersistentVolumeClaim", None)["spec"].clone();
    assert_eq!(claim(&chart), claim(&overlay));
    for objects in [&chart, &overlay] {
        assert_eq!(
            named(&pod(objects)["volumes"], "storage")["persistentVolumeClaim"]["claimName"],
            object(objects, "PersistentVolumeClaim", None)["metadata"]["name"]
        );
    }
    let (c, o) = (
        &pod(&chart)["containers"][0],
        &pod(&overlay)["containers"][0],
    );
    for key in ["volumeMounts", "args"] {
        assert_eq!(c[key], o[key], "persistent: container {key}");
    }
}

/// The storage directory as users run it: by default an emptyDir (it outlives the container,
/// not the pod) with both flags; with persistence a claim the chart makes, or one given, and
/// the pod recreated, never rolled; without storage, no flag and no volume. Persistence with
/// more than one replica, or without storage, is refused naming the values and what to do.
#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn the_storage_directory_is_an_empty_dir_by_default_and_a_claim_recreated_never_rolled() {
    let Some(helm) = helm() else { return };
    let set = |values: &str| template_with(helm, &["--set", values]);
    // A render's Deployment and storage volume, its flags and mount checked on the way.
    let storage = |objects: &[Value], path: &str, interval: &str| {
        let d = object(objects, "Deployment", None).clone();
        let volume = storage_volume(&d["spec"]["template"]["spec"], path, interval).clone();
        (d, volume)
    };
    let claims = |objects: &[Value]| {
        objects
            .iter()
            .filter(|o| o["kind"] == "PersistentVolumeClaim")
            .count()
    };

    let default = template(helm, None);
    let (d, volume) = storage(&default, STORAGE_DIR, "1m");
    assert_eq!(volume["emptyDir"]["sizeLimit"], "1Gi");
    assert!(d["spec"]["strategy"].is_null(), "{d:?}");
    assert_eq!(claims(&default), 0);

    let own = set("storage.path=/data/exporter,storage.checkpointInterval=30s");
    let (_, volume) = storage(&own, "/data/exporter", "30s");
    assert_eq!(volume["emptyDir"]["sizeLimit"], "1Gi");

    let made = set("persistence.enabled=true");
    let (d, volume) = storage(&made, STORAGE_DIR, "1m");
    let claim = object(&made, "PersistentVolumeClaim", None);
    assert_eq!(
        claim["metadata"]["name"],
        "mailhost-mailhost-exporter-storage"
    );
    assert_eq!(
        volume["persistentVolumeClaim"]["claimName"],
        claim["metadata"]["name"]
    );
    assert!(volume["emptyDir"].is_null(), "{volume:?}");
    assert_eq!(d["spec"]["strategy"]["type"], "Recreate");
    assert_eq!(
        claim["spec"]["accessModes"],
        Value::Sequence(vec!["ReadWriteOnce".into()])
    );
    assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "1Gi");
    // No class named: the cluster's default.
    assert!(claim["spec"]["storageClassName"].is_null(), "{claim:?}");

    let given = set("persistence.enabled=true,persistence.existingClaim=mailhost-state");
    let (d, volume) = storage(&given, STORAGE_DIR, "1m");
    assert_eq!(
        volume["persistentVolumeClaim"]["claimName"],
        "mailhost-state"
    );
    assert_eq!(d["spec"]["strategy"]["type"], "Recreate");
    assert_eq!(claims(&given), 0);

    for (class, rendered) in [("fast-ssd", "fast-ssd"), ("-", "")] {
        let objects = set(&format!(
            "persistence.enabled=true,persistence.storageClassName={class},persistence.annotations.helm\\.sh/resource-policy=keep,persistence.size=5Gi,persistence.accessModes[0]=ReadWriteOncePod"
        ));
        let claim = object(&objects, "PersistentVolumeClaim", None);
        assert_eq!(claim["spec"]["storageClassName"], rendered, "{class}");
        assert_eq!(
            claim["metadata"]["annotations"]["helm.sh/resource-policy"],
            "keep"
        );
        assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "5Gi");
        assert_eq!(
            claim["spec"]["accessModes"],
            Value::Sequence(vec!["ReadWriteOncePod".into()])
        );
    }

    let off = set("storage.enabled=false");
    let pod = &object(&off, "Deployment", None)["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["args"],
        Value::Sequence(vec![
            "--config.file=/etc/mailhost_exporter/config.yml".into()
        ])
    );
    for list in [&pod["volumes"], &pod["containers"][0]["volumeMounts"]] {
        assert!(!seq(list, "list").iter().any(|v| v["name"] == "storage"));
    }
    assert_eq!(claims(&off), 0);

    for (values, words) in [
        (
            "persistence.enabled=true,replicaCount=2",
            [
                "persistence.enabled with replicaCount=2",
                "one release per --shard",
            ],
        ),
        (
            "persistence.enabled=true,storage.enabled=false",
            ["persistence.enabled", "set storage.enabled=true"],
        ),
    ] {
        let out = run_template(helm, &["--set", values]);
        let report = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{values} should be refused");
        for word in words {
            assert!(report.contains(word), "{values}: {report}");
        }
    }
    // One replica with persistence, or several without it (an emptyDir each), are fine.
    set("persistence.enabled=true,replicaCount=1");
    set("replicaCount=2");
}

/// The rules and dashboards the chart carries are the shipped ones; its PrometheusRule holds
/// their groups, which promtool loads; one ConfigMap per dashboard, labelled for Grafana's
/// sidecar; the ServiceMonitor names the job the rules select.
#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn the_rules_and_dashboards_inside_are_the_shipped_ones() {
    let root = repo_root();
    let same = |shipped: &Path, copy: &Path| {
        assert_eq!(
            std::fs::read(shipped).unwrap(),
            std::fs::read(copy).unwrap(),
            "{} differs from {}: run mixin/build.sh",
            copy.display(),
            shipped.display()
        );
    };
    for file in ["rules.yml", "alerts.yml"] {
        same(
            &root.join("prometheus").join(file),
            &root.join(CHART).join("files").join(file),
        );
    }
    let mut dashboards = 0;
    for entry in std::fs::read_dir(root.join("dashboards")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap();
        same(&path, &root.join(CHART).join("files/dashboards").join(name));
        dashboards += 1;
    }
    let Some(helm) = helm() else { return };
    let fleet = template(helm, Some(FLEET));
    let maps: Vec<&Value> = fleet
        .iter()
        .filter(|o| o["kind"] == "ConfigMap" && o["metadata"]["labels"]["grafana_dashboard"] == "1")
        .collect();
    assert_eq!(maps.len(), dashboards);
    for map in maps {
        let (file, json) = map["data"].as_mapping().unwrap().iter().next().unwrap();
        let shipped =
            std::fs::read_to_string(root.join("dashboards").join(file.as_str().unwrap())).unwrap();
        assert_eq!(json.as_str().unwrap().trim_end(), shipped.trim_end());
    }
    let rule = object(&fleet, "PrometheusRule", None);
    let mut groups = Vec::new();
    for file in ["prometheus/rules.yml", "prometheus/alerts.yml"] {
        let shipped: Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(root.join(file)).unwrap()).unwrap();
        groups.extend(seq(&shipped["groups"], file).iter().cloned());
    }
    assert_eq!(seq(&rule["spec"]["groups"], "groups"), groups.as_slice());
    let monitor = object(&fleet, "ServiceMonitor", None);
    assert_eq!(
        monitor["spec"]["endpoints"][0]["relabelings"][0],
        serde_yaml_ng::from_str::<Value>("{targetLabel: job, replacement: mailhost}").unwrap()
    );
    if let Some(promtool) = promtool() {
        let tmp = tempfile::tempdir().unwrap();
        let mut file = Mapping::new();
        file.insert("groups".into(), rule["spec"]["groups"].clone());
        let path = tmp.path().join("groups.yml");
        std::fs::write(&path, serde_yaml_ng::to_string(&file).unwrap()).unwrap();
        let (ok, report) = outcome(
            Command::new(promtool)
                .args(["check", "rules", "--lint=all", "--lint-fatal"])
                .arg(&path),
        );
        assert!(ok, "{report}");
    }
}

/// The config each render carries passes `--config.check` with its token files where the
/// chart mounts the Secret, and the Secret holds a key for each of them.
#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn the_rendered_configs_pass_config_check_with_the_mounted_tokens() {
    let Some(helm) = helm() else { return };
    for values in [None, Some(FLEET)] {
        let objects = template(helm, values);
        let map = objects
            .iter()
            .find(|o| o["kind"] == "ConfigMap" && o["data"]["config.yml"].is_string())
            .unwrap();
        let text = str_of(&map["data"]["config.yml"], "config.yml");
        let config: Value = serde_yaml_ng::from_str(text).unwrap();
        let token_files: Vec<&str> = match config["tenants"].as_sequence() {
            Some(tenants) => tenants
                .iter()
                .map(|t| str_of(&t["token_file"], "token_file"))
                .collect(),
            None => vec![str_of(&config["api"]["token_file"], "token_file")],
        };
        let secret = object(&objects, "Secret", None);
        let tmp = tempfile::tempdir().unwrap();
        for file in &token_files {
            let key = file.strip_prefix(SECRET_DIR).unwrap();
            if values.is_some() {
                assert!(secret["stringData"][key].is_string(), "no token {key}");
            }
            std::fs::write(tmp.path().join(key), "a-token\n").unwrap();
        }
        let local = text.replace(SECRET_DIR, &format!("{}/", tmp.path().display()));
        let path = tmp.path().join("config.yml");
        std::fs::write(&path, local).unwrap();
        // With the container's own arguments, so that the binary parses every flag rendered
        // (the storage flags, the fleet's extraArgs).
        let container =
            &object(&objects, "Deployment", None)["spec"]["template"]["spec"]["containers"][0];
        let (ok, report) = outcome(
            Command::new(env!("CARGO_BIN_EXE_mailhost_exporter"))
                .args(config_check_args(
                    container,
                    &path,
                    &tmp.path().join("storage"),
                ))
                .env_remove("MAILHOST_API_TOKEN"),
        );
        assert!(ok, "{values:?}: {report}");
        // The ScrapeConfig of the fleet reads /sd from the Service, in the release namespace,
        // and both jobs relabel as examples/prometheus/fleet.yml (which the end-to-end alert
        // test runs): probe targets under the job the rules select, /metrics without the
        // accounts' copies.
        if values.is_some() {
            let scrape = object(&objects, "ScrapeConfig", None);
            assert_eq!(
                scrape["spec"]["httpSDConfigs"][0]["url"],
                "http://mailhost-mailhost-exporter.mailhost.svc:19587/sd"
            );
            relabel_as_the_fleet_example(&objects);
        }
    }
    // Without probe targets, /metrics is the only copy of each account: nothing is dropped.
    let single = template_with(helm, &["--set", "serviceMonitor.enabled=true"]);
    let monitor = object(&single, "ServiceMonitor", None);
    assert!(
        monitor["spec"]["endpoints"][0]["metricRelabelings"].is_null(),
        "{monitor:?}"
    );
}
