{{/*
Labels of every object the chart renders: herald's own (as config/default sets them)
plus Helm's bookkeeping.
*/}}
{{- define "herald.labels" -}}
app.kubernetes.io/part-of: herald
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The selector labels of a component's pods: herald.selector (dict "component" "speaker").
*/}}
{{- define "herald.selector" -}}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/name: herald
{{- end }}

{{/*
An image reference from a component's image values: herald.image (dict "image" ... "root" $).
*/}}
{{- define "herald.image" -}}
{{- if .image.digest -}}
{{ .image.repository }}@{{ .image.digest }}
{{- else -}}
{{ .image.repository }}:{{ .image.tag | default .root.Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/*
The -v flag for a logLevel value: a number, or "info" (0) or "debug" (2). Nothing for 0.
*/}}
{{- define "herald.verbosity" -}}
{{- $v := . -}}
{{- if kindIs "string" $v -}}
{{- $words := dict "info" 0 "debug" 2 -}}
{{- if not (hasKey $words $v) -}}
{{- fail (printf "logLevel %q: want a number (0 quiet, 1, 2+ debug), info or debug" $v) -}}
{{- end -}}
{{- $v = get $words $v -}}
{{- end -}}
{{- if gt (int $v) 0 -}}
- --v={{ int $v }}
{{- end -}}
{{- end }}

{{/*
The environment both components share: their namespace, and the API server's address
from the optional ConfigMap herald-apiserver (see apiServer in values.yaml).
*/}}
{{- define "herald.commonEnv" -}}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: KUBERNETES_SERVICE_HOST
  valueFrom:
    configMapKeyRef:
      key: host
      name: herald-apiserver
      optional: true
- name: KUBERNETES_SERVICE_PORT
  valueFrom:
    configMapKeyRef:
      key: port
      name: herald-apiserver
      optional: true
{{- end }}

{{/* Where metrics.certSecretName is mounted. */}}
{{- define "herald.metricsCertDir" -}}/etc/herald/metrics-tls{{- end }}
