package daemon

import (
	"database/sql"
	"testing"

	"github.com/agents-fleet/fleet/intel"
	"github.com/agents-fleet/fleet/protocol"
)

// TestOneModel: the model config.json names is the one the fleet reports
// everywhere: in its welcome, its status and fleetState frames, the saved
// session, and the intel store's session and runs.
func TestOneModel(t *testing.T) {
	const model = "model-from-config"
	fl := startInProcess(t, func(o *Options) { o.File.Model = model })
	c := fl.dial(t, "model")
	defer c.Close()
	sessionID := c.Welcome().SessionID
	if got := c.Welcome().Model; got != model {
		t.Errorf("welcome.model = %q, want %q", got, model)
	}
	// A run, to see the model it is recorded with; the snapshots that
	// count it follow.
	if err := c.Send(&protocol.Prompt{Text: "$ true", RequestID: "run"}); err != nil {
		t.Fatal(err)
	}
	st := await(t, c, "status after the run", func(m protocol.Message) bool {
		st, ok := m.(*protocol.Status)
		return ok && st.TasksDone != nil && *st.TasksDone == 1
	}).(*protocol.Status)
	if st.Model != model {
		t.Errorf("status.model = %q (provider %q), want %q", st.Model, st.Provider, model)
	}
	fs := await(t, c, "fleetState after the run", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		return ok && fs.Tasks.Done == 1
	}).(*protocol.FleetState)
	if fs.Session == nil || fs.Session.Model != model {
		t.Errorf("fleetState.session = %+v, want model %q", fs.Session, model)
	}
	c.Close()
	fl.stop() // the intel store has everything once the fleet stopped

	saved, err := OpenExistingStore(fl.home)
	if err != nil {
		t.Fatal(err)
	}
	defer saved.Close()
	if s, err := saved.GetSession(t.Context(), sessionID); err != nil || s.Model != model {
		t.Errorf("saved session: model %q (%v), want %q", s.Model, err, model)
	}
	db, err := sql.Open("sqlite", intel.DefaultPath(fl.home)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`SELECT model FROM sessions WHERE id = ?`,
		`SELECT r.model FROM runs r JOIN sessions s ON s.sid = r.sid WHERE s.id = ?`,
	} {
		var got string
		if err := db.QueryRowContext(t.Context(), q, sessionID).Scan(&got); err != nil || got != model {
			t.Errorf("intel store, %s: %q (%v), want %q", q, got, err, model)
		}
	}
}
