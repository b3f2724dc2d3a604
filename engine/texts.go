package engine

import "github.com/agents-fleet/fleet/protocol"

// Bounds on the texts the engine derives from prompts, task commands and
// agents' tool calls, in encoded bytes (protocol.EncodedLen): a longer one
// is cut with protocol.CutText, which marks the cut. A prompt itself may be
// up to protocol.MaxPromptText (the control server refuses more); what is
// built from it is shorter, so that no frame, however many texts it
// gathers (fleetState lists 50 tasks), approaches the frame cap.
const (
	// maxSubject bounds a task's command where it names the task: a
	// fleetState item, a loop's goal, the replies that list tasks.
	maxSubject = 1 << 10
	// maxActivityText bounds an activity event's text (hubEvent).
	maxActivityText = 4 << 10
	// maxToolDetail bounds a toolCall's detail.
	maxToolDetail = 4 << 10
	// maxToolInput bounds each string in a toolCall's input.
	maxToolInput = 16 << 10
	// maxRequestText bounds a confirm's summary, an ask's question and a
	// choice's label and description (never its value: that is the
	// answer).
	maxRequestText = 16 << 10
)

// cutInput returns in with every string cut to maxToolInput, at any depth;
// in itself when nothing is cut (a provider may still hold it: it is
// never written to).
func cutInput(in map[string]any) map[string]any {
	out, _ := cutMap(in)
	return out
}

func cutMap(in map[string]any) (map[string]any, bool) {
	var out map[string]any
	for k, v := range in {
		if c, changed := cutValue(v); changed {
			if out == nil {
				out = make(map[string]any, len(in))
				for k2, v2 := range in {
					out[k2] = v2
				}
			}
			out[k] = c
		}
	}
	if out == nil {
		return in, false
	}
	return out, true
}

func cutValue(v any) (any, bool) {
	switch v := v.(type) {
	case string:
		c := protocol.CutText(v, maxToolInput)
		return c, len(c) != len(v)
	case map[string]any:
		return cutMap(v)
	case []any:
		var out []any
		for i, e := range v {
			if c, changed := cutValue(e); changed {
				if out == nil {
					out = append([]any(nil), v...)
				}
				out[i] = c
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	}
	return v, false
}
