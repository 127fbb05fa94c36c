package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLeaderWithPostgreSQLCut runs the program, leading and streaming
// from the real PostgreSQL through a TCP relay, and then cuts the relay
// (every connection closed, new ones refused): PostgreSQL is down for
// the leader. Until it stops, /livez must stay 200 (a restart cures
// nothing) and /readyz must turn 503 naming PostgreSQL, not the lease
// nor Kafka; and the leader, whose lease went with its session, must
// stop with status 3, so that a standby that reaches PostgreSQL may take
// over.
func TestLeaderWithPostgreSQLCut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, brokers, name, db := realTable(ctx, t, "kafkasink_pgcut")
	target, err := url.Parse(pg)
	if err != nil {
		t.Fatal(err)
	}
	relay := startRelay(t, target.Host)
	defer relay.cut()
	viaRelay := *target
	viaRelay.Host = relay.addr()
	args := []string{"-pg", viaRelay.String(), "-tables", "public." + name, "-slot", name, "-publication", name,
		"-topic-prefix", name, "-batch-max-wait", "20ms", "-progress", "0", "-log-format", "text", "-http-addr", "127.0.0.1:0",
		"-lease-timeout", "3s"}
	out, status, _ := startProgram(ctx, t, db, name, brokers, args)
	base := listenerURL(t, out, status)
	waitFor(t, 60*time.Second, "/readyz 200 while streaming", status, out, func() bool { code, _ := httpGet(t, base+"/readyz"); return code == 200 })

	cutAt := time.Now()
	relay.cut()
	// The lease's session is gone with its connection, so the leader
	// stops soon: ask /readyz and /livez until it does.
	var first503 string
	var livezFailures []string
	var code int
	for exited := false; !exited; {
		select {
		case code = <-status:
			exited = true
		case <-time.After(10 * time.Millisecond):
			if c, body := tryGet(base + "/readyz"); c == 503 && first503 == "" {
				first503 = strings.TrimSpace(body)
				t.Logf("%v after the cut, /readyz: 503 %s", time.Since(cutAt).Round(time.Millisecond), first503)
			}
			if c, body := tryGet(base + "/livez"); c != 200 && c != 0 {
				livezFailures = append(livezFailures, fmt.Sprintf("%d %s", c, strings.TrimSpace(body)))
			}
		case <-ctx.Done():
			t.Fatalf("the leader still runs %v after PostgreSQL went down:\n%s", time.Since(cutAt), out.String())
		}
	}
	t.Logf("the leader exited %d %v after the cut", code, time.Since(cutAt).Round(time.Millisecond))
	if !strings.HasPrefix(first503, "PostgreSQL: ") || strings.Contains(first503, "lease") || strings.Contains(first503, "Kafka") {
		t.Errorf("/readyz after the cut: first 503 %q, want one naming PostgreSQL, not the lease nor Kafka", first503)
	}
	if livezFailures != nil {
		t.Errorf("/livez failed with PostgreSQL down: %q, want 200", livezFailures)
	}
	if code != 3 || !strings.Contains(out.String(), "lease_lost=true") {
		t.Errorf("the leader without PostgreSQL exited %d, want 3 with its lease lost:\n%s", code, out.String())
	}
}

// tryGet is GET url's status and body; 0 when nothing answers.
func tryGet(url string) (int, string) {
	resp, err := (&http.Client{Timeout: time.Second}).Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// relay forwards TCP connections to a target until cut.
type relay struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	cuts  sync.Once
}

func startRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			outConn, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, in, outConn)
			r.mu.Unlock()
			go func() { io.Copy(outConn, in); outConn.Close() }()
			go func() { io.Copy(in, outConn); in.Close() }()
		}
	}()
	return r
}

func (r *relay) addr() string { return r.ln.Addr().String() }

// cut closes the listener and every connection: PostgreSQL is down.
func (r *relay) cut() {
	r.cuts.Do(func() {
		r.ln.Close()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, c := range r.conns {
			c.Close()
		}
	})
}
