{{/*
Name of the chart, or nameOverride.
*/}}
{{- define "eas-server.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name of the release's objects: fullnameOverride, else <release>, else
<release>-<chart> when the release name does not contain the chart name.
Kept at 50 characters so that the "-controller" and "-gateway" suffixes fit
in 63.
*/}}
{{- define "eas-server.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "eas-server.controller.fullname" -}}
{{- printf "%s-controller" (include "eas-server.fullname" .) }}
{{- end }}

{{- define "eas-server.gateway.fullname" -}}
{{- printf "%s-gateway" (include "eas-server.fullname" .) }}
{{- end }}

{{- define "eas-server.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object. Not app.kubernetes.io/managed-by: eas-server, which
marks the objects the controller creates; these are Helm's.
*/}}
{{- define "eas-server.labels" -}}
helm.sh/chart: {{ include "eas-server.chart" . }}
app.kubernetes.io/name: {{ include "eas-server.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "eas-server.selectorLabels" -}}
app.kubernetes.io/name: {{ include "eas-server.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "eas-server.controller.selectorLabels" -}}
{{ include "eas-server.selectorLabels" . }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "eas-server.gateway.selectorLabels" -}}
{{ include "eas-server.selectorLabels" . }}
app.kubernetes.io/component: gateway
{{- end }}

{{- define "eas-server.controller.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "eas-server.controller.fullname" .) .Values.serviceAccount.controllerName }}
{{- else }}
{{- default "default" .Values.serviceAccount.controllerName }}
{{- end }}
{{- end }}

{{- define "eas-server.gateway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "eas-server.gateway.fullname" .) .Values.serviceAccount.gatewayName }}
{{- else }}
{{- default "default" .Values.serviceAccount.gatewayName }}
{{- end }}
{{- end }}

{{/*
Image of the controller and the gateway.
*/}}
{{- define "eas-server.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
Image of the service pods: serviceImage, each empty field taken from image.
*/}}
{{- define "eas-server.serviceImage" -}}
{{- $repo := default .Values.image.repository .Values.serviceImage.repository }}
{{- $tag := default (default .Chart.AppVersion .Values.image.tag) .Values.serviceImage.tag }}
{{- printf "%s:%s" $repo $tag }}
{{- end }}

{{- define "eas-server.serviceImagePullPolicy" -}}
{{- default .Values.image.pullPolicy .Values.serviceImage.pullPolicy }}
{{- end }}

{{/*
Name of the Secret holding the admin token (key "token").
*/}}
{{- define "eas-server.adminTokenSecret" -}}
{{- default (printf "%s-admin-token" (include "eas-server.fullname" .)) .Values.existingAdminTokenSecret }}
{{- end }}
