package hub

// Bounded indexes the main loop keeps: the buttons it posted and the
// messages it sent, so a press or a reply can be traced to its fleet and
// request. Old entries fall out first; a press on a forgotten button is
// told the button expired.

const (
	maxButtons = 8192
	maxPosts   = 20000
)

// button is what one piece of callback data stands for.
type button struct {
	kind   string // buttonAttach, buttonConfirm, …
	fleet  string // fleet id
	req    *request
	value  string  // approve/deny, a choice's value, a root action
	text   string  // buttonRoute: the stashed prompt; root buttons: the root id
	rev    int64   // root buttons: the revision the operator saw
	used   bool    // a one-shot button (a root action's confirmation) was pressed
	routed *string // buttonRoute: shared by the question's buttons; the fleet it went to
	native *nativeItem
}

const (
	buttonAttach      = "attach"
	buttonConfirm     = "confirm"
	buttonAsk         = "ask"
	buttonRoute       = "route"
	buttonUse         = "use"
	buttonRoot        = "root"
	buttonRootConfirm = "root-confirm"
	buttonNative      = "native"
)

type buttonSet struct {
	m     map[string]*button
	order []string
}

func newButtonSet() *buttonSet { return &buttonSet{m: map[string]*button{}} }

// add stores b under a fresh token and returns the token.
func (s *buttonSet) add(b *button) string {
	t := newToken()
	s.m[t] = b
	s.order = append(s.order, t)
	if len(s.order) > maxButtons {
		delete(s.m, s.order[0])
		s.order = s.order[1:]
	}
	return t
}

func (s *buttonSet) get(token string) *button { return s.m[token] }

// postRef is what a sent message was about.
type postRef struct {
	fleet  string
	req    *request    // a confirm or ask
	native *nativeItem // a native approval or its rationale prompt
	// rationale is set on the message that asks for a native rationale:
	// a reply to it is the rationale for that verdict.
	rationale string
}

type msgKey struct{ chat, message int64 }

// postIndex maps handles (before Telegram answered) and then message ids to
// what they were about.
type postIndex struct {
	byHandle map[handle]postRef
	byMsg    map[msgKey]postRef
	order    []msgKey
}

func newPostIndex() *postIndex {
	return &postIndex{byHandle: map[handle]postRef{}, byMsg: map[msgKey]postRef{}}
}

func (p *postIndex) expect(h handle, ref postRef) {
	p.byHandle[h] = ref
	if len(p.byHandle) > maxPosts {
		// Sends that never completed; forget them all rather than grow.
		clear(p.byHandle)
	}
}

func (p *postIndex) bind(n sentNote) {
	ref, ok := p.byHandle[n.h]
	if ok {
		delete(p.byHandle, n.h)
	} else if n.fleet != "" {
		ref = postRef{fleet: n.fleet} // merged text: a reply to it is for its fleet
	} else {
		return
	}
	k := msgKey{n.chat, n.message}
	p.byMsg[k] = ref
	p.order = append(p.order, k)
	if len(p.order) > maxPosts {
		delete(p.byMsg, p.order[0])
		p.order = p.order[1:]
	}
}

func (p *postIndex) lookup(chat, message int64) (postRef, bool) {
	r, ok := p.byMsg[msgKey{chat, message}]
	return r, ok
}
