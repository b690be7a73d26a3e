#!/usr/bin/env bash
# Renders the mixin into the files the repository ships: prometheus/rules.yml,
# prometheus/alerts.yml and dashboards/*.json. Usage: mixin/build.sh [output directory]
# (default: the repository root). Needs Debian's jsonnet (apt-get install jsonnet).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root}"
mkdir -p "$out/prometheus" "$out/dashboards"
jsonnet -S -m "$out" "$root/mixin/render.jsonnet" >/dev/null
