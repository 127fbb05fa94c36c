package main

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestRollingUpdateLeaderGap plays the rolling update of the Kubernetes
// Deployment (deploy/kubernetes: two replicas, maxSurge 1, maxUnavailable
// 0, readiness on /readyz) with processes of the built program against
// the real PostgreSQL and Kafka, while a row is inserted every 20ms. Old
// replicas 1 (the leader) and 2 (its standby) run; replica 3 starts, and
// once its /readyz is 200 (a ready standby: the rollout does not stall on
// it) the leader gets SIGTERM, as the kubelet sends it (the worst case:
// the Deployment may pick either old pod); replica 4 starts, and once it
// is ready the other old replica gets SIGTERM. A watcher asks every
// replica's /status every 20ms: no moment may pass without a replica
// that says it leads for longer than the lease timeout. Every stopped
// replica exits 0, and at the end every row is in the topic exactly once
// for a read_committed reader. The longest leaderless gap, and for each
// SIGTERM of a leader the time to a new leader and to the delivery of
// the rows inserted after it, are logged.
func TestRollingUpdateLeaderGap(t *testing.T) {
	pg, brokers := replicaTargets(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	f := newReplicaFixture(t, ctx, "kafkasink_roll", pg, brokers)
	start := func() (*replica, string) {
		r := f.start(t, "-http-addr", "127.0.0.1:0")
		return r, listenerURL(t, &r.out, nil)
	}

	old1, url1 := start()
	old1.waitLog(t, 60*time.Second, "lease acquired")
	old2, url2 := start()
	waitForStandby(t, old1, old2)
	watch := watchLeaders(url1, url2)
	defer watch.stop()
	watch.waitLeader(t, 30*time.Second)
	seen := newSeenRows(t, ctx, brokers, f.topic)
	work := startInserts(t, ctx, pg, f.name)
	time.Sleep(time.Second)

	var leaderStops int
	surge := func(old *replica, oldURL string) *replica {
		r, url := start()
		watch.add(url)
		waitFor(t, 60*time.Second, r.name+"'s /readyz 200", nil, &r.out, func() bool { code, _ := httpGet(t, url+"/readyz"); return code == 200 })
		wasLeader := watch.leads(oldURL)
		stopped := time.Now()
		old.signal(t, syscall.SIGTERM)
		if code, exited := old.wait(30 * time.Second); !exited || code != 0 {
			t.Fatalf("%s after SIGTERM: exited %t, status %d; want 0:\n%s", old.name, exited, code, old.out.String())
		}
		watch.remove(oldURL)
		if wasLeader {
			leaderStops++
			led := watch.waitLeader(t, 30*time.Second).Sub(stopped)
			took := seen.firstAfter(t, work, stopped, 30*time.Second)
			t.Logf("SIGTERM of the leader %s: a new leader %v later, the rows inserted after it delivered %v later", old.name, led.Round(time.Millisecond), took)
		} else {
			t.Logf("SIGTERM of the standby %s", old.name)
		}
		time.Sleep(time.Second)
		return r
	}
	new3 := surge(old1, url1)
	new4 := surge(old2, url2)
	work.stop(t)
	watch.stop()
	gap, twoLeaders, looks := watch.result()
	if gap >= haLeaseTimeout || gap == 0 {
		t.Errorf("the pipeline was without a leader for %v at most: want more than 0 (the lead passed on) and under the lease timeout %v", gap, haLeaseTimeout)
	}
	if twoLeaders > 0 {
		t.Errorf("at %d of %d looks two replicas said they led", twoLeaders, looks)
	}
	ids := deliveredOnce(t, ctx, f.db, brokers, f.name, f.topic, seen, new3, new4)
	t.Logf("rolling update of 2 replicas, %d of the 2 SIGTERMs to a leader, %d looks at /status: longest time without a leader %v at most (lease timeout %v, ratio %.3f); %d rows, each in the topic once",
		leaderStops, looks, gap.Round(time.Millisecond), haLeaseTimeout, float64(gap)/float64(haLeaseTimeout), len(ids))
}

// leaderWatch asks the replicas' /status whether they lead, every 20ms.
// When the lead passes from one replica to another, the time from the
// last look at which the old one led to the first at which the new one
// does is a leaderless gap (at most one look longer than the real one);
// it keeps the longest, and counts the looks at which two replicas said
// they led.
type leaderWatch struct {
	mu         sync.Mutex
	urls       map[string]bool // each replica's listener, and whether it led at the last look
	leader     string          // the replica that led at the last look at which one did
	lastLeader time.Time       // that look
	gap        time.Duration   // the longest gap so far
	twoLeaders int             // looks at which more than one replica led
	looks      int
	stopOnce   sync.Once
	stopping   chan struct{}
	done       chan struct{}
}

func watchLeaders(urls ...string) *leaderWatch {
	w := &leaderWatch{urls: map[string]bool{}, stopping: make(chan struct{}), done: make(chan struct{})}
	for _, u := range urls {
		w.urls[u] = false
	}
	go w.loop()
	return w
}

func (w *leaderWatch) loop() {
	defer close(w.done)
	client := &http.Client{Timeout: 500 * time.Millisecond}
	for {
		select {
		case <-w.stopping:
			return
		case <-time.After(20 * time.Millisecond):
		}
		w.mu.Lock()
		urls := make([]string, 0, len(w.urls))
		for u := range w.urls {
			urls = append(urls, u)
		}
		w.mu.Unlock()
		var leaders []string
		leads := map[string]bool{}
		for _, u := range urls {
			if leads[u] = statusLeader(client, u); leads[u] {
				leaders = append(leaders, u)
			}
		}
		w.look(time.Now(), leads, leaders)
	}
}

// look records what one look saw.
func (w *leaderWatch) look(now time.Time, leads map[string]bool, leaders []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.looks++
	for u, l := range leads {
		if _, ok := w.urls[u]; ok {
			w.urls[u] = l
		}
	}
	if len(leaders) > 1 {
		w.twoLeaders++
	}
	if len(leaders) == 0 {
		return
	}
	if w.leader != "" && leaders[0] != w.leader {
		w.gap = max(w.gap, now.Sub(w.lastLeader))
	}
	w.leader, w.lastLeader = leaders[0], now
}

// statusLeader is /status's leader flag; false when it does not answer
// (a process that exited leads nothing).
func statusLeader(client *http.Client, url string) bool {
	resp, err := client.Get(url + "/status")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var doc struct {
		Leader bool `json:"leader"`
	}
	return json.NewDecoder(resp.Body).Decode(&doc) == nil && doc.Leader
}

func (w *leaderWatch) add(url string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.urls[url] = false
}

func (w *leaderWatch) remove(url string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.urls, url)
}

// leads is whether the replica at url led at the last look.
func (w *leaderWatch) leads(url string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.urls[url]
}

// waitLeader waits for a look at which a watched replica leads, and
// returns its time.
func (w *leaderWatch) waitLeader(t *testing.T, within time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		for _, l := range w.urls {
			if l {
				at := w.lastLeader
				w.mu.Unlock()
				return at
			}
		}
		w.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no replica led within %v", within)
	return time.Time{}
}

// result is the longest gap, counting one still open, the looks at
// which two replicas led, and the looks.
func (w *leaderWatch) result() (gap time.Duration, twoLeaders, looks int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	gap = w.gap
	if !w.urls[w.leader] {
		gap = max(gap, time.Since(w.lastLeader))
	}
	return gap, w.twoLeaders, w.looks
}

func (w *leaderWatch) stop() {
	w.stopOnce.Do(func() { close(w.stopping) })
	<-w.done
}
