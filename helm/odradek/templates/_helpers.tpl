{{/* Names and labels shared by every template. */}}

{{- define "odradek.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "odradek.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "odradek.headless" -}}
{{- printf "%s-headless" (include "odradek.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "odradek.selectorLabels" -}}
app.kubernetes.io/name: {{ include "odradek.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "odradek.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "odradek.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* controller.quorum.voters for replicaCount > 1: id@pod.headless.namespace.svc:port, ... */}}
{{- define "odradek.quorumVoters" -}}
{{- $full := include "odradek.fullname" . -}}
{{- $headless := include "odradek.headless" . -}}
{{- $voters := list -}}
{{- range $i := until (int .Values.replicaCount) -}}
{{- $voters = append $voters (printf "%d@%s-%d.%s.%s.svc:%d" $i $full $i $headless $.Release.Namespace (int $.Values.ports.controller)) -}}
{{- end -}}
{{- join "," $voters -}}
{{- end -}}
