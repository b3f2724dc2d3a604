package hostagent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agents-fleet/fleet/hosts/wire"
)

// haveTimeout bounds the answer to a Have request.
const haveTimeout = 30 * time.Second

// onControl takes a control request of the fleet (on
// wire.ControlSubjects) to the run its subject names.
func (a *Agent) onControl(m *nats.Msg) {
	key := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	var c wire.Control
	if err := json.Unmarshal(m.Data, &c); err != nil {
		a.log.Warn("a control request that does not decode", "run", key, "err", err)
		reply(m, wire.Reply{Err: fmt.Sprintf("control request: %v", err)})
		return
	}
	r := a.lookup(key)
	if r == nil {
		reply(m, wire.Reply{Gone: true})
		return
	}
	r.control(c, m)
}

// onHave answers a Have request: the commits the host's cache of the
// repository holds.
func (a *Agent) onHave(m *nats.Msg) {
	var h wire.Have
	var out wire.HaveReply
	if err := json.Unmarshal(m.Data, &h); err != nil {
		out.Err = fmt.Sprintf("have request: %v", err)
	} else {
		ctx, cancel := context.WithTimeout(a.runCtx, haveTimeout)
		defer cancel()
		cache, err := a.caches.Open(ctx, h.Repo)
		if err == nil {
			out.Commits, err = cache.Have(ctx)
		}
		if err != nil {
			out.Err = err.Error()
		}
	}
	if out.Commits == nil {
		out.Commits = []string{}
	}
	respond(m, out)
}

// reply answers a control request.
func reply(m *nats.Msg, r wire.Reply) { respond(m, r) }

// respond answers m with v in JSON. A failure (the link is down) is left
// to the fleet's request, which times out as if the host had not heard it.
func respond(m *nats.Msg, v any) {
	data, _ := json.Marshal(v) // plain fields: cannot fail
	_ = m.Respond(data)
}
