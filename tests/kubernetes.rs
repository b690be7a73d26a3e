//! The Kubernetes manifests under `deploy/kubernetes`: rendered by `kubectl kustomize`, checked
//! against the prometheus-operator CRD schemas and Kubernetes' own schemas (both fetched from
//! package registries by `.ci/kubernetes-tools`), the rules through promtool, and the settings
//! an operator relies on (locked-down pod, probes, token file, config, storage directory)
//! asserted one by one.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_yaml_ng::{Mapping, Value};

use crate::helpers::{promtool, repo_root, run_with_input, tool};

pub(crate) const INSTALL: &str = "bash .ci/kubernetes-tools";
pub(crate) const BASE: &str = "deploy/kubernetes/base";
const PROBE: &str = "deploy/kubernetes/overlays/probe";
const PERSISTENT: &str = "deploy/kubernetes/overlays/persistent";
/// Where the Deployment mounts the token Secret; every `token_file` must lie under it.
pub(crate) const SECRET_DIR: &str = "/run/secrets/mailhost/";
/// Where the Deployment mounts the storage directory (`--storage.path`), as the Dockerfile's
/// example does.
pub(crate) const STORAGE_DIR: &str = "/var/lib/mailhost_exporter";

fn kubectl() -> Option<&'static str> {
    tool("kubectl", INSTALL)
}

/// Every object `kubectl kustomize DIR` renders.
pub(crate) fn render(kubectl: &str, dir: &str) -> Vec<Value> {
    let out = Command::new(kubectl)
        .args(["kustomize", dir])
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl kustomize {dir}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    text.split("\n---\n")
        .map(|doc| serde_yaml_ng::from_str(doc).unwrap_or_else(|e| panic!("{dir}: {e}\n{doc}")))
        .collect()
}

/// The one object of `kind` (and `name`, when several share the kind).
pub(crate) fn object<'a>(objects: &'a [Value], kind: &str, name: Option<&str>) -> &'a Value {
    let found: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == kind && name.is_none_or(|n| o["metadata"]["name"] == n))
        .collect();
    assert_eq!(found.len(), 1, "one {kind} {name:?} expected");
    found[0]
}

pub(crate) fn str_of<'a>(value: &'a Value, what: &str) -> &'a str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {value:?}"))
}

pub(crate) fn seq<'a>(value: &'a Value, what: &str) -> &'a [Value] {
    value
        .as_sequence()
        .unwrap_or_else(|| panic!("{what} is not a list: {value:?}"))
}

fn kinds(objects: &[Value]) -> BTreeSet<String> {
    objects
        .iter()
        .map(|o| str_of(&o["kind"], "kind").to_owned())
        .collect()
}

/// The entry called `name` of a list of named entries (volumes, volume mounts).
pub(crate) fn named<'a>(list: &'a Value, name: &str) -> &'a Value {
    seq(list, "list")
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {list:?}"))
}

/// The container's arguments as this machine runs them, after `--config.check`: the config
/// file and the storage directory where the test put them, every other flag as rendered, so
/// that the binary's own parser judges each flag's name and value.
pub(crate) fn config_check_args(container: &Value, config: &Path, storage: &Path) -> Vec<String> {
    let mut out = vec!["--config.check".to_owned()];
    for arg in seq(&container["args"], "args") {
        let arg = str_of(arg, "arg");
        out.push(if arg.starts_with("--config.file=") {
            format!("--config.file={}", config.display())
        } else if arg.starts_with("--storage.path=") {
            format!("--storage.path={}", storage.display())
        } else {
            arg.to_owned()
        });
    }
    out
}

/// The storage directory of a rendered pod: both flags (`path`, `interval`), the volume
/// mounted writable at `path` (the pod's only writable place), and that volume.
pub(crate) fn storage_volume<'a>(pod: &'a Value, path: &str, interval: &str) -> &'a Value {
    let c = &pod["containers"][0];
    let mount = named(&c["volumeMounts"], "storage");
    assert_eq!(mount["mountPath"], path);
    assert!(mount["readOnly"].is_null(), "{mount:?}");
    assert!(mount["subPath"].is_null(), "{mount:?}");
    let args = seq(&c["args"], "args");
    for flag in [
        format!("--storage.path={path}"),
        format!("--storage.checkpoint-interval={interval}"),
    ] {
        assert!(args.contains(&flag.as_str().into()), "{flag} in {args:?}");
    }
    named(&pod["volumes"], "storage")
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn kustomize_renders_the_base_and_the_probe_overlay() {
    let Some(kubectl) = kubectl() else { return };
    let base = render(kubectl, BASE);
    assert_eq!(
        kinds(&base),
        [
            "ConfigMap",
            "Deployment",
            "PrometheusRule",
            "Service",
            "ServiceMonitor"
        ]
        .map(String::from)
        .into(),
    );
    let probe = render(kubectl, PROBE);
    assert_eq!(
        kinds(&probe),
        [
            "ConfigMap",
            "Deployment",
            "PrometheusRule",
            "ScrapeConfig",
            "Service",
            "ServiceMonitor"
        ]
        .map(String::from)
        .into(),
    );
    // The overlay replaces the base's config rather than adding a second one.
    let config = |objects: &[Value]| {
        object(objects, "ConfigMap", None)["data"]["config.yml"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(config(&probe).contains("tenants:"));
    assert!(!config(&base).contains("tenants:"));
    for o in &probe {
        assert_eq!(o["metadata"]["namespace"], "mailhost", "{:?}", o["kind"]);
    }
    // The base with its storage on a claim.
    let mut with_claim = kinds(&base);
    with_claim.insert("PersistentVolumeClaim".to_owned());
    assert_eq!(kinds(&render(kubectl, PERSISTENT)), with_claim);
}

/// The PrometheusRule carries exactly the groups of the rule files Prometheus users load, in
/// order, and the committed file is what the generator writes today.
#[test]
fn the_prometheusrule_is_generated_from_the_shipped_rule_files() {
    let root = repo_root();
    let read = |path: &str| -> Value {
        serde_yaml_ng::from_str(&std::fs::read_to_string(root.join(path)).unwrap())
            .unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    let rule = read("deploy/kubernetes/base/prometheusrule.yml");
    let mut groups = Vec::new();
    for file in ["prometheus/rules.yml", "prometheus/alerts.yml"] {
        groups.extend(seq(&read(file)["groups"], file).iter().cloned());
    }
    assert!(groups.len() >= 2);
    assert_eq!(
        rule["spec"]["groups"],
        Value::Sequence(groups),
        "deploy/kubernetes/base/prometheusrule.yml is out of date: run python3 deploy/kubernetes/generate-prometheusrule.py"
    );
    let out = Command::new("python3")
        .args(["deploy/kubernetes/generate-prometheusrule.py", "--check"])
        .current_dir(&root)
        .output()
        .expect("python3 runs the generator");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn the_deployment_runs_locked_down_with_probes_the_token_file_and_the_config() {
    let Some(kubectl) = kubectl() else { return };
    for dir in [BASE, PROBE, PERSISTENT] {
        let objects = render(kubectl, dir);
        let deployment = object(&objects, "Deployment", None);
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["automountServiceAccountToken"], false, "{dir}");
        let pod_security = &pod["securityContext"];
        assert_eq!(pod_security["runAsNonRoot"], true, "{dir}");
        assert_eq!(pod_security["seccompProfile"]["type"], "RuntimeDefault");
        let containers = seq(&pod["containers"], "containers");
        assert_eq!(containers.len(), 1);
        let c = &containers[0];

        let security = &c["securityContext"];
        assert_eq!(security["runAsNonRoot"], true, "{dir}");
        assert_eq!(security["readOnlyRootFilesystem"], true, "{dir}");
        assert_eq!(security["allowPrivilegeEscalation"], false, "{dir}");
        assert_eq!(security["privileged"], false, "{dir}");
        assert_eq!(
            security["capabilities"]["drop"],
            Value::Sequence(vec!["ALL".into()])
        );
        assert!(security["capabilities"]["add"].is_null(), "{dir}");
        assert_eq!(security["seccompProfile"]["type"], "RuntimeDefault");
        // The image's nonroot user, so a runtime without image metadata agrees.
        assert_eq!(pod_security["runAsUser"], 65532);

        // The Dockerfile's image name, which users point elsewhere with kustomize `images:`.
        let dockerfile = std::fs::read_to_string(repo_root().join("Dockerfile")).unwrap();
        let image = str_of(&c["image"], "image");
        assert!(
            dockerfile.contains(&format!("docker build -t {image} .")),
            "{image} is not the Dockerfile's image name"
        );

        assert_eq!(c["ports"][0]["containerPort"], 19587);
        assert_eq!(c["ports"][0]["name"], "http-metrics");
        for (probe, path) in [
            ("livenessProbe", "/-/healthy"),
            ("readinessProbe", "/-/ready"),
        ] {
            assert_eq!(c[probe]["httpGet"]["path"], path, "{dir} {probe}");
            assert_eq!(c[probe]["httpGet"]["port"], "http-metrics", "{dir} {probe}");
        }
        for resource in ["cpu", "memory"] {
            assert!(c["resources"]["requests"][resource].is_string(), "{dir}");
        }
        assert!(c["resources"]["limits"]["memory"].is_string(), "{dir}");

        // The config from the generated ConfigMap, named by the flag.
        let config_map = object(&objects, "ConfigMap", None);
        let volumes = seq(&pod["volumes"], "volumes");
        let volume = |name: &str| {
            volumes
                .iter()
                .find(|v| v["name"] == name)
                .unwrap_or_else(|| panic!("{dir}: no volume {name}"))
        };
        let mount = |name: &str| {
            let mounts = seq(&c["volumeMounts"], "volumeMounts");
            let m = mounts
                .iter()
                .find(|m| m["name"] == name)
                .unwrap_or_else(|| panic!("{dir}: no mount of {name}"));
            assert_eq!(m["readOnly"], true, "{dir}: {name} mounted writable");
            // A subPath mount never sees a rotated Secret or an updated ConfigMap.
            assert!(m["subPath"].is_null(), "{dir}: {name} mounted with subPath");
            str_of(&m["mountPath"], "mountPath").to_owned()
        };
        assert_eq!(
            volume("config")["configMap"]["name"],
            config_map["metadata"]["name"]
        );
        assert_eq!(
            c["args"],
            Value::Sequence(vec![
                format!("--config.file={}/config.yml", mount("config")).into(),
                format!("--storage.path={STORAGE_DIR}").into(),
                "--storage.checkpoint-interval=1m".into(),
            ])
        );
        // The storage directory, the only writable place: an emptyDir (the container's
        // restarts), or in the persistent overlay the claim it renders, with the pod recreated
        // rather than rolled (a new pod would be refused the lock the old one holds).
        let storage = storage_volume(pod, STORAGE_DIR, "1m");
        if dir == PERSISTENT {
            let claim = object(&objects, "PersistentVolumeClaim", None);
            assert_eq!(
                storage["persistentVolumeClaim"]["claimName"],
                claim["metadata"]["name"]
            );
            assert!(storage["emptyDir"].is_null(), "{storage:?}");
            assert_eq!(
                claim["spec"]["accessModes"],
                Value::Sequence(vec!["ReadWriteOnce".into()])
            );
            assert_eq!(deployment["spec"]["strategy"]["type"], "Recreate");
            assert_eq!(deployment["spec"]["replicas"], 1);
        } else {
            assert_eq!(storage["emptyDir"]["sizeLimit"], "1Gi", "{dir}");
            assert!(deployment["spec"]["strategy"].is_null(), "{dir}");
        }
        // The Dockerfile's example keeps its state where the pod does.
        assert!(
            dockerfile.contains(&format!("--storage.path={STORAGE_DIR}")),
            "the Dockerfile's example keeps no state at {STORAGE_DIR}"
        );
        // The token from a Secret, as a file only the pod's group may read; never a variable.
        assert_eq!(
            volume("token")["secret"]["secretName"],
            "mailhost-exporter-token"
        );
        assert_eq!(volume("token")["secret"]["defaultMode"], 0o440);
        assert_eq!(format!("{}/", mount("token")), SECRET_DIR);
        assert!(c["env"].is_null() && c["envFrom"].is_null(), "{dir}");
    }
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn the_service_and_the_service_monitor_meet_on_the_named_port() {
    let Some(kubectl) = kubectl() else { return };
    for dir in [BASE, PROBE] {
        let objects = render(kubectl, dir);
        let deployment = object(&objects, "Deployment", None);
        let service = object(&objects, "Service", None);
        let monitor = object(&objects, "ServiceMonitor", None);
        let ports = seq(&service["spec"]["ports"], "ports");
        assert_eq!(ports.len(), 1);
        assert_eq!(ports[0]["port"], 19587);
        assert_eq!(ports[0]["name"], "http-metrics");
        assert_eq!(ports[0]["targetPort"], "http-metrics");

        let pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
            .as_mapping()
            .unwrap();
        let selects = |selector: &Mapping, labels: &Mapping| {
            !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
        };
        assert!(selects(
            service["spec"]["selector"].as_mapping().unwrap(),
            pod_labels
        ));
        assert!(selects(
            monitor["spec"]["selector"]["matchLabels"]
                .as_mapping()
                .unwrap(),
            service["metadata"]["labels"].as_mapping().unwrap()
        ));
        let endpoints = seq(&monitor["spec"]["endpoints"], "endpoints");
        assert_eq!(endpoints.len(), 1);
        assert_eq!(endpoints[0]["port"], "http-metrics");
        assert_eq!(endpoints[0]["path"], "/metrics");
        // The job the rules select (their mailhostSelector is job="mailhost").
        let relabel = &endpoints[0]["relabelings"][0];
        assert_eq!(
            (
                relabel["targetLabel"].as_str(),
                relabel["replacement"].as_str()
            ),
            (Some("job"), Some("mailhost"))
        );
        let rules = std::fs::read_to_string(repo_root().join("prometheus/rules.yml")).unwrap();
        assert!(rules.contains("{job=\"mailhost\"}"));
    }
}

/// Each shipped config passes `--config.check` once the Secret's files exist at their mounted
/// paths (here a temporary directory stands for the mount).
#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn the_shipped_configs_pass_config_check_with_the_mounted_paths() {
    let Some(kubectl) = kubectl() else { return };
    for dir in [BASE, PROBE, PERSISTENT] {
        let objects = render(kubectl, dir);
        let text = str_of(
            &object(&objects, "ConfigMap", None)["data"]["config.yml"],
            "config.yml",
        );
        let config: Value = serde_yaml_ng::from_str(text).unwrap();
        let mut token_files = Vec::new();
        if let Some(tenants) = config["tenants"].as_sequence() {
            token_files.extend(tenants.iter().map(|t| t["token_file"].clone()));
        } else {
            token_files.push(config["api"]["token_file"].clone());
        }
        let tmp = tempfile::tempdir().unwrap();
        for file in &token_files {
            let file = str_of(file, "token_file");
            let name = file
                .strip_prefix(SECRET_DIR)
                .unwrap_or_else(|| panic!("{dir}: {file} is not in the Secret's mount"));
            std::fs::write(tmp.path().join(name), "a-token\n").unwrap();
        }
        let local = text.replace(SECRET_DIR, &format!("{}/", tmp.path().display()));
        let path = tmp.path().join("config.yml");
        std::fs::write(&path, local).unwrap();
        // With the container's own arguments, so that the binary parses the flags rendered.
        let container =
            &object(&objects, "Deployment", None)["spec"]["template"]["spec"]["containers"][0];
        let out = Command::new(env!("CARGO_BIN_EXE_mailhost_exporter"))
            .args(config_check_args(
                container,
                &path,
                &tmp.path().join("storage"),
            ))
            .env_remove("MAILHOST_API_TOKEN")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{dir}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The relabelling of `examples/prometheus/fleet.yml` in the operator's form: its `/metrics`
/// job's `metric_relabel_configs` and its probe job's `relabel_configs`.
pub fn fleet_example() -> (Value, Value) {
    let example: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(repo_root().join("examples/prometheus/fleet.yml")).unwrap(),
    )
    .unwrap();
    let jobs = seq(&example["scrape_configs"], "scrape_configs");
    assert_eq!(jobs.len(), 2);
    (
        crd_form(&jobs[0]["metric_relabel_configs"]),
        crd_form(&jobs[1]["relabel_configs"]),
    )
}

/// The rendered ScrapeConfig and ServiceMonitor relabel as `examples/prometheus/fleet.yml`.
pub fn relabel_as_the_fleet_example(objects: &[Value]) {
    let (metric_relabelings, relabelings) = fleet_example();
    let scrape = object(objects, "ScrapeConfig", None);
    assert_eq!(scrape["spec"]["relabelings"], relabelings);
    let monitor = object(objects, "ServiceMonitor", None);
    assert_eq!(
        monitor["spec"]["endpoints"][0]["metricRelabelings"],
        metric_relabelings
    );
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn the_probe_overlay_scrapes_every_account_through_the_services_sd() {
    let Some(kubectl) = kubectl() else { return };
    let objects = render(kubectl, PROBE);
    let service = object(&objects, "Service", None);
    let scrape = object(&objects, "ScrapeConfig", None);
    let sd = seq(&scrape["spec"]["httpSDConfigs"], "httpSDConfigs");
    assert_eq!(sd.len(), 1);
    // /sd answers targets at the address it was asked on, so this address must be the
    // Service's in-cluster name in the namespace the overlay renders into.
    assert_eq!(
        sd[0]["url"],
        format!(
            "http://{}.{}.svc:{}/sd",
            str_of(&service["metadata"]["name"], "name"),
            str_of(&service["metadata"]["namespace"], "namespace"),
            service["spec"]["ports"][0]["port"].as_u64().unwrap()
        )
    );
    // /sd sets the path and parameters; anything here would override them.
    for key in ["metricsPath", "params"] {
        assert!(scrape["spec"][key].is_null(), "ScrapeConfig sets {key}");
    }
    // The same jobs as examples/prometheus/fleet.yml, which the end-to-end alert test runs: the
    // probe targets under the job the rules select, /metrics without the accounts' copies.
    relabel_as_the_fleet_example(&objects);
    // The accounts /sd lists are the tenants' configured ones.
    let config: Value = serde_yaml_ng::from_str(str_of(
        &object(&objects, "ConfigMap", None)["data"]["config.yml"],
        "config.yml",
    ))
    .unwrap();
    let tenants = seq(&config["tenants"], "tenants");
    assert!(tenants.len() >= 2);
    for tenant in tenants {
        assert!(
            !seq(
                &tenant["collectors"]["delivery_account"]["accounts"],
                "accounts"
            )
            .is_empty()
        );
    }
}

/// The operator's objects as JSON, for the validator.
pub(crate) fn operator_objects(objects: &[Value]) -> Vec<&Value> {
    objects
        .iter()
        .filter(|o| {
            o["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("monitoring.coreos.com/"))
        })
        .collect()
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn prometheus_operator_objects_fit_the_operators_crd_schemas() {
    let Some(kubectl) = kubectl() else { return };
    let Some(validator) = tool("validate-prometheus-operator", INSTALL) else {
        return;
    };
    let base = render(kubectl, BASE);
    let probe = render(kubectl, PROBE);
    let mut objects = operator_objects(&base);
    objects.extend(operator_objects(&probe));
    let (ok, report) = run_with_input(validator, &[], &serde_json::to_string(&objects).unwrap());
    assert!(ok, "{report}");
    for kind in ["PrometheusRule", "ServiceMonitor", "ScrapeConfig"] {
        assert!(report.contains(&format!("ok {kind}/")), "{report}");
    }
    assert_eq!(report.lines().count(), objects.len(), "{report}");

    // The schemas bite: a scrape interval and a rule's `for` that are no durations.
    let mut broken_monitor = object(&base, "ServiceMonitor", None).clone();
    broken_monitor["spec"]["endpoints"][0]["interval"] = "one minute".into();
    let mut broken_rule = object(&base, "PrometheusRule", None).clone();
    let last_group = seq(&broken_rule["spec"]["groups"], "groups").len() - 1;
    broken_rule["spec"]["groups"][last_group]["rules"][0]["for"] = "soon".into();
    for broken in [broken_monitor, broken_rule] {
        let (ok, report) =
            run_with_input(validator, &[], &serde_json::to_string(&[&broken]).unwrap());
        assert!(!ok, "{report}");
        assert!(report.starts_with("invalid "), "{report}");
    }
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn core_objects_fit_the_kubernetes_schemas_strictly() {
    let Some(kubectl) = kubectl() else { return };
    let Some(validate) = tool("kubernetes-validate", INSTALL) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let check = |name: &str, objects: &[&Value]| -> (bool, String) {
        let text: Vec<String> = objects
            .iter()
            .map(|o| serde_yaml_ng::to_string(o).unwrap())
            .collect();
        let path = tmp.path().join(name);
        std::fs::write(&path, text.join("---\n")).unwrap();
        crate::helpers::outcome(
            Command::new(validate)
                .args(["--strict", "--no-warn"])
                .arg(&path),
        )
    };
    for (dir, name) in [
        (BASE, "base.yml"),
        (PROBE, "probe.yml"),
        (PERSISTENT, "persistent.yml"),
    ] {
        let objects = render(kubectl, dir);
        let mut kinds = vec!["ConfigMap", "Deployment", "Service"];
        if dir == PERSISTENT {
            kinds.push("PersistentVolumeClaim");
        }
        let core: Vec<&Value> = kinds
            .iter()
            .map(|kind| object(&objects, kind, None))
            .collect();
        let (ok, report) = check(name, &core);
        assert!(ok, "{dir}:\n{report}");
        assert_eq!(
            report.matches(" passed for resource ").count(),
            kinds.len(),
            "{report}"
        );

        // Strict: a misspelt field is an error, not silently dropped.
        let mut broken = object(&objects, "Deployment", None).clone();
        broken["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] =
            broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"].clone();
        let (ok, report) = check("broken.yml", &[&broken]);
        assert!(!ok, "{report}");
        assert!(report.contains("readinesProbe"), "{report}");
    }
}

/// The groups as Kubernetes carries them, loaded by promtool as Prometheus would: linted, and
/// through the rules' unit tests in place of the rule files they name.
#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn promtool_accepts_the_rule_groups_of_the_rendered_prometheusrule() {
    let Some(kubectl) = kubectl() else { return };
    let Some(promtool) = promtool() else { return };
    let objects = render(kubectl, BASE);
    let rule = object(&objects, "PrometheusRule", None);
    let tmp = tempfile::tempdir().unwrap();
    let mut file = Mapping::new();
    file.insert("groups".into(), rule["spec"]["groups"].clone());
    let extracted = tmp.path().join("prometheusrule-groups.yml");
    std::fs::write(&extracted, serde_yaml_ng::to_string(&file).unwrap()).unwrap();
    let promtool_ok = |args: &[&str]| {
        let out = Command::new(promtool).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "promtool {}:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let extracted_path = extracted.to_str().unwrap();
    promtool_ok(&[
        "check",
        "rules",
        "--lint=all",
        "--lint-fatal",
        extracted_path,
    ]);

    let tests_dir = repo_root().join("prometheus/tests");
    let shipped = ["rules.yml", "alerts.yml"].map(|f| repo_root().join("prometheus").join(f));
    let mut ran = 0;
    for entry in std::fs::read_dir(&tests_dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().ends_with(".test.yml") {
            continue;
        }
        let mut test: Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        // The shipped rule files become the extracted groups (once); any other file stays.
        let mut rule_files = vec![Value::from(extracted_path)];
        for f in seq(&test["rule_files"], "rule_files") {
            let resolved = tests_dir.join(str_of(f, "rule file"));
            let resolved = resolved.canonicalize().unwrap_or(resolved);
            if !shipped.iter().any(|s| same_file(s, &resolved)) {
                rule_files.push(resolved.to_string_lossy().into_owned().into());
            }
        }
        test["rule_files"] = Value::Sequence(rule_files);
        let copy = tmp.path().join(path.file_name().unwrap());
        std::fs::write(&copy, serde_yaml_ng::to_string(&test).unwrap()).unwrap();
        promtool_ok(&["test", "rules", copy.to_str().unwrap()]);
        ran += 1;
    }
    assert!(ran >= 1, "no rule unit tests under prometheus/tests");
}

fn same_file(a: &Path, b: &Path) -> bool {
    a.canonicalize().ok().as_deref() == Some(b)
}

const ALERTMANAGER: &str = "deploy/kubernetes/overlays/alertmanager";

/// A matcher of Alertmanager's config (`name="value"`, `name=~"regex"`, ...) as the operator's
/// `{name, matchType, value}`.
fn crd_matcher(matcher: &str) -> Value {
    let at = matcher
        .find(['=', '!'])
        .unwrap_or_else(|| panic!("matcher {matcher}"));
    let (name, rest) = matcher.split_at(at);
    let op = ["=~", "!~", "!=", "="]
        .into_iter()
        .find(|op| rest.starts_with(op))
        .unwrap();
    let value = rest[op.len()..].trim_matches('"');
    serde_yaml_ng::from_str(&format!(
        "{{name: {name}, matchType: {op:?}, value: {}}}",
        serde_json::to_string(value).unwrap()
    ))
    .unwrap()
}

/// Prometheus' and Alertmanager's snake_case settings as the operator's camelCase, matchers as
/// objects.
pub fn crd_form(value: &Value) -> Value {
    match value {
        Value::Mapping(map) => {
            let mut out = Mapping::new();
            for (key, value) in map {
                let key = key.as_str().unwrap();
                let (key, value) = match key {
                    "matchers" | "source_matchers" | "target_matchers" => (
                        match key {
                            "matchers" => "matchers",
                            "source_matchers" => "sourceMatch",
                            _ => "targetMatch",
                        }
                        .to_owned(),
                        Value::Sequence(
                            seq(value, key)
                                .iter()
                                .map(|m| crd_matcher(str_of(m, key)))
                                .collect(),
                        ),
                    ),
                    "headers" => (
                        key.to_owned(),
                        Value::Sequence(
                            value
                                .as_mapping()
                                .unwrap()
                                .iter()
                                .map(|(k, v)| {
                                    let mut header = Mapping::new();
                                    header.insert("key".into(), k.clone());
                                    header.insert("value".into(), v.clone());
                                    Value::Mapping(header)
                                })
                                .collect(),
                        ),
                    ),
                    _ => {
                        let mut words = key.split('_');
                        let mut camel = words.next().unwrap().to_owned();
                        for word in words {
                            camel.push_str(&word[..1].to_uppercase());
                            camel.push_str(&word[1..]);
                        }
                        (camel, crd_form(value))
                    }
                };
                out.insert(key.into(), value);
            }
            Value::Mapping(out)
        }
        Value::Sequence(items) => Value::Sequence(items.iter().map(crd_form).collect()),
        other => other.clone(),
    }
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn the_alertmanager_overlay_routes_as_the_example_and_fits_the_crd() {
    let Some(kubectl) = kubectl() else { return };
    let Some(validator) = tool("validate-prometheus-operator", INSTALL) else {
        return;
    };
    let read = |path: &str| std::fs::read_to_string(repo_root().join(path)).unwrap();
    let objects = render(kubectl, ALERTMANAGER);
    let config = object(&objects, "AlertmanagerConfig", None);
    let example: Value =
        serde_yaml_ng::from_str(&read("examples/alertmanager/alertmanager.yml")).unwrap();
    // The route, the inhibitions and the receivers of the example, field for field.
    assert_eq!(config["spec"]["route"], crd_form(&example["route"]));
    assert_eq!(
        config["spec"]["inhibitRules"],
        crd_form(&example["inhibit_rules"])
    );
    assert_eq!(config["spec"]["receivers"], crd_form(&example["receivers"]));
    // Its templates, as the example has them.
    let template = read("examples/alertmanager/templates/mailhost.tmpl");
    assert_eq!(read(&format!("{ALERTMANAGER}/mailhost.tmpl")), template);
    let maps: Vec<&Value> = objects
        .iter()
        .filter(|o| {
            o["kind"] == "ConfigMap"
                && o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("mailhost-alertmanager-templates"))
        })
        .collect();
    assert_eq!(maps.len(), 1);
    assert_eq!(maps[0]["data"]["mailhost.tmpl"].as_str(), Some(&*template));
    // The operator's schema accepts it, and bites on a group wait that is no duration (it
    // leaves the nested routes unchecked: they are free-form in the CRD).
    let (ok, report) = run_with_input(validator, &[], &serde_json::to_string(&[config]).unwrap());
    assert!(
        ok && report.starts_with("ok AlertmanagerConfig/"),
        "{report}"
    );
    let mut broken = config.clone();
    broken["spec"]["route"]["groupWait"] = "soon".into();
    let (ok, report) = run_with_input(validator, &[], &serde_json::to_string(&[&broken]).unwrap());
    assert!(!ok, "{report}");
}
