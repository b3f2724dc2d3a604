package copilot

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli/agentclitest"
)

type pingIn struct {
	Text string `json:"text"`
}

type pingOut struct {
	Echo string `json:"echo"`
}

// fleetMCP is a streamable-HTTP MCP server named like the fleet's, with
// one tool, ping; it records the calls and their Authorization header.
type fleetMCP struct {
	url   string
	mu    sync.Mutex
	calls []string
}

func startFleetMCP(t *testing.T) *fleetMCP {
	t.Helper()
	f := &fleetMCP{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "fleet", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ping", Description: "Echo text back."}, func(ctx context.Context, r *mcp.CallToolRequest, in pingIn) (*mcp.CallToolResult, pingOut, error) {
		f.mu.Lock()
		f.calls = append(f.calls, in.Text+" auth="+r.Extra.Header.Get("Authorization"))
		f.mu.Unlock()
		return nil, pingOut{Echo: "pong:" + in.Text}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	f.url = hs.URL + "/mcp"
	return f
}

func (f *fleetMCP) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func TestFleetMCPToolNeedsNoPermission(t *testing.T) {
	t.Parallel()
	f := startFleetMCP(t)
	r := newRig(t, modelmock.Script{Rules: []modelmock.Rule{{Name: "mcp", Match: "fleet-mcp", Turns: []modelmock.Turn{
		{Text: "calling", ToolCalls: []modelmock.ToolCall{{Name: "fleet-ping", Input: map[string]any{"text": "abc"}}}},
		{Text: "got pong"},
	}}}})
	h := agentclitest.NewHost(nil) // any prompt would block the test
	spec := r.Spec()
	spec.MCP = []provider.MCPServer{{Name: "fleet", URL: f.url, Headers: map[string]string{"Authorization": "Bearer fleet-secret"}, Tools: []string{"ping"}}}
	s := r.start(t, spec, h)
	send(t, s, "fleet-mcp: ping it")
	evs := h.WaitTurns(t, 1, wait)
	if te := agentclitest.Last[provider.TurnEnded](t, evs); te.Err != nil || te.Result != "got pong" {
		t.Errorf("TurnEnded %+v", te)
	}
	if calls := f.called(); len(calls) != 1 || calls[0] != "abc auth=Bearer fleet-secret" {
		t.Errorf("MCP calls %q", calls)
	}
	if _, perms := h.Snapshot(); len(perms) != 0 {
		t.Errorf("the host was asked: %+v", perms)
	}
	st := agentclitest.Last[provider.ToolStarted](t, evs)
	done := agentclitest.Last[provider.ToolCompleted](t, evs)
	if st.Name != "fleet-ping" || st.Input["text"] != "abc" || done.ID != st.ID || done.IsError || !strings.Contains(done.Result, "pong:abc") {
		t.Errorf("tool events %+v %+v", st, done)
	}
	// The request offered the tool under Copilot's name for it.
	reqs := r.modelRequests("mcp")
	var body struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if len(reqs) == 0 || json.Unmarshal(reqs[0].Body, &body) != nil {
		t.Fatal("no model request")
	}
	found := false
	for _, tool := range body.Tools {
		found = found || tool.Name == "fleet-ping"
	}
	if !found {
		t.Errorf("fleet-ping not offered: %+v", body.Tools)
	}
	// The bearer token is not on the CLI's command line.
	if strings.Contains(strings.Join(agentclitest.Proc(s.cli).Args(), " "), "fleet-secret") {
		t.Error("the MCP header is on the command line")
	}
}
