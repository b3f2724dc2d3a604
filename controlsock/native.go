package controlsock

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agents-fleet/fleet/protocol"
)

// handleNative answers a nativeRoot frame. Every frame whose type is
// nativeRoot gets a nativeRootResult, never the top-level error frame:
// refusals are kind "error" with a stable code, and id is null when the
// frame's id is missing or not a string. Valid requests run on their own
// goroutine so a slow one never blocks the connection's reader; at most
// MaxInflight run at once per client.
func (c *client) handleNative(frame []byte) {
	id := nativeID(frame)
	if err := protocol.CheckNativeFrame(frame); err != nil {
		c.sendNative(id, nativeError(err))
		return
	}
	var env struct {
		Request json.RawMessage `json:"request"`
	}
	if err := json.Unmarshal(frame, &env); err != nil {
		c.sendNative(id, protocol.NativeResult{Kind: protocol.NativeKindError, Code: "invalid_frame", Message: "frame is not valid JSON"})
		return
	}
	req, err := protocol.ParseNativeRequest(env.Request)
	if err != nil {
		c.sendNative(id, nativeError(err))
		return
	}
	select {
	case c.inflight <- struct{}{}:
	default:
		c.sendNative(id, protocol.NativeResult{Kind: protocol.NativeKindError, Code: "overloaded", Message: "too many native requests in flight on this connection"})
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() { <-c.inflight }()
		res := c.srv.cfg.Backend.Native(c.ctx, req)
		c.sendNative(id, res)
	}()
}

func (c *client) sendNative(id *string, res protocol.NativeResult) {
	frame, _, err := protocol.AppendFit(nil, &protocol.NativeRootResult{ID: id, Result: res})
	if err == protocol.ErrFrameTooLarge {
		c.srv.log.Error("nativeRootResult too large to send", "kind", res.Kind)
		frame, err = protocol.Encode(&protocol.NativeRootResult{ID: id, Result: protocol.NativeResult{Kind: protocol.NativeKindError,
			Code: "frame_too_large", Message: fmt.Sprintf("the result is over %d bytes and cannot be sent", protocol.MaxFrameSize)}})
	}
	if err != nil {
		c.srv.log.Error("encode nativeRootResult", "err", err)
		return
	}
	c.enqueue(frame)
}

// nativeID extracts the transport id, or nil when it is missing or not a
// non-empty string.
func nativeID(frame []byte) *string {
	var env struct {
		ID any `json:"id"`
	}
	if len(frame) > protocol.MaxNativeFrameSize || json.Unmarshal(frame, &env) != nil {
		return nil
	}
	s, ok := env.ID.(string)
	if !ok || s == "" || len(s) > 256 {
		return nil
	}
	return &s
}

// nativeError maps a frame or request refusal to a stable code and a
// message that is safe to show.
func nativeError(err error) protocol.NativeResult {
	if errors.Is(err, protocol.ErrFrameTooLarge) {
		return protocol.NativeResult{Kind: protocol.NativeKindError, Code: "frame_too_large",
			Message: fmt.Sprintf("nativeRoot frames are limited to %d bytes", protocol.MaxNativeFrameSize)}
	}
	var de *protocol.DecodeError
	if errors.As(err, &de) {
		return protocol.NativeResult{Kind: protocol.NativeKindError, Code: "invalid_request", Message: de.Msg}
	}
	return protocol.NativeResult{Kind: protocol.NativeKindError, Code: "invalid_request", Message: "invalid nativeRoot request"}
}
