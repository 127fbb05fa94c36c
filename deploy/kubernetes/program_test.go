package kubernetes

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// buildProgram builds cmd/kafkasink from the source beside this
// directory, in the repository's workspace (go.work), whatever GOWORK
// this test runs with.
func buildProgram(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the program: skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "kafkasink")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "..", "cmd", "kafkasink")
	cmd.Env = append(os.Environ(), "GOWORK=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build in cmd/kafkasink: %v\n%s", err, out)
	}
	return bin
}

// flagTable is the program's own list of flags and their environment
// variables, read from kafkasink help.
type flagTable struct {
	flags, env map[string]bool
}

func readFlagTable(t *testing.T, bin string) flagTable {
	t.Helper()
	out, err := exec.Command(bin, "help").Output()
	if err != nil {
		t.Fatalf("kafkasink help: %v", err)
	}
	ft := flagTable{flags: map[string]bool{}, env: map[string]bool{}}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9.-]+)`).FindAllStringSubmatch(string(out), -1) {
		ft.flags[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`\(\$(KAFKASINK_[A-Z0-9_]+)\)`).FindAllStringSubmatch(string(out), -1) {
		ft.env[m[1]] = true
	}
	if len(ft.flags) < 50 || len(ft.env) < 50 {
		t.Fatalf("kafkasink help lists %d flags and %d variables: is its format changed?\n%s", len(ft.flags), len(ft.env), out)
	}
	return ft
}

// TestManifestsNameRealSettings checks the container's arguments, its
// environment and the ConfigMap's keys against the program's own flag
// table (kafkasink help of the program built from this repository), and
// that the HTTP listener's port is the container's port the probes,
// the Service and the scrape annotations name.
func TestManifestsNameRealSettings(t *testing.T) {
	m := render(t)
	ft := readFlagTable(t, buildProgram(t))
	c := m.container(t)
	if len(c.Command) != 0 {
		t.Errorf("command %q: the image's entrypoint is the program; give arguments only", c.Command)
	}
	if len(c.Args) == 0 || c.Args[0] != "run" {
		t.Errorf("args %q: want the run command first", c.Args)
	}
	for _, a := range c.Args[1:] {
		if name, ok := strings.CutPrefix(a, "-"); ok {
			name, _, _ = strings.Cut(strings.TrimPrefix(name, "-"), "=")
			if !ft.flags[name] {
				t.Errorf("args: -%s is no flag of the program", name)
			}
		}
	}
	env := containerEnv(t, c)
	for name := range env {
		if !ft.env[name] {
			t.Errorf("env: %s is no variable of the program", name)
		}
	}
	var settings map[string]any
	if err := yaml.Unmarshal([]byte(m.config.Data["kafkasink.yaml"]), &settings); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for f := range ft.flags {
		keys[strings.NewReplacer("-", "_", ".", "_").Replace(f)] = true
	}
	for k := range settings {
		if !keys[k] {
			t.Errorf("kafkasink.yaml: %s is no key of the program", k)
		}
	}
	_, port, err := net.SplitHostPort(env["KAFKASINK_HTTP_ADDR"])
	if err != nil || env["KAFKASINK_HTTP_ALLOW_REMOTE"] != "true" {
		t.Fatalf("KAFKASINK_HTTP_ADDR %q (%v), KAFKASINK_HTTP_ALLOW_REMOTE %q: the listener must be on all addresses, allowed",
			env["KAFKASINK_HTTP_ADDR"], err, env["KAFKASINK_HTTP_ALLOW_REMOTE"])
	}
	for _, p := range c.Ports {
		if p.Name == "http" && strconv.Itoa(int(p.ContainerPort)) != port {
			t.Errorf("the container's port http is %d, the program listens on %s", p.ContainerPort, port)
		}
	}
	if !mountedFrom(c, m, env["KAFKASINK_PG_PASSWORD_FILE"], "secret") {
		t.Errorf("KAFKASINK_PG_PASSWORD_FILE %q is not in the Secret's mount", env["KAFKASINK_PG_PASSWORD_FILE"])
	}
	if i := slices.Index(c.Args, "-config"); i < 0 || i+1 >= len(c.Args) || !mountedFrom(c, m, c.Args[i+1], "configMap") ||
		filepath.Base(c.Args[i+1]) != "kafkasink.yaml" {
		t.Errorf("args %q: want -config naming kafkasink.yaml in the ConfigMap's mount", c.Args)
	}
}

// TestProbesAnswerWithPostgreSQLDown runs the program built from this
// repository as the manifests do (their arguments, their environment,
// the ConfigMap's file, the Secret's password file), with PostgreSQL and
// Kafka at closed ports and the listener on a loopback port, and asks
// it for the paths the probes and the scrape annotations name: each
// answers (no 404); liveness is 200 (a database down is no reason to
// restart); readiness is 503 naming PostgreSQL, not the lease; /status
// says the same and that this replica does not lead; kafkasink_leader is
// 0. SIGTERM then stops it with status 0.
func TestProbesAnswerWithPostgreSQLDown(t *testing.T) {
	m := render(t)
	bin := buildProgram(t)
	c := m.container(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "kafkasink.yaml")
	password := filepath.Join(dir, "pg-password")
	for path, text := range map[string]string{config: m.config.Data["kafkasink.yaml"], password: "secret\n"} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	args := append([]string(nil), c.Args...)
	args[slices.Index(args, "-config")+1] = config
	addr := closedAddr(t)
	env := containerEnv(t, c)
	env["KAFKASINK_HTTP_ADDR"] = closedAddr(t)
	env["KAFKASINK_PG_PASSWORD_FILE"] = password
	env["KAFKASINK_PG"] = "postgres://cdc@" + addr + "/shop?sslmode=disable&connect_timeout=2"
	env["KAFKASINK_BROKERS"] = addr
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"TZ=UTC"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("the program's log:\n%s", out.String())
		}
	}()

	base := "http://" + env["KAFKASINK_HTTP_ADDR"]
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-done:
			t.Fatalf("the program exited (%v) before its listener answered; status 2 is a configuration error", err)
		default:
		}
		if code, body := get(base + c.ReadinessProbe.HTTPGet.Path); code == 503 && strings.HasPrefix(body, "PostgreSQL: ") {
			break
		}
		if time.Now().After(deadline) {
			code, body := get(base + c.ReadinessProbe.HTTPGet.Path)
			t.Fatalf("readiness %s: %d %q after 30s, want 503 naming PostgreSQL", c.ReadinessProbe.HTTPGet.Path, code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, body := get(base + c.ReadinessProbe.HTTPGet.Path); strings.Contains(body, "lease") {
		t.Errorf("readiness with PostgreSQL down: %d %q blames the lease", code, body)
	}
	if code, body := get(base + c.LivenessProbe.HTTPGet.Path); code != 200 {
		t.Errorf("liveness %s with PostgreSQL down: %d %q, want 200", c.LivenessProbe.HTTPGet.Path, code, body)
	}
	code, body := get(base + m.deployment.Spec.Template.Annotations["prometheus.io/path"])
	if code != 200 || !regexp.MustCompile(`(?m)^kafkasink_leader\{[^}]*\} 0$`).MatchString(body) {
		t.Errorf("the scrape path: %d, want 200 with kafkasink_leader 0", code)
	}
	var status struct {
		Ready  bool   `json:"ready"`
		Reason string `json:"reason"`
		Leader bool   `json:"leader"`
	}
	code, body = get(base + "/status")
	if err := json.Unmarshal([]byte(body), &status); code != 200 || err != nil || status.Ready || status.Leader || !strings.HasPrefix(status.Reason, "PostgreSQL: ") {
		t.Errorf("/status with PostgreSQL down: %d %v %+v, want not ready, not the leader, PostgreSQL named", code, err, status)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after SIGTERM: %v, want status 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("still running 20s after SIGTERM")
	}
}

// containerEnv is the container's environment, which must be values
// only (a valueFrom would not be the program's business to check).
func containerEnv(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			t.Errorf("env %s comes from elsewhere: give secrets as files (the Secret's mount)", e.Name)
		}
		env[e.Name] = e.Value
	}
	return env
}

// mountedFrom reports whether path is inside a mount of a volume of kind
// ("secret" or "configMap").
func mountedFrom(c corev1.Container, m manifests, path, kind string) bool {
	for _, vm := range c.VolumeMounts {
		if !strings.HasPrefix(path, strings.TrimSuffix(vm.MountPath, "/")+"/") {
			continue
		}
		for _, v := range m.deployment.Spec.Template.Spec.Volumes {
			if v.Name == vm.Name && (kind == "secret" && v.Secret != nil || kind == "configMap" && v.ConfigMap != nil) {
				return true
			}
		}
	}
	return false
}

// closedAddr is a loopback address nothing listens on (it was free a
// moment ago).
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func get(url string) (int, string) {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
