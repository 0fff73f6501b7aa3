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
{{- define "argocd-image-updater.webhookPort" -}}
{{- $p := int .Values.containerPort -}}
{{- if or (eq $p 8080) (eq $p 8081) (lt $p 1) (gt $p 65535) -}}
{{- fail (printf "containerPort %d: it is the webhook endpoint's port here and must be a free port other than 8080 (health) and 8081 (metrics); the default is 8082" $p) -}}
{{- end -}}
{{- $p -}}
{{- end -}}
