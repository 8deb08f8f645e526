{{/*
Labels of an object: the name, the component (when given) and part-of, the label
kustomize's base adds. No helm.sh/chart or managed-by: the objects stay identical to the
kustomize overlays' (tests/deploy/test_helm_chart.py), and Helm tracks its objects by
its own annotations.
*/}}
{{- define "vpaweb.labels" -}}
app.kubernetes.io/name: vpaweb
{{- if . }}
app.kubernetes.io/component: {{ . }}
{{- end }}
app.kubernetes.io/part-of: vpaweb
{{- end }}

{{/* The selector of a component's pods. */}}
{{- define "vpaweb.selector" -}}
app.kubernetes.io/name: vpaweb
app.kubernetes.io/component: {{ . }}
{{- end }}

{{- define "vpaweb.image" -}}
image: {{ printf "%s:%s" .Values.image.repository .Values.image.tag | quote }}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end }}

{{/* Every vpaweb pod: uid/gid 10001 of the image, no privilege. */}}
{{- define "vpaweb.podSecurityContext" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  fsGroup: 10001
  seccompProfile:
    type: RuntimeDefault
{{- end }}

{{- define "vpaweb.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: ["ALL"]
{{- end }}

{{- define "vpaweb.envFrom" -}}
envFrom:
  - configMapRef:
      name: vpaweb-config
  - secretRef:
      name: vpaweb-secrets
{{- end }}

{{/* The writable places of a read-only root filesystem. */}}
{{- define "vpaweb.volumeMounts" -}}
volumeMounts:
  - {name: tmp, mountPath: /tmp}
  - {name: var, mountPath: /var/lib/vpaweb}
{{- end }}

{{- define "vpaweb.volumes" -}}
volumes:
  - name: tmp
    emptyDir: {medium: Memory, sizeLimit: 64Mi}
  - name: var
    emptyDir: {sizeLimit: 64Mi}
{{- end }}

{{- define "vpaweb.pdb" -}}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: vpaweb-{{ .component }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    app.kubernetes.io/part-of: vpaweb
spec:
  {{- toYaml .root.Values.podDisruptionBudget | nindent 2 }}
  selector:
    matchLabels:
      {{- include "vpaweb.selector" .component | nindent 6 }}
{{- end }}

{{/* The egress every vpaweb component may need, by port (DNS, PostgreSQL, ...). */}}
{{- define "vpaweb.egressPorts" -}}
{{- range . }}
- {protocol: {{ .protocol | default "TCP" }}, port: {{ .port }}}
{{- end }}
{{- end }}
