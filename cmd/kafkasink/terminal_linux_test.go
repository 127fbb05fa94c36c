package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// openPTY returns the two ends of a new pseudo-terminal: what is written
// to tty (a terminal, as a person's) is read from pty.
func openPTY(t *testing.T) (pty, tty *os.File) {
	t.Helper()
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	var n, unlock uint32
	for _, c := range []struct {
		req uintptr
		arg *uint32
	}{{syscall.TIOCSPTLCK, &unlock}, {syscall.TIOCGPTN, &n}} {
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, pty.Fd(), c.req, uintptr(unsafe.Pointer(c.arg))); errno != 0 {
			pty.Close()
			t.Skipf("no pseudo-terminal: ioctl: %v", errno)
		}
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		pty.Close()
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { tty.Close(); pty.Close() })
	return pty, tty
}

// readTerminal collects what the terminal shows, with its own line ends
// (\r\n) as the program wrote them (\n).
type readTerminal struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func newReadTerminal(pty *os.File) *readTerminal {
	r := new(readTerminal)
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := pty.Read(b)
			r.mu.Lock()
			r.buf.Write(b[:n])
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return r
}

func (r *readTerminal) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.ReplaceAll(r.buf.String(), "\r\n", "\n")
}

// TestTerminal checks the terminal's view: -log-format auto is text
// there, the progress is one status line rewritten in place, and a log
// record goes above it, the line drawn again below.
func TestTerminal(t *testing.T) {
	pty, tty := openPTY(t)
	shown := newReadTerminal(pty)
	logger, term, err := newLogger("info", "auto", tty)
	if err != nil {
		t.Fatal(err)
	}
	if term == nil {
		t.Fatal("-log-format auto on a terminal: no status line")
	}
	term.show("progress 1")
	logger.Info("hello")
	term.show("progress 2")
	term.finish()
	logger.Info("bye")
	want := regexp.MustCompile(`^\r\x1b\[Kprogress 1\r\x1b\[Ktime=\S+ level=INFO msg=hello\nprogress 1\r\x1b\[Kprogress 2\ntime=\S+ level=INFO msg=bye\n$`)
	deadline := time.Now().Add(5 * time.Second)
	for !want.MatchString(shown.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal shows %q, want it to match %q", shown.String(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestProgressLineOnTerminal runs the program against the real PostgreSQL
// and Kafka with a terminal as stderr: its log is text, and its progress a
// status line rewritten in place, which counts the rows inserted and is
// left on the screen when the program stops.
func TestProgressLineOnTerminal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, brokers, name, db := realTable(ctx, t, "kafkasink_tty")
	pty, tty := openPTY(t)
	shown := newReadTerminal(pty)
	var out kafkasinktest.LogBuffer // what waitFor shows on failure
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	status := make(chan int, 1)
	args := []string{"-pg", pg, "-brokers", brokers, "-tables", "public." + name, "-slot", name, "-publication", name,
		"-topic-prefix", name, "-batch-max-wait", "20ms", "-progress", "100ms"}
	go func() { status <- run(runCtx, args, noEnv, tty) }()
	waitForSlot(ctx, t, db, name, status, &out)
	if _, err := db.Exec(ctx, "INSERT INTO "+name+" SELECT g, 'row ' || g FROM generate_series(1, 7) g"); err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`\r\x1b\[Kstreaming: 7 events, \d+/s, lag \d+ bytes [0-9.]+s, checkpoint \S+$`)
	deadline := time.Now().Add(60 * time.Second)
	for !line.MatchString(shown.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal does not end with a status line counting 7 events:\n%q", shown.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	if code := <-status; code != 0 {
		t.Fatalf("exit status %d after cancellation, want 0:\n%q", code, shown.String())
	}
	final := regexp.MustCompile(`streaming: 7 events, [^\n]*\n(time=[^\n]*\n)*time=\S+ level=INFO msg="stopped by signal" events=7`)
	deadline = time.Now().Add(10 * time.Second)
	for !final.MatchString(shown.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("after the program stopped, the terminal shows:\n%q\nwant the last status line kept above the final log record", shown.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(shown.String(), `{"time"`) || strings.Contains(shown.String(), "msg=progress") {
		t.Errorf("the terminal shows JSON or progress log records:\n%q", shown.String())
	}
}
