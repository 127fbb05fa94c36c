// Package kubernetes holds the kustomize base that runs kafkasink on
// Kubernetes (docs/kubernetes.md) and its tests: a module of its own, so
// that the Kubernetes types stay out of the library's and the program's
// module graphs.
package kubernetes

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// manifests is the kustomize base rendered, each object decoded into its
// official Go type.
type manifests struct {
	deployment appsv1.Deployment
	service    corev1.Service
	pdb        policyv1.PodDisruptionBudget
	config     corev1.ConfigMap
}

// render builds the base as kubectl apply -k would, and decodes every
// object strictly: a field the Kubernetes API does not have (a typo, a
// wrong level of indentation) fails, as does any kind but the four
// expected, or one of them twice or missing.
func render(t *testing.T) manifests {
	t.Helper()
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), ".")
	if err != nil {
		t.Fatalf("kustomize build: %v", err)
	}
	var m manifests
	seen := map[string]int{}
	for _, res := range resMap.Resources() {
		text, err := res.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		apiKind := res.GetApiVersion() + " " + res.GetKind()
		seen[apiKind]++
		var into any
		switch apiKind {
		case "apps/v1 Deployment":
			into = &m.deployment
		case "v1 Service":
			into = &m.service
		case "policy/v1 PodDisruptionBudget":
			into = &m.pdb
		case "v1 ConfigMap":
			into = &m.config
		default:
			t.Fatalf("kustomize build made a %s (%s): the tests know Deployment, Service, PodDisruptionBudget and ConfigMap", apiKind, res.GetName())
		}
		if err := yaml.UnmarshalStrict(text, into); err != nil {
			t.Fatalf("%s %s does not decode strictly into the Kubernetes API's type: %v\n%s", apiKind, res.GetName(), err, text)
		}
	}
	for _, kind := range []string{"apps/v1 Deployment", "v1 Service", "policy/v1 PodDisruptionBudget", "v1 ConfigMap"} {
		if seen[kind] != 1 {
			t.Errorf("kustomize build made %d of %s, want 1", seen[kind], kind)
		}
	}
	return m
}

// container is the Deployment's one container.
func (m manifests) container(t *testing.T) corev1.Container {
	t.Helper()
	cs := m.deployment.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("the pod has %d containers, want 1", len(cs))
	}
	return cs[0]
}

// TestManifestsValid renders the base and checks what the Kubernetes API
// would not: two replicas whose rolling update cannot stall (a new pod
// ready before an old one goes; a standby is ready), a disruption budget
// that lets a drain evict one replica and selects the pods, a Service
// that selects them and names their port, probes and scrape annotations
// on that port, the mounted ConfigMap being the generated one, and a
// grace period longer than the Kafka transaction timeout.
func TestManifestsValid(t *testing.T) {
	m := render(t)
	d := m.deployment.Spec
	if d.Replicas == nil || *d.Replicas != 2 {
		t.Errorf("replicas %v, want 2 (a leader and a standby)", d.Replicas)
	}
	ru := d.Strategy.RollingUpdate
	if d.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil ||
		ru.MaxUnavailable == nil || *ru.MaxUnavailable != intstr.FromInt32(0) || ru.MaxSurge == nil || *ru.MaxSurge != intstr.FromInt32(1) {
		t.Errorf("strategy %+v: want RollingUpdate, maxSurge 1, maxUnavailable 0 (the new pod is ready, a standby, before an old one stops)", d.Strategy)
	}
	if d.ProgressDeadlineSeconds == nil {
		t.Error("no progressDeadlineSeconds: a rollout that cannot progress would not be reported")
	}
	podLabels := labels.Set(d.Template.Labels)
	selects := func(what string, sel map[string]string) {
		if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(podLabels) {
			t.Errorf("%s's selector %v does not select the pods (labels %v)", what, sel, podLabels)
		}
	}
	if d.Selector == nil {
		t.Fatal("the Deployment has no selector")
	}
	selects("the Deployment", d.Selector.MatchLabels)
	if m.pdb.Spec.Selector == nil {
		t.Fatal("the PodDisruptionBudget has no selector")
	}
	selects("the PodDisruptionBudget", m.pdb.Spec.Selector.MatchLabels)
	selects("the Service", m.service.Spec.Selector)
	if mu := m.pdb.Spec.MaxUnavailable; mu == nil || *mu != intstr.FromInt32(1) || m.pdb.Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget maxUnavailable %v, minAvailable %v: want maxUnavailable 1 (a drain evicts one replica at a time, never blocked)", mu, m.pdb.Spec.MinAvailable)
	}

	c := m.container(t)
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	namedPort := func(what string, p intstr.IntOrString) {
		if p.Type != intstr.String || ports[p.StrVal] == 0 {
			t.Errorf("%s's port %v is not a named port of the container (%v)", what, p.String(), ports)
		}
	}
	for _, sp := range m.service.Spec.Ports {
		namedPort("the Service", sp.TargetPort)
	}
	for name, probe := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", name)
			continue
		}
		namedPort(name+" probe", probe.HTTPGet.Port)
		if probe.TimeoutSeconds < 1 || probe.PeriodSeconds < probe.TimeoutSeconds-1 {
			t.Errorf("%s probe: timeout %ds, period %ds", name, probe.TimeoutSeconds, probe.PeriodSeconds)
		}
	}
	if c.LivenessProbe.HTTPGet.Path != "/livez" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("probes %s and %s, want /livez for liveness and /readyz for readiness", c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
	}
	ann := d.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/path"] != "/metrics" || ann["prometheus.io/port"] != fmt.Sprint(ports["http"]) {
		t.Errorf("scrape annotations %v: want scrape true, path /metrics, port %d", ann, ports["http"])
	}

	var configVolume string
	for _, v := range d.Template.Spec.Volumes {
		if v.ConfigMap != nil {
			configVolume = v.ConfigMap.Name
		}
	}
	if configVolume != m.config.Name || !strings.HasPrefix(m.config.Name, "kafkasink-config-") {
		t.Errorf("the pod mounts ConfigMap %q, kustomize made %q: want the generated one (its name has the content's hash, so a change rolls the pods)", configVolume, m.config.Name)
	}
	var settings map[string]any
	if err := yaml.Unmarshal([]byte(m.config.Data["kafkasink.yaml"]), &settings); err != nil {
		t.Fatalf("the ConfigMap's kafkasink.yaml: %v", err)
	}
	txn, err := time.ParseDuration(fmt.Sprint(settings["transaction_timeout"]))
	if err != nil {
		t.Fatalf("kafkasink.yaml's transaction_timeout %v: %v", settings["transaction_timeout"], err)
	}
	if grace := d.Template.Spec.TerminationGracePeriodSeconds; grace == nil || time.Duration(*grace)*time.Second <= txn {
		t.Errorf("terminationGracePeriodSeconds %v, want more than the transaction timeout %v (SIGTERM lets the Write in progress end)", grace, txn)
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.MountPath == "/tmp" }) &&
		c.SecurityContext != nil && c.SecurityContext.ReadOnlyRootFilesystem != nil && *c.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("a read-only root file system without a volume on /tmp, where streamed transactions are spooled")
	}
}
