package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
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
