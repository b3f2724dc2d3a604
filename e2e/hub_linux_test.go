package e2e

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/internal/tgemu"
	"github.com/agents-fleet/fleet/protocol"
)

// inotifyOpens watches path for opens (IN_OPEN) and counts them.
type inotifyOpens struct {
	mu    sync.Mutex
	opens int
	done  chan struct{}
}

func watchOpens(t *testing.T, path string) *inotifyOpens {
	// Non-blocking, wrapped in an *os.File: the runtime poller then lets
	// Close interrupt the read.
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_OPEN); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "inotify")
	w := &inotifyOpens{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			if err != nil || n <= 0 {
				return
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				if ev.Mask&unix.IN_OPEN != 0 {
					w.mu.Lock()
					w.opens++
					w.mu.Unlock()
				}
				if ev.Mask&unix.IN_IGNORED != 0 {
					return
				}
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}()
	t.Cleanup(func() { f.Close(); <-w.done })
	return w
}

func (w *inotifyOpens) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.opens
}

// TestHubApprovalBeforeTokenRead: the hub asks before it reads a fleet's
// token (the token file is not even opened until Approve), then relays a
// question whose button answer reaches the fleet, edits it with the
// outcome, and answers a late press with "already answered". Linux-only:
// the opens of the token file are counted with inotify.
func TestHubApprovalBeforeTokenRead(t *testing.T) {
	h := newHubEnv(t, nil)
	d := h.startFleet("alpha")
	watch := e2etest.Watch(t, d.Dial(protocol.ClientREPL, "terminal"))
	opens := watchOpens(t, d.Desc.TokenPath)
	h.startHub()
	q := h.message("the attach question", withButtons("Fleet alpha wants to attach"))
	for _, want := range []string{d.Desc.Cwd, fmt.Sprint(d.Desc.PID), d.Desc.ID} {
		if !strings.Contains(q.Text, want) {
			t.Errorf("the attach question does not say %q: %q", want, q.Text)
		}
	}
	// The hub has seen the fleet and asked; it must not have touched the token.
	out, _, code := h.Fleet("", "hub", "status", "--json")
	if code != 0 || !strings.Contains(out, `"state":"awaiting approval"`) {
		t.Fatalf("hub status before approval (exit %d): %s", code, out)
	}
	if n := opens.count(); n != 0 {
		t.Fatalf("the fleet's token file was opened %d times before Approve", n)
	}
	h.press(q, "Approve")
	h.message("attached", containing("attached to alpha"))
	if opens.count() == 0 {
		t.Fatal("attached without opening the token file?")
	}
	h.message("the approval edited", func(m tgemu.BotMessage) bool {
		return m.MessageID == q.MessageID && strings.Contains(m.Text, "Approved") && len(m.Buttons) == 0
	})

	// An ask, raised by a task the operator sent from the chat.
	if _, err := h.op.SendText(`$ echo '::ask::{"question":"Which colour?","choices":[{"label":"Red","value":"red"},{"label":"Blue","value":"blue"}]}'; read x; echo "picked $x"`); err != nil {
		t.Fatal(err)
	}
	watch.WaitFor("the chat's prompt", userMessage("Which colour?"))
	ask := h.message("the question", withButtons("Which colour?"))
	h.press(ask, "Blue")
	watch.WaitFor("the answer reaching the task", transcriptLine("picked blue"))
	h.message("the question edited", func(m tgemu.BotMessage) bool {
		return m.MessageID == ask.MessageID && strings.Contains(m.Text, "answered here") && len(m.Buttons) == 0
	})
	h.press(ask, "Red")
	h.waitCallbackAnswer("already answered")

	// The hub's own prompt is not echoed back into the chat.
	for _, m := range h.history() {
		if strings.Contains(m.Text, "💬 <i>") && strings.Contains(m.Text, "Which colour?") {
			t.Errorf("the hub reposted its own prompt: %q", m.Text)
		}
	}
}
