#!/usr/bin/env bash
# Renders the mixin into the files the repository ships: prometheus/rules.yml,
# prometheus/alerts.yml and dashboards/*.json. Usage: mixin/build.sh [output directory]
# (default: the repository root). Needs Debian's jsonnet (apt-get install jsonnet).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root}"
mkdir -p "$out/prometheus" "$out/dashboards"
jsonnet -S -m "$out" "$root/mixin/render.jsonnet" >/dev/null
# The Helm chart carries copies of the rule files and dashboards (tests/helm.rs compares them).
if [ "$out" = "$root" ]; then
  chart="$root/deploy/helm/mailhost-exporter/files"
  mkdir -p "$chart/dashboards"
  cp "$root/prometheus/rules.yml" "$root/prometheus/alerts.yml" "$chart/"
  cp "$root"/dashboards/*.json "$chart/dashboards/"
fi
