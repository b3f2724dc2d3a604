package tui

import (
	"fmt"
	"testing"

	"github.com/agents-fleet/fleet/protocol"
)

func TestTaskKeys(t *testing.T) {
	m, _ := loaded(false)
	st := fleetState()
	st.Tasks.Items = nil
	for i := range 40 {
		st.Tasks.Items = append(st.Tasks.Items, protocol.FleetTaskItem{ID: fmt.Sprintf("t-%02d", i), Subject: "task", Status: "pending"})
	}
	st.Tasks.Total = 60
	m.Apply("f1", st, false)
	m.Resize(80, 24)
	press(m, "2")
	s := m.View()
	mustContain(t, s, "60 tasks", "(showing 40)", "t-00")
	press(m, "down", "down")
	s = m.View()
	mustNotContain(t, s, "t-01 ")
	mustContain(t, s, "t-02")
	press(m, "up", "up", "up")
	mustContain(t, m.View(), "t-00")
}
