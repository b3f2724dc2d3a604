package hosts

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerLogger routes an embedded NATS server's log to log: its notices
// (start-up, connections) at debug, warnings and errors as such. The same
// error repeated within a minute is logged once (a host whose credential
// is refused retries every second or two; numbers such as connection ids
// and ports do not count). onError, when set, sees every
// error and warning, repeated or not.
func ServerLogger(log *slog.Logger, onError func(msg string)) server.Logger {
	return &serverLog{log: log, onError: onError, last: map[string]time.Time{}}
}

type serverLog struct {
	log     *slog.Logger
	onError func(string)

	mu   sync.Mutex
	last map[string]time.Time // recent errors and warnings, when logged
}

// repeatQuiet is how long the same error is not logged again.
const repeatQuiet = time.Minute

func (l *serverLog) Noticef(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLog) Debugf(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLog) Tracef(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLog) Warnf(format string, v ...any) {
	l.report(slog.LevelWarn, fmt.Sprintf(format, v...))
}
func (l *serverLog) Errorf(format string, v ...any) {
	l.report(slog.LevelError, fmt.Sprintf(format, v...))
}
func (l *serverLog) Fatalf(format string, v ...any) {
	l.report(slog.LevelError, fmt.Sprintf(format, v...))
}

// numbers are left out of the key an error is repeated under: the same
// refusal comes with a new connection id and port each time.
var numbers = regexp.MustCompile(`[0-9]+`)

func (l *serverLog) report(level slog.Level, msg string) {
	if l.onError != nil {
		l.onError(msg)
	}
	key := numbers.ReplaceAllString(msg, "#")
	now := time.Now()
	l.mu.Lock()
	quiet := now.Sub(l.last[key]) < repeatQuiet
	if !quiet {
		if len(l.last) >= 256 { // bounded: forget the oldest
			for k, t := range l.last {
				if now.Sub(t) >= repeatQuiet {
					delete(l.last, k)
				}
			}
			if len(l.last) >= 256 {
				clear(l.last)
			}
		}
		l.last[key] = now
	}
	l.mu.Unlock()
	if !quiet {
		l.log.Log(context.Background(), level, msg)
	}
}
