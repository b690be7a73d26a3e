{{/* The chart's name, or nameOverride. */}}
{{- define "mailhost-exporter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's objects' name: fullnameOverride, or release-chart (the release alone when it holds the chart's name). */}}
{{- define "mailhost-exporter.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels every object carries. */}}
{{- define "mailhost-exporter.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "mailhost-exporter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels the Service and the ServiceMonitor select the pod by. */}}
{{- define "mailhost-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mailhost-exporter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The Secret holding the tokens. */}}
{{- define "mailhost-exporter.tokenSecret" -}}
{{- default (printf "%s-token" (include "mailhost-exporter.fullname" .)) .Values.tokens.existingSecret }}
{{- end }}

{{/* The PersistentVolumeClaim holding the storage directory: persistence.existingClaim, or the chart's. */}}
{{- define "mailhost-exporter.storageClaim" -}}
{{- default (printf "%s-storage" (include "mailhost-exporter.fullname" .)) .Values.persistence.existingClaim }}
{{- end }}

{{/* Values the schema cannot refuse on their own, refused with what to do. */}}
{{- define "mailhost-exporter.validate" -}}
{{- if .Values.persistence.enabled }}
{{- if not .Values.storage.enabled }}
{{- fail "persistence.enabled keeps the storage directory on a claim, but storage.enabled is false: set storage.enabled=true, or persistence.enabled=false" }}
{{- end }}
{{- if gt (int .Values.replicaCount) 1 }}
{{- fail (printf "persistence.enabled with replicaCount=%d: the replicas would share one claim, and the storage directory's lock lets one exporter in and refuses the others; run one replica, or one release per --shard with a claim each, or set persistence.enabled=false (each pod then has an emptyDir of its own)" (int .Values.replicaCount)) }}
{{- end }}
{{- end }}
{{- end }}
