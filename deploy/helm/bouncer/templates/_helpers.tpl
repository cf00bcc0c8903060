{{/* The chart's name, as nameOverride may change it. */}}
{{- define "bouncer.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's base name for its objects. */}}
{{- define "bouncer.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "bouncer.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "bouncer.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
The components the release runs: serve and gateway, each when enabled.
Each template ranges over them with a dict of root (the chart's context),
name (serve or gateway) and values (its part of .Values).
*/}}
{{- define "bouncer.components" -}}
{{- $out := list -}}
{{- range $name := list "serve" "gateway" -}}
{{- if (index $.Values $name).enabled -}}
{{- $out = append $out $name -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* An object's name: the fullname for serve, fullname-gateway for the gateway. */}}
{{- define "bouncer.objectName" -}}
{{- if eq .name "serve" -}}
{{- include "bouncer.fullname" .root -}}
{{- else -}}
{{- printf "%s-gateway" (include "bouncer.fullname" .root | trunc 55 | trimSuffix "-") -}}
{{- end -}}
{{- end -}}

{{/* The labels that select a component's pods. */}}
{{- define "bouncer.selectorLabels" -}}
app.kubernetes.io/name: {{ include "bouncer.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ if eq .name "serve" }}ratelimit{{ else }}gateway{{ end }}
{{- end -}}

{{/* Every object's labels. */}}
{{- define "bouncer.labels" -}}
{{ include "bouncer.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Whether counts live in memory (no URL and no Secret naming one). */}}
{{- define "bouncer.memoryStore" -}}
{{- if and (eq .Values.store.url "memory") (not .Values.store.existingSecret) -}}true{{- end -}}
{{- end -}}

{{/* The config's ConfigMap: the release's, or an existing one. */}}
{{- define "bouncer.configMapName" -}}
{{- default (include "bouncer.objectName" .) .values.config.existingConfigMap -}}
{{- end -}}
