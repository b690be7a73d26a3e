//! Integration tests: each collector in its own module, sharing helpers that start the
//! simulator and the exporter on loopback port 0.

// Shared setup: simulator, exporter (in process or as a child), scraping helpers.
mod helpers;

// `--config.check` on the shipped example and on every bad fixture, message by message.
mod config_check;

// The exporter against the simulator: values, failures and their reasons, secrets.
mod end_to_end;

// Real tools check what we ship: promtool on the /metrics output.
mod promtool;

// The binary as an operator runs it: demo mode, SIGTERM, the token at trace log level.
mod process;

// Golden files: an upstream body in, the exact exposition out.
mod golden;

// The mail-tracing, migration and mailbox collectors against the living simulator.
mod collectors;

// The Prometheus rules and config we ship, checked by promtool.
mod rules;

// The monitoring mixin renders the shipped rules and dashboards: fresh, selector, per-account
// thresholds, vmalert.
mod mixin;

// Alertmanager: the example config, routes and templates through amtool, and alerts reaching
// a webhook end to end (simulator, exporter, Prometheus, Alertmanager).
mod alertmanager;

// Prometheus 3's pieces: its Accept headers, a strict OpenMetrics parser, its PromQL grammar.
mod prometheus3;

// Corporate networks: a private CA, server_name, mutual TLS, a CONNECT proxy, HTTPS_PROXY.
mod corporate;

// The Helm chart: lint and schema, renders against the Kubernetes and operator schemas, the
// rules and dashboards it carries, the configs it renders, the pod as locked down as kustomize's.
mod helm;

// A real Prometheus scraping demo mode: dashboard queries, metric names, the quota alert.
mod prometheus;

// Panel queries as Grafana runs them: step, $__interval, $__rate_interval, variable chains.
mod grafana_queries;

// `--storage.path`: what was learned survives a restart; bad state never stops the exporter.
mod storage;

// The container image: hadolint, its shape, no time-zone files needed.
mod container;

// Grafana dashboards follow our conventions.
mod dashboards;

// Grafana dashboards against Grafana's own model (its foundation SDK and unit list).
mod grafana_schema;

// Hostile input: arbitrary JSON through every reader and both exposition formats.
mod properties;

// --web.config.file: TLS, client certificates and basic auth on loopback; bad files, promtool.
mod web_config;

// Lifecycle: reload on SIGHUP and POST /-/reload, max requests, SIGTERM mid-refresh.
mod lifecycle;

// Security posture and lifecycle: allow-lists, second factors, team members, deletion dates
// follow the simulator's state.
mod posture;

// Why a target fails: the failure-reason series and the debug trail for every reason.
mod diagnosis;

// The fault matrix, retries, Retry-After and the circuit breaker.
mod fault_matrix;

// Isolation: broken accounts beside healthy ones, per-target circuits, bursts of reloads.
mod isolation;

// The isolation property: one account broken by each fault of the matrix, 429 included, never
// stalls the healthy accounts beside it on the same token.
mod isolation_property;

// Memory against hostile but valid answers: tiny objects and ever-changing keys, as a child.
mod memory;

// Hostile clients: unfinished and fat heads, idle connections, a descriptor-limited flood of
// connections and of wrong passwords; the server stays bounded and keeps answering /metrics.
mod hostile_clients;

// The scrape path: shared prepared bytes, gzip once per refresh, Accept-Encoding negotiation.
mod scrape_path;

// The docs cite tests that exist.
mod docs;

// --shard: replicas split a static fleet, each account polled once, agreeing with Prometheus.
mod shard;

// Tenants: one token each, the tenant label, a revoked or slow tenant failing alone, rotation.
mod tenants;

// /probe and /sd: one account per Prometheus target, registered once, never fetched per probe.
mod probe;

// Discovery: top accounts and sending domains join the poll set within allow, deny and caps.
mod discovery;

// Exact daily counters: increase() over a daylight-saving day on a real Prometheus matches the
// simulator.
mod daily_counters;

// Scaling out: a vmagent cluster and sharded Prometheus agents probe two replicas and
// remote-write into one store; every account stored and polled once.
mod scale_out;

// Kubernetes: the kustomize base and the /probe overlay render, fit the prometheus-operator and
// Kubernetes schemas, and carry the shipped rules and a locked-down pod.
mod kubernetes;

// Pacing: a rate-limited token served at the provider's pace beside a free one, Retry-After
// pausing the token, a first probe under a limit, a fleet the limit cannot refresh every interval.
mod pacing;

// Every flag and every config field against hostile values: a clear error naming it, or a clean
// start; never a panic.
mod flags_and_fields;

// An unwell provider: an endpoint failing everywhere paused and probed, not retried; retries
// held to a budget; a 503 with Retry-After obeyed; a broken shard never taken for an outage.
mod unwell;

// The declared minimum Rust version covers the language features the code uses (clippy's
// incompatible_msrv covers the standard library's items).
mod msrv;

// The layers of both crates, as their lib.rs tables write them: no import upwards, no circle.
mod layers;

// docs/pacer.md states every constant of the pacer once, with the code's value.
mod pacer_doc;
