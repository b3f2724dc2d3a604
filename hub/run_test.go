package hub

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/hub/telegram"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/registry"
)

// pollingBot is fakeBot whose Poll delivers what the test puts in ups.
type pollingBot struct {
	*fakeBot
	ups chan telegram.Update
}

func (b *pollingBot) Poll(ctx context.Context, out chan<- telegram.Update) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case u := <-b.ups:
			select {
			case out <- u:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// TestRunWholeHub runs the hub with all its goroutines (registry watcher,
// poller, outbox, status socket, main loop) under the race detector: a
// command is answered, a forged descriptor is refused, status answers, a
// second hub is refused by the lock, and cancelling stops everything.
func TestRunWholeHub(t *testing.T) {
	home, err := os.MkdirTemp("", "hubrun")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	bot := &pollingBot{fakeBot: &fakeBot{fakeSender: newFakeSender(newFakeClock())}, ups: make(chan telegram.Update)}
	cfg := Config{FleetHome: home, AllowedChats: []int64{42}, Verbosity: Normal, Logger: discard(), Rescan: 50 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, bot) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	testwait.For(t, testwait.Bound, "the status socket", func() bool {
		_, err := QueryStatus(context.Background(), home)
		return err == nil
	})
	if err := run(context.Background(), cfg, bot); !errors.Is(err, ErrRunning) {
		t.Errorf("a second hub: %v, want ErrRunning", err)
	}

	bot.ups <- telegram.Update{Message: &telegram.Message{ID: 1, ChatID: 42, FromID: 7, FromName: "alice", Text: "/help"}}
	testwait.For(t, testwait.Bound, "the /help answer", func() bool {
		for _, s := range bot.sends() {
			if strings.Contains(s.text, "fleet hub</b> relays") {
				return true
			}
		}
		return false
	})

	// A descriptor for a live pid (ours) whose socket is not the one its
	// fleetHome derives: refused, and said so.
	dir := filepath.Join(home, "sockets")
	id, _ := registry.NewID(os.Getpid())
	d := registry.Descriptor{SchemaVersion: registry.SchemaVersion, ID: id, PID: os.Getpid(), Name: "evil", Cwd: "/",
		SocketPath: "/tmp/elsewhere.sock", TokenPath: registry.TokenPath(home, id), FleetHome: home,
		StartedAt: time.Now().UnixMilli(), ProtocolVersion: registry.ProtocolVersion, HubAttach: true}
	if _, err := registry.Write(dir, d); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, testwait.Bound, "the refusal", func() bool {
		for _, s := range bot.sends() {
			if strings.Contains(s.text, "Refused a fleet descriptor") && strings.Contains(s.text, "socketPath") {
				return true
			}
		}
		return false
	})
}
