package claude

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli/agentclitest"
)

// noteServer is a one-tool MCP server over streamable HTTP on loopback,
// standing in for the fleet's own.
type noteServer struct {
	url string

	mu    sync.Mutex
	notes []string
	auth  []string // Authorization headers seen
}

type noteIn struct {
	Text string `json:"text" jsonschema:"what to note"`
}

type noteOut struct {
	Noted string `json:"noted"`
}

func startNoteServer(t *testing.T) *noteServer {
	t.Helper()
	ns := &noteServer{}
	server := mcp.NewServer(&mcp.Implementation{Name: "fleet", Version: "v0.0.1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "note", Description: "Notes a text."}, func(ctx context.Context, req *mcp.CallToolRequest, in noteIn) (*mcp.CallToolResult, noteOut, error) {
		ns.mu.Lock()
		ns.notes = append(ns.notes, in.Text)
		ns.mu.Unlock()
		return nil, noteOut{Noted: "noted: " + in.Text}, nil
	})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ns.mu.Lock()
		ns.auth = append(ns.auth, r.Header.Get("Authorization"))
		ns.mu.Unlock()
		handler.ServeHTTP(w, r)
	})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = hs.Serve(ln)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if hs.Shutdown(ctx) != nil {
			hs.Close()
		}
		<-served
	})
	ns.url = "http://" + ln.Addr().String() + "/mcp"
	return ns
}

func (ns *noteServer) seen() (notes, auth []string) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return append([]string(nil), ns.notes...), append([]string(nil), ns.auth...)
}

// TestFleetMCPTool: the model calls the fleet's MCP tool, which runs
// without any permission request reaching the host.
func TestFleetMCPTool(t *testing.T) {
	ns := startNoteServer(t)
	hs := newHarness(t, modelmock.Rule{Name: "mcp", Match: "use the fleet tool", Turns: []modelmock.Turn{
		{ToolCalls: []modelmock.ToolCall{{Name: "mcp__fleet__note", Input: map[string]any{"text": "hello fleet"}}}},
		{Text: "noted it"},
	}})
	h := newHost()
	h.Decide = func(ctx context.Context, r provider.PermissionRequest) (provider.Decision, error) {
		return provider.Decision{}, errors.New("the fleet's own tool must not be asked about")
	}
	spec := hs.Spec()
	spec.MCP = []provider.MCPServer{{Name: "fleet", URL: ns.url, Headers: map[string]string{"Authorization": "Bearer fleet-test-token"}, Tools: []string{"note"}}}
	s := hs.start(spec, h, provider.Options{})
	send(t, s, "use the fleet tool")
	if te := h.TurnEnded(t, 1, turnBound); te.Err != nil || te.Result != "noted it" {
		t.Fatalf("turn ended with %+v", te)
	}
	evs, perms := h.Snapshot()
	if len(perms) != 0 {
		t.Fatalf("the host was asked %d times: %+v", len(perms), perms)
	}
	s.Close()
	if s.st.autoAllowed != 0 {
		t.Fatalf("the CLI asked about the fleet's tool %d times; --allowedTools should have pre-allowed it", s.st.autoAllowed)
	}
	notes, auth := ns.seen()
	if len(notes) != 1 || notes[0] != "hello fleet" {
		t.Fatalf("the tool ran with %q; want one call with \"hello fleet\"", notes)
	}
	for _, a := range auth {
		if a != "Bearer fleet-test-token" {
			t.Fatalf("an MCP request came with Authorization %q", a)
		}
	}
	done := agentclitest.All[provider.ToolCompleted](evs)
	if len(done) != 1 || done[0].Name != "mcp__fleet__note" || done[0].IsError || !strings.Contains(done[0].Result, "noted: hello fleet") {
		t.Fatalf("tool completions = %+v", done)
	}
}
