package daemon

import (
	"reflect"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/controlsock"
)

// TestSendBufferSetting: limits.sendBufferBytes absent keeps the server's
// default, 0 asks for the system's, any other value is passed on.
func TestSendBufferSetting(t *testing.T) {
	zero, some := 0, 65536
	if sendBufferBytes(nil) != 0 || sendBufferBytes(&zero) != -1 || sendBufferBytes(&some) != 65536 {
		t.Fatal(sendBufferBytes(nil), sendBufferBytes(&zero), sendBufferBytes(&some))
	}
}

// TestServerLimits: every limit of config.json reaches the control server,
// and an absent one leaves the server's default.
func TestServerLimits(t *testing.T) {
	n := func(v int) *int { return &v }
	got := serverLimits(config.Limits{MaxClients: n(10), MaxInflight: n(3), HelloTimeoutMs: n(500), WriteTimeoutMs: n(700),
		QueueBytes: n(1 << 20), SoftQueueBytes: n(1 << 18), SendBufferBytes: n(0), StallGraceMs: n(900)})
	want := controlsock.Config{MaxClients: 10, MaxInflight: 3, HelloTimeout: 500 * time.Millisecond, WriteTimeout: 700 * time.Millisecond,
		MaxQueueBytes: 1 << 20, SoftQueueBytes: 1 << 18, SendBufferBytes: -1, StallGrace: 900 * time.Millisecond}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("limits:\n got %+v\nwant %+v", got, want)
	}
	if got := serverLimits(config.Limits{}); !reflect.DeepEqual(got, controlsock.Config{}) {
		t.Errorf("no limits: %+v, want all defaults (zero)", got)
	}
}
