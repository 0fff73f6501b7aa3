{{/*
The chart's short name, used in labels and in the full name.
*/}}
{{- define "argocd-image-updater.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The name of the release's objects. A release whose name already holds the
short name keeps it as it is, so a release called argocd-image-updater
gives the names of manifests/install.yaml, which overlays patch; any other
release prefixes the short name with its own.
*/}}
{{- define "argocd-image-updater.fullname" -}}
{{- $name := include "argocd-image-updater.name" . -}}
{{- $full := printf "%s-%s" .Release.Name $name -}}
{{- if .Values.fullnameOverride -}}
{{- $full = .Values.fullnameOverride -}}
{{- else if contains $name .Release.Name -}}
{{- $full = .Release.Name -}}
{{- end -}}
{{- $full | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Namespace of the namespaced objects.
*/}}
{{- define "argocd-image-updater.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{/*
Labels that pick the controller's pods; a Deployment's selector cannot
change, so these stay as few as possible.
*/}}
{{- define "argocd-image-updater.selectorLabels" -}}
app.kubernetes.io/name: {{ include "argocd-image-updater.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
Labels of every object.
*/}}
{{- define "argocd-image-updater.labels" -}}
{{ include "argocd-image-updater.selectorLabels" . }}
app.kubernetes.io/part-of: argocd-image-updater
app.kubernetes.io/version: {{ .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/*
The ServiceAccount the pod runs as.
*/}}
{{- define "argocd-image-updater.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "argocd-image-updater.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The applications API must be the Kubernetes API: this controller refuses
the Argo CD API server, so say so at install time rather than with a pod
that exits.
*/}}
{{- define "argocd-image-updater.checkApplicationsAPI" -}}
{{- $kind := .Values.config.applicationsAPIKind | default "" | toString -}}
{{- if not (has $kind (list "" "kubernetes")) -}}
{{- fail (printf "config.applicationsAPIKind %q is not supported: this controller reads and writes Applications through the Kubernetes API only; leave it empty or set it to \"kubernetes\"" $kind) -}}
{{- end -}}
{{- end -}}

{{/*
The webhook endpoint's port: containerPort, which must not take the health
(8080) or metrics (8081) port. The community chart's containerPort was the
health port; an old values file that sets it to 8080 is refused here.
*/}}
{{- /* The webhook port: containerPorts.webhook (the 1.x chart's), else
  containerPort, except 8080, which the 0.x chart gave its health probes
  (its default, found in values files copied from it): then 8082. */}}
{{- define "argocd-image-updater.webhookPort" -}}
{{- $p := int .Values.containerPort -}}
{{- if eq $p 8080 }}{{ $p = 8082 }}{{ end -}}
{{- with .Values.containerPorts }}{{ with .webhook }}{{ $p = int . }}{{ end }}{{ end -}}
{{- if or (eq $p (int (include "argocd-image-updater.healthPort" .))) (eq $p (int (include "argocd-image-updater.metricsPort" .))) (lt $p 1) (gt $p 65535) -}}
{{- fail (printf "webhook port %d (containerPorts.webhook or containerPort): it must be a port other than the health and metrics ports; the default is 8082" $p) -}}
{{- end -}}
{{- $p -}}
{{- end -}}

{{- /* The health and metrics ports: containerPorts.health and .metrics
  (the 1.x chart's), else the controller's 8080 and 8081. */}}
{{- define "argocd-image-updater.healthPort" -}}
{{- $p := 8080 -}}
{{- with .Values.containerPorts }}{{ with .health }}{{ $p = int . }}{{ end }}{{ end -}}
{{- $p -}}
{{- end -}}
{{- define "argocd-image-updater.metricsPort" -}}
{{- $p := 8081 -}}
{{- with .Values.containerPorts }}{{ with .metrics }}{{ $p = int . }}{{ end }}{{ end -}}
{{- $p -}}
{{- end -}}
