package tui

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/protocol"
)

// Key is a key press as the app decodes it: Name for special keys ("enter",
// "esc", "tab", "shift+tab", "up", "down", "left", "right", "pgup",
// "pgdown", "home", "end", "backspace", "delete", "ctrl+c", "ctrl+u", …),
// Text for printable input (one or more runes; a paste too).
type Key struct{ Name, Text string }

// text is the printable input of k: Text, or a one-rune Name.
func (k Key) text() string {
	if k.Text != "" {
		return k.Text
	}
	if k.Name == "space" {
		return " "
	}
	if r, n := utf8.DecodeRuneInString(k.Name); n == len(k.Name) && n > 0 && unicode.IsPrint(r) {
		return k.Name
	}
	return ""
}

// input says which text line has the keyboard.
type input int

const (
	inputNone input = iota
	inputPrompt
	inputSearch // worker transcript search
	inputFilter // feed text filter
	inputAnswer // freeform answer to an ask
)

// confirmation is a pending "…? y/n" question; yes runs on y.
type confirmation struct {
	question string
	yes      func() []Action
}

// ui is the interface state, separate from what fleets sent.
type ui struct {
	view    view
	help    bool
	helpTop int
	picker  bool

	pickerSel int

	workerSel string    // selected worker id (or name)
	detail    bool      // the selected worker's transcript is open
	diff      *diffPane // a worker's diff, shown in place of the table or transcript
	follow    bool
	top       int64 // sequence number of the first transcript line shown
	search    string
	match     int64 // sequence number of the current match, -1 for none

	feedKind   feedKind
	feedFilter string
	feedBack   int // entries scrolled back from the newest

	taskTop  int
	convBack int // display lines scrolled back from the newest

	reqSel    string // selected request id
	choiceSel int    // highlighted choice of the selected ask, -1 for none
	reqScroll int    // lines scrolled within the Requests view

	focus     input
	prompt    lineEditor
	line      lineEditor // search, filter or answer being typed
	answerFor string     // request id the answer line is for

	history []string
	histIdx int
	draft   string

	confirm    *confirmation
	flash      string
	candidates []string
}

func (u *ui) init() {
	u.view = viewWorkers
	u.follow = true
	u.match = -1
	u.choiceSel = -1
}

// resetFleetUI forgets selections that belong to the previous fleet.
func (m *Model) resetFleetUI() {
	m.detail, m.follow, m.top = false, true, 0
	m.search, m.match = "", -1
	m.workerSel, m.reqSel, m.choiceSel, m.reqScroll = "", "", -1, 0
	m.feedBack, m.taskTop, m.convBack = 0, 0, 0
	m.confirm, m.diff = nil, nil
	if m.focus != inputPrompt {
		m.focus = inputNone
	}
}

// Key handles one key press and returns what the app must do.
func (m *Model) Key(k Key) []Action {
	m.flash, m.candidates = "", nil
	name, text := k.Name, k.text()
	if name == "ctrl+c" {
		ed := m.editor()
		if ed != nil && ed.len() > 0 {
			ed.clear() // the first ctrl+c clears the line, the second quits
			return nil
		}
		return []Action{Quit{}}
	}
	if c := m.confirm; c != nil {
		m.confirm = nil
		if text == "y" || text == "Y" {
			return c.yes()
		}
		m.flash = "cancelled"
		return nil
	}
	if m.focus != inputNone {
		return m.inputKey(name, text)
	}
	if utf8.RuneCountInString(text) > 1 {
		return nil // a paste outside a text line is not a string of commands
	}
	if m.help {
		return m.helpKey(name, text)
	}
	if m.picker {
		return m.pickerKey(name, text)
	}
	if acts, ok := m.viewKey(name, text); ok {
		return acts
	}
	switch {
	case text == "q":
		return []Action{Quit{}}
	case text == "?":
		m.help, m.helpTop = true, 0
	case len(text) == 1 && text[0] >= '1' && text[0] <= '8':
		m.setView(view(text[0] - '0'))
	case name == "tab":
		m.setView(view(int(m.view)%numViews + 1))
	case name == "shift+tab":
		m.setView(view((int(m.view)+numViews-2)%numViews + 1))
	case text == "r":
		m.setView(viewRequests)
	case text == "F":
		m.picker = true
		m.pickerSel = max(slices.IndexFunc(m.refs, func(r FleetRef) bool { return r.ID == m.sel }), 0)
	case text == "]":
		return m.cycleFleet(1)
	case text == "[":
		return m.cycleFleet(-1)
	case text == ":" || text == "i":
		m.focusPrompt("")
	case text == "/":
		m.focusPrompt("/")
	}
	return nil
}

func (m *Model) setView(v view) {
	if v == m.view {
		return
	}
	m.view = v
	m.reqScroll = 0
}

func (m *Model) focusPrompt(prefill string) {
	m.focus = inputPrompt
	if prefill != "" {
		m.prompt.set(prefill)
	}
	m.histIdx = len(m.history)
}

// editor is the text line that has the keyboard, or nil.
func (m *Model) editor() *lineEditor {
	switch m.focus {
	case inputNone:
		return nil
	case inputPrompt:
		return &m.prompt
	}
	return &m.line
}

func (m *Model) cycleFleet(step int) []Action {
	i := slices.IndexFunc(m.refs, func(r FleetRef) bool { return r.ID == m.sel })
	if len(m.refs) == 0 || len(m.refs) == 1 && i == 0 {
		m.flash = "only one fleet"
		return nil
	}
	if i < 0 { // the current fleet stopped: ] goes to the first, [ to the last
		i = -1
		if step < 0 {
			i = len(m.refs)
		}
	}
	i = (i + step + len(m.refs)) % len(m.refs)
	id := m.refs[i].ID
	m.Select(id)
	return []Action{SwitchFleet{ID: id}}
}

func (m *Model) helpKey(name, text string) []Action {
	switch {
	case text == "?" || name == "esc":
		m.help = false
	case text == "q":
		return []Action{Quit{}}
	case name == "down" || name == "pgdown":
		m.helpTop++
	case name == "up" || name == "pgup":
		m.helpTop = max(m.helpTop-1, 0)
	}
	return nil
}

func (m *Model) pickerKey(name, text string) []Action {
	switch {
	case text == "F" || name == "esc":
		m.picker = false
	case text == "q":
		return []Action{Quit{}}
	case name == "up":
		m.pickerSel = max(m.pickerSel-1, 0)
	case name == "down":
		m.pickerSel = min(m.pickerSel+1, max(len(m.refs)-1, 0))
	case name == "enter":
		m.picker = false
		if m.pickerSel < len(m.refs) {
			id := m.refs[m.pickerSel].ID
			m.Select(id)
			return []Action{SwitchFleet{ID: id}}
		}
	}
	return nil
}

// viewKey handles the keys of the current view; ok is false for keys it
// leaves to the global handler.
func (m *Model) viewKey(name, text string) (acts []Action, ok bool) {
	switch m.view {
	case viewWorkers:
		return m.workersKey(name, text)
	case viewTasks:
		switch name {
		case "up":
			m.taskTop = max(m.taskTop-1, 0)
			return nil, true
		case "down":
			m.taskTop++
			return nil, true
		}
	case viewFeed:
		return m.feedKey(name, text)
	case viewRequests:
		return m.requestsKey(name, text)
	case viewConversation:
		return m.scrollKey(&m.convBack, name)
	case viewNative:
		return m.nativeKey(name, text)
	}
	return nil, false
}

// scrollKey scrolls a bottom-anchored view (*back lines from the end).
func (m *Model) scrollKey(back *int, name string) ([]Action, bool) {
	page := max(m.bodyHeight()-1, 1)
	switch name {
	case "up":
		*back++
	case "down":
		*back = max(*back-1, 0)
	case "pgup":
		*back += page
	case "pgdown":
		*back = max(*back-page, 0)
	case "end":
		*back = 0
	case "home":
		*back = 1 << 30 // clamped when drawn
	default:
		return nil, false
	}
	return nil, true
}

// Workers.

// workerRow is one row of the Workers table.
type workerRow struct {
	id, name string // raw, as the fleet knows the worker
	w        *protocol.FleetWorkerSummary
	status   string // raw
}

func (f *fleet) workerRows() []workerRow {
	if f == nil {
		return nil
	}
	var rows []workerRow
	if f.state != nil && len(f.state.Workers) > 0 {
		for i := range f.state.Workers {
			w := &f.state.Workers[i]
			rows = append(rows, workerRow{id: w.ID, name: w.Name, w: w, status: w.Status})
		}
		return rows
	}
	if f.status != nil {
		for _, w := range f.status.Workers {
			rows = append(rows, workerRow{id: w.Name, name: w.Name, status: w.Status})
		}
	}
	return rows
}

// ref is the name commands use for the worker.
func (r workerRow) ref() string {
	if r.name != "" {
		return r.name
	}
	return r.id
}

func (m *Model) selectedWorker() (workerRow, int, bool) {
	rows := m.cur().workerRows()
	if len(rows) == 0 {
		return workerRow{}, -1, false
	}
	for i, r := range rows {
		if r.id == m.workerSel {
			return r, i, true
		}
	}
	return rows[0], 0, true
}

func (m *Model) workersKey(name, text string) ([]Action, bool) {
	rows := m.cur().workerRows()
	w, i, ok := m.selectedWorker()
	switch {
	case m.diff != nil:
		if m.diffKey(name) {
			return nil, true
		}
	case m.detail:
		if acts, done := m.detailKey(name, text); done {
			return acts, true
		}
	default:
		switch name {
		case "up", "down":
			if ok {
				i = min(max(i+step(name), 0), len(rows)-1)
				m.workerSel = rows[i].id
			}
			return nil, true
		case "home":
			if ok {
				m.workerSel = rows[0].id
			}
			return nil, true
		case "end":
			if ok {
				m.workerSel = rows[len(rows)-1].id
			}
			return nil, true
		case "enter":
			if ok {
				m.workerSel = w.id
				m.detail, m.follow = true, true
				m.search, m.match = "", -1
			}
			return nil, true
		}
	}
	if !ok || len(text) != 1 {
		return nil, false
	}
	ref := w.ref()
	switch text {
	case "d":
		m.workerSel = w.id // the pane's worker keeps the keys' selection
		return m.openDiff(ref), true
	case "m":
		m.askYesNo("merge "+oneLine(ref)+"? y/n", func() []Action { return m.sendPrompt("/merge " + ref) })
		return nil, true
	case "p":
		m.askYesNo("open a pull request for "+oneLine(ref)+"? y/n", func() []Action { return m.sendPrompt("/pr " + ref) })
		return nil, true
	case "x":
		m.askYesNo("cancel worker "+oneLine(ref)+"? y/n", func() []Action { return m.sendPrompt("/cancel " + ref) })
		return nil, true
	case "t":
		m.focusPrompt("/tell " + ref + " ")
		return nil, true
	case "a":
		// Apply is the one landing step that works on the operator's own
		// work tree, not the fleet's: it runs `fleet apply` here.
		f := m.cur()
		if f == nil || f.welcome == nil || f.welcome.SessionID == "" || f.welcome.Cwd == "" {
			m.flash = "apply needs the fleet's session and folder (not known yet)"
			return nil, true
		}
		sid, dir, id := f.welcome.SessionID, f.welcome.Cwd, w.id
		m.askYesNo("apply "+oneLine(ref)+"'s change to the work tree in "+oneLine(dir)+"? y/n", func() []Action {
			return []Action{RunFleet{Fleet: f.ref.ID, Dir: dir, Args: []string{"apply", sid + "/" + id}}}
		})
		return nil, true
	}
	return nil, false
}

// askYesNo opens the confirmation line.
func (m *Model) askYesNo(question string, yes func() []Action) {
	m.confirm = &confirmation{question: question, yes: yes}
}

func (m *Model) detailKey(name, text string) ([]Action, bool) {
	lg := m.detailLog()
	page := max(m.bodyHeight()-2, 1)
	switch {
	case name == "esc":
		m.detail = false
	case name == "up":
		m.scrollDetail(lg, -1)
	case name == "down":
		m.scrollDetail(lg, 1)
	case name == "pgup":
		m.scrollDetail(lg, -page)
	case name == "pgdown":
		m.scrollDetail(lg, page)
	case name == "home":
		m.follow = false
		if lg != nil {
			m.top = lg.lines.firstSeq()
		}
	case name == "end" || text == "f":
		m.follow = true
	case text == "/":
		m.focus = inputSearch
		m.line.set(m.search)
	case text == "n":
		m.jump(lg, 1)
	case text == "N":
		m.jump(lg, -1)
	default:
		return nil, false
	}
	return nil, true
}

// detailLog is the transcript of the open worker.
func (m *Model) detailLog() *workerLog {
	w, _, ok := m.selectedWorker()
	if !ok {
		return nil
	}
	return m.cur().log(w.name, w.id)
}

// scrollDetail moves the transcript by delta lines; scrolling leaves follow.
func (m *Model) scrollDetail(lg *workerLog, delta int) {
	if lg == nil {
		return
	}
	first := lg.lines.firstSeq()
	lastTop := max(lg.lines.total-int64(m.transcriptRows()), first)
	m.top = min(max(m.screenTop(lg)+int64(delta), first), lastTop)
	m.follow = false
}

// jump moves to the next (dir 1) or previous (dir -1) search match,
// wrapping around.
func (m *Model) jump(lg *workerLog, dir int) {
	if lg == nil || m.search == "" {
		return
	}
	matches := searchLines(lg, m.search)
	if len(matches) == 0 {
		m.match = -1
		m.flash = "no match for " + oneLine(m.search)
		return
	}
	from := m.match
	if from < 0 {
		from = m.screenTop(lg)
		if dir > 0 {
			from-- // a match on the top line counts
		}
	}
	next := int64(-1)
	if dir > 0 {
		if i := slices.IndexFunc(matches, func(s int64) bool { return s > from }); i >= 0 {
			next = matches[i]
		} else {
			next = matches[0]
		}
	} else {
		next = matches[len(matches)-1]
		for i := len(matches) - 1; i >= 0; i-- {
			if matches[i] < from {
				next = matches[i]
				break
			}
		}
	}
	m.match, m.follow = next, false
	m.top = max(next-int64(m.transcriptRows()/2), lg.lines.firstSeq())
}

// searchLines returns the sequence numbers of the lines containing q,
// ignoring case.
func searchLines(lg *workerLog, q string) []int64 {
	q = strings.ToLower(q)
	var out []int64
	for i := 0; i < lg.lines.len(); i++ {
		if strings.Contains(strings.ToLower(lg.lines.at(i).text), q) {
			out = append(out, lg.lines.firstSeq()+int64(i))
		}
	}
	return out
}

// screenTop is the sequence number of the first transcript line shown.
func (m *Model) screenTop(lg *workerLog) int64 {
	first := lg.lines.firstSeq()
	lastTop := max(lg.lines.total-int64(m.transcriptRows()), first)
	if m.follow {
		return lastTop
	}
	return min(max(m.top, first), lastTop)
}

// Feed.

func (m *Model) feedKey(name, text string) ([]Action, bool) {
	switch {
	case text == "/":
		m.focus = inputFilter
		m.line.set(m.feedFilter)
		return nil, true
	case text == "k":
		m.feedKind = (m.feedKind + 1) % numFeedKinds
		m.feedBack = 0
		return nil, true
	}
	return m.scrollKey(&m.feedBack, name)
}

// Requests.

func (m *Model) selectedRequest() (*request, int) {
	f := m.cur()
	if f == nil || len(f.pending) == 0 {
		return nil, -1
	}
	for i, r := range f.pending {
		if r.id == m.reqSel {
			return r, i
		}
	}
	return f.pending[0], 0
}

func (m *Model) requestsKey(name, text string) ([]Action, bool) {
	f := m.cur()
	r, i := m.selectedRequest()
	if r == nil {
		return nil, false
	}
	switch name {
	case "up", "down":
		i = min(max(i+step(name), 0), len(f.pending)-1)
		m.reqSel, m.choiceSel, m.reqScroll = f.pending[i].id, -1, 0
		return nil, true
	case "pgdown":
		m.reqScroll += max(m.bodyHeight()-2, 1)
		return nil, true
	case "pgup":
		m.reqScroll = max(m.reqScroll-max(m.bodyHeight()-2, 1), 0)
		return nil, true
	case "left", "right":
		if n := len(r.choices()); n > 0 {
			if name == "left" {
				m.choiceSel = max(m.choiceSel-1, 0)
			} else {
				m.choiceSel = min(m.choiceSel+1, n-1)
			}
		}
		return nil, true
	case "enter":
		if c := r.choices(); m.choiceSel >= 0 && m.choiceSel < len(c) {
			return m.answerAsk(f, r, c[m.choiceSel].Value, oneLine(choiceLabel(c[m.choiceSel]))), true
		}
		if r.ask != nil {
			m.flash = "pick a choice first (1-9 or ←/→)"
		}
		return nil, true
	}
	if r.answering != "" && (text == "y" || text == "n" || text == "i" || isDigit(text)) {
		m.flash = "already answered: waiting for the fleet"
		return nil, true
	}
	switch {
	case r.confirm != nil && (text == "y" || text == "n"):
		approve := text == "y"
		word := "deny"
		if approve {
			word = "approve"
		}
		if !m.canSend(f) {
			return nil, true
		}
		r.answering = word
		f.answered.add(r.id)
		return []Action{Send{Fleet: f.ref.ID, Msg: &protocol.ConfirmResponse{ID: r.id, Approve: approve}}}, true
	case r.ask != nil && len(r.choices()) > 0 && isDigit(text):
		n := int(text[0] - '0')
		c := r.choices()
		if n < 1 || n > len(c) || n > 9 {
			m.flash = "no choice " + text
			return nil, true
		}
		return m.answerAsk(f, r, c[n-1].Value, oneLine(choiceLabel(c[n-1]))), true
	case r.ask != nil && text == "i":
		if !r.freeform() {
			m.flash = "this question takes one of its choices"
			return nil, true
		}
		m.focus, m.answerFor = inputAnswer, r.id
		m.line.clear()
		return nil, true
	}
	return nil, false
}

// step is -1 for up, 1 for down.
func step(name string) int {
	if name == "up" {
		return -1
	}
	return 1
}

func isDigit(s string) bool { return len(s) == 1 && s[0] >= '0' && s[0] <= '9' }

func choiceLabel(c protocol.AskChoiceOption) string {
	if c.Label != "" {
		return c.Label
	}
	return c.Value
}

func (m *Model) answerAsk(f *fleet, r *request, value, shown string) []Action {
	if r.answering != "" {
		m.flash = "already answered: waiting for the fleet"
		return nil
	}
	if !m.canSend(f) {
		return nil
	}
	r.answering = shown
	f.answered.add(r.id)
	return []Action{Send{Fleet: f.ref.ID, Msg: &protocol.AskResponse{ID: r.id, Text: value}}}
}

// canSend says whether frames can go to f now, flashing why not.
func (m *Model) canSend(f *fleet) bool {
	if f == nil {
		m.flash = "no fleet selected"
		return false
	}
	if f.conn != connUp {
		m.flash = "not connected to " + f.name() + ": try again once it reconnects"
		return false
	}
	return true
}

// sendPrompt sends text as a prompt with a fresh requestId, remembered so
// its echo shows as ours.
func (m *Model) sendPrompt(text string) []Action {
	f := m.cur()
	if !m.canSend(f) {
		return nil
	}
	id := client.NewRequestID()
	f.own.add(id)
	m.flash = "sent: " + clipRunes(oneLine(text), 60)
	return []Action{Send{Fleet: f.ref.ID, Msg: &protocol.Prompt{Text: text, RequestID: id}}}
}

// Native.

func (m *Model) nativeKey(name, text string) ([]Action, bool) {
	f := m.cur()
	if f == nil {
		return nil, false
	}
	n := &f.native
	switch {
	case name == "up" || name == "down":
		if len(n.roots) > 0 {
			n.rootSel = min(max(n.rootSel+step(name), 0), len(n.roots)-1)
			n.rootID = n.roots[n.rootSel].ID
		}
		return nil, true
	case text == "r":
		if n.rootID == "" {
			return m.sendNative(f, protocol.NativeRequest{Action: protocol.NativeList}, false), true
		}
		return m.sendNative(f, protocol.NativeRequest{Action: protocol.NativeStatus, RootID: n.rootID}, false), true
	case text == "p" || text == "u" || text == "s":
		action := map[string]string{"p": protocol.NativePause, "u": protocol.NativeResume, "s": protocol.NativeStop}[text]
		st := n.status
		if st == nil || st.ID == "" {
			m.flash = "no root status yet: press r first"
			return nil, true
		}
		rootID, rev := st.ID, st.Revision
		m.askYesNo(action+" root "+oneLine(rootID)+" at revision "+itoa(rev)+"? y/n", func() []Action {
			req := protocol.NativeRequest{
				Action:           action,
				RootID:           rootID,
				OperationID:      "console-op-" + m.randHex(8),
				ExpectedRevision: protocol.Int(rev),
			}
			return m.sendNative(f, req, true)
		})
		return nil, true
	case text == "R":
		c := n.lastMut
		if c == nil || !c.uncertain {
			m.flash = "no uncertain mutation to retry"
			return nil, true
		}
		// Same operationId, revision and body: the fleet applies it at most once.
		return m.sendNative(f, c.req, true), true
	}
	return nil, false
}

func (m *Model) sendNative(f *fleet, req protocol.NativeRequest, mutation bool) []Action {
	if !m.canSend(f) {
		return nil
	}
	body, err := json.Marshal(req)
	if err != nil {
		m.flash = "cannot encode the request"
		return nil
	}
	c := &nativeCall{tid: "console-" + m.randHex(6), req: req, mutation: mutation}
	if old := f.native.lastMut; mutation && old != nil {
		f.native.forget(old.tid) // a retry replaces the uncertain call
	}
	f.native.track(c)
	m.flash = "sent: " + req.Action
	return []Action{Send{Fleet: f.ref.ID, Msg: &protocol.NativeRoot{ID: c.tid, Request: body}}}
}

// Text lines.

func (m *Model) inputKey(name, text string) []Action {
	ed := m.editor()
	switch name {
	case "esc":
		switch m.focus {
		case inputSearch:
			m.search, m.match = "", -1
		case inputFilter:
			m.feedFilter = ""
		}
		m.focus = inputNone
		return nil
	case "enter":
		return m.submit()
	case "backspace":
		ed.backspace()
	case "delete", "ctrl+d":
		ed.del()
	case "left", "ctrl+b":
		ed.move(-1)
	case "right", "ctrl+f":
		ed.move(1)
	case "home", "ctrl+a":
		ed.cur = 0
	case "end", "ctrl+e":
		ed.cur = len(ed.r)
	case "ctrl+u":
		ed.clear()
	case "ctrl+w":
		ed.deleteWord()
	case "up", "down":
		if m.focus == inputPrompt {
			m.recall(name == "up")
		}
	case "tab":
		if m.focus == inputPrompt {
			m.complete()
		}
	default:
		if text != "" {
			ed.insert(text)
		}
	}
	if m.focus == inputFilter {
		m.feedFilter, m.feedBack = ed.String(), 0 // the filter applies as typed
	}
	return nil
}

func (m *Model) submit() []Action {
	switch m.focus {
	case inputSearch:
		m.search = m.line.String()
		m.focus, m.match = inputNone, -1
		m.jump(m.detailLog(), 1)
		return nil
	case inputFilter:
		m.feedFilter = m.line.String()
		m.focus = inputNone
		return nil
	case inputAnswer:
		text := m.line.String()
		if strings.TrimSpace(text) == "" {
			return nil
		}
		f := m.cur()
		m.focus = inputNone
		for _, r := range f.pendingList() {
			if r.id == m.answerFor {
				return m.answerAsk(f, r, text, clipRunes(oneLine(text), 40))
			}
		}
		m.flash = "that question is no longer pending"
		return nil
	}
	text := m.prompt.String()
	if strings.TrimSpace(text) == "" {
		return nil
	}
	acts := m.sendPrompt(text)
	if acts == nil {
		return nil // not sent: keep the text
	}
	if len(m.history) == 0 || m.history[len(m.history)-1] != text {
		m.history = append(m.history, text)
		if len(m.history) > maxHistory {
			m.history = m.history[len(m.history)-maxHistory:]
		}
	}
	m.histIdx, m.draft = len(m.history), ""
	m.prompt.clear()
	m.focus = inputNone // sent: the keys are the views' again (: for another prompt)
	return acts
}

func (f *fleet) pendingList() []*request {
	if f == nil {
		return nil
	}
	return f.pending
}

// recall walks the prompt history; the line being typed is kept as draft.
func (m *Model) recall(older bool) {
	if len(m.history) == 0 {
		return
	}
	if m.histIdx == len(m.history) {
		m.draft = m.prompt.String()
	}
	if older {
		m.histIdx = max(m.histIdx-1, 0)
	} else {
		m.histIdx = min(m.histIdx+1, len(m.history))
	}
	if m.histIdx == len(m.history) {
		m.prompt.set(m.draft)
	} else {
		m.prompt.set(m.history[m.histIdx])
	}
}

// complete completes a slash command from the fleet's catalog: the only
// match, else the common prefix with the candidates listed.
func (m *Model) complete() {
	text := m.prompt.String()
	if !strings.HasPrefix(text, "/") || strings.ContainsAny(text, " ") || m.prompt.cur != len(m.prompt.r) {
		return
	}
	var names []string
	if f := m.cur(); f != nil && f.catalog != nil {
		for _, c := range f.catalog.Commands {
			if strings.HasPrefix(c.Name, text) && !slices.Contains(names, c.Name) {
				names = append(names, c.Name)
			}
		}
	}
	slices.Sort(names)
	switch len(names) {
	case 0:
		m.flash = "no command starts with " + oneLine(text)
	case 1:
		m.prompt.set(names[0] + " ")
	default:
		p := names[0]
		for _, n := range names[1:] {
			for !strings.HasPrefix(n, p) {
				p = p[:len(p)-1]
			}
		}
		m.prompt.set(p)
		for i := range names {
			names[i] = oneLine(names[i])
		}
		m.candidates = names
	}
}

// lineEditor is a one-line text field.
type lineEditor struct {
	r   []rune
	cur int
}

func (e *lineEditor) String() string { return string(e.r) }
func (e *lineEditor) len() int       { return len(e.r) }
func (e *lineEditor) clear()         { e.r, e.cur = e.r[:0], 0 }

func (e *lineEditor) set(s string) {
	e.clear()
	e.insert(s)
}

// insert types s at the cursor; line breaks and tabs of a paste become
// spaces and other control characters are dropped.
func (e *lineEditor) insert(s string) {
	var add []rune
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			if len(add) == 0 || add[len(add)-1] != ' ' || r != '\n' {
				add = append(add, ' ')
			}
		case unicode.IsControl(r) || r == utf8.RuneError:
		default:
			add = append(add, r)
		}
	}
	e.r = slices.Insert(e.r, e.cur, add...)
	e.cur += len(add)
}

func (e *lineEditor) backspace() {
	if e.cur > 0 {
		e.r = slices.Delete(e.r, e.cur-1, e.cur)
		e.cur--
	}
}

func (e *lineEditor) del() {
	if e.cur < len(e.r) {
		e.r = slices.Delete(e.r, e.cur, e.cur+1)
	}
}

func (e *lineEditor) move(d int) { e.cur = min(max(e.cur+d, 0), len(e.r)) }

func (e *lineEditor) deleteWord() {
	i := e.cur
	for i > 0 && e.r[i-1] == ' ' {
		i--
	}
	for i > 0 && e.r[i-1] != ' ' {
		i--
	}
	e.r = slices.Delete(e.r, i, e.cur)
	e.cur = i
}
