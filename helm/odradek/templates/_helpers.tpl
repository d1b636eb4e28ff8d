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


{{/* ---- cluster shape ------------------------------------------------------------------------ */}}

{{/* The StatefulSets to render: a JSON list of {component, name, replicas, roles, idOffset,
config} (config: the ConfigMap key holding that role's server.properties). */}}
{{- define "odradek.statefulSets" -}}
{{- $full := include "odradek.fullname" . -}}
{{- if eq .Values.mode "split" -}}
{{- list (dict "component" "controller" "name" (printf "%s-controller" $full) "replicas" (int .Values.controller.replicaCount) "roles" "controller" "idOffset" 0 "config" "controller.properties")
         (dict "component" "broker" "name" (printf "%s-broker" $full) "replicas" (int .Values.broker.replicaCount) "roles" "broker" "idOffset" (int .Values.broker.nodeIdOffset) "config" "broker.properties") | toJson -}}
{{- else if eq .Values.mode "combined" -}}
{{- list (dict "component" "combined" "name" $full "replicas" (int .Values.replicaCount) "roles" "broker,controller" "idOffset" 0 "config" "server.properties") | toJson -}}
{{- else -}}
{{- fail (printf "mode must be combined or split, not %q" .Values.mode) -}}
{{- end -}}
{{- end -}}

{{/* The StatefulSet whose pods take client traffic (as JSON). */}}
{{- define "odradek.brokerSet" -}}
{{- $sets := include "odradek.statefulSets" . | fromJsonArray -}}
{{- last $sets | toJson -}}
{{- end -}}

{{/* "true" when the nodes form a KRaft quorum (anything but one combined node). */}}
{{- define "odradek.quorum" -}}
{{- if or (eq .Values.mode "split") (gt (int .Values.replicaCount) 1) -}}true{{- end -}}
{{- end -}}

{{/* controller.quorum.voters: id@pod.headless.namespace.svc:port for every controller pod. */}}
{{- define "odradek.quorumVoters" -}}
{{- $headless := include "odradek.headless" . -}}
{{- $controllers := first (include "odradek.statefulSets" . | fromJsonArray) -}}
{{- $voters := list -}}
{{- range $i := until (int $controllers.replicas) -}}
{{- $voters = append $voters (printf "%d@%s-%d.%s.%s.svc:%d" $i $controllers.name $i $headless $.Release.Namespace (int $.Values.ports.controller)) -}}
{{- end -}}
{{- join "," $voters -}}
{{- end -}}

{{/* ---- listeners and security --------------------------------------------------------------- */}}

{{- define "odradek.checkProtocol" -}}
{{- if not (has . (list "PLAINTEXT" "SSL" "SASL_PLAINTEXT" "SASL_SSL")) -}}
{{- fail (printf "listener protocol must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, not %q" .) -}}
{{- end -}}
{{- end -}}

{{/* The listeners in use as a JSON list of {name, port, protocol}. */}}
{{- define "odradek.listeners" -}}
{{- $l := .Values.listeners -}}
{{- $out := list (dict "name" "CLIENT" "port" (int .Values.ports.kafka) "protocol" $l.client.protocol)
                 (dict "name" "INTERNAL" "port" (int .Values.ports.internal) "protocol" $l.internal.protocol) -}}
{{- if include "odradek.quorum" . -}}
{{- $out = append $out (dict "name" "CONTROLLER" "port" (int .Values.ports.controller) "protocol" $l.controller.protocol) -}}
{{- end -}}
{{- if .Values.externalAccess.enabled -}}
{{- $out = append $out (dict "name" "EXTERNAL" "port" (int .Values.externalAccess.port) "protocol" $l.external.protocol) -}}
{{- end -}}
{{- range $out -}}{{- include "odradek.checkProtocol" .protocol -}}{{- end -}}
{{- $out | toJson -}}
{{- end -}}

{{/* "true" when some listener in use speaks TLS / SASL. */}}
{{- define "odradek.usesTLS" -}}
{{- range include "odradek.listeners" . | fromJsonArray -}}{{- if hasSuffix "SSL" .protocol -}}true{{- end -}}{{- end -}}
{{- end -}}
{{- define "odradek.usesSASL" -}}
{{- range include "odradek.listeners" . | fromJsonArray -}}{{- if hasPrefix "SASL_" .protocol -}}true{{- end -}}{{- end -}}
{{- end -}}

{{/* Client properties (Kafka's names) for a listener's protocol: security.protocol, the
truststore, and for SASL the user from /etc/odradek/sasl/<user> as the script writes them.
Rendered as shell lines appending to $PROPS. Argument: dict(root, protocol, user). */}}
{{- define "odradek.clientPropertiesScript" -}}
{{- $root := .root -}}
echo "security.protocol={{ .protocol }}" > "$PROPS"
{{- if hasSuffix "SSL" .protocol }}
echo "ssl.truststore.type=PEM" >> "$PROPS"
echo "ssl.truststore.location=/etc/odradek/tls/{{ $root.Values.tls.caKey }}" >> "$PROPS"
{{- end }}
{{- if hasPrefix "SASL_" .protocol }}
{{- $mechs := $root.Values.sasl.enabledMechanisms }}
echo "sasl.mechanism={{ if has "SCRAM-SHA-512" $mechs }}SCRAM-SHA-512{{ else if has "SCRAM-SHA-256" $mechs }}SCRAM-SHA-256{{ else }}PLAIN{{ end }}" >> "$PROPS"
echo "sasl.username={{ .user }}" >> "$PROPS"
echo "sasl.password=$(cat /etc/odradek/sasl/{{ .user }})" >> "$PROPS"
{{- end }}
{{- end -}}

{{/* Pod scheduling: anti-affinity preset (unless affinity is given) and topology spread.
Argument: dict(root, component). */}}
{{- define "odradek.scheduling" -}}
{{- $root := .root -}}
{{- $match := dict "app.kubernetes.io/name" (include "odradek.name" $root) "app.kubernetes.io/instance" $root.Release.Name "app.kubernetes.io/component" .component -}}
{{- if $root.Values.affinity }}
affinity:
  {{- toYaml $root.Values.affinity | nindent 2 }}
{{- else if eq $root.Values.podAntiAffinityPreset "soft" }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- toYaml $match | nindent 14 }}
{{- else if eq $root.Values.podAntiAffinityPreset "hard" }}
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- toYaml $match | nindent 12 }}
{{- else if ne $root.Values.podAntiAffinityPreset "none" }}
{{- fail "podAntiAffinityPreset must be soft, hard or none" }}
{{- end }}
{{- if $root.Values.topologySpread.enabled }}
topologySpreadConstraints:
  - maxSkew: {{ $root.Values.topologySpread.maxSkew }}
    topologyKey: {{ $root.Values.topologySpread.topologyKey }}
    whenUnsatisfiable: {{ $root.Values.topologySpread.whenUnsatisfiable }}
    labelSelector:
      matchLabels:
        {{- toYaml $match | nindent 8 }}
{{- end }}
{{- end -}}
