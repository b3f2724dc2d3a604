// Command modelmock serves a scripted model API (Anthropic Messages and
// OpenAI Responses) on a loopback address, for pointing the real agent CLIs
// at in tests and by hand:
//
//	go run ./cmd/modelmock --addr 127.0.0.1:18080 --script tour.json --log requests.jsonl
//
// It prints "modelmock listening on URL pid=N" and serves until SIGINT or
// SIGTERM, or until --max-requests requests or --lifetime have passed, so
// a forgotten one stops by itself. See internal/modelmock for the script
// format (LoadScript).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/agents-fleet/fleet/internal/modelmock"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// pollEvery is how often the request log is checked for --log and
// --max-requests.
const pollEvery = 50 * time.Millisecond

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("modelmock", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:18080", "loopback `address` to listen on (127.0.0.1:0 picks a free port)")
	scriptPath := fs.String("script", "", "script JSON `file` (default: every request gets the text reply \"ok\")")
	logPath := fs.String("log", "", "append every request, as one JSON line, to this `file`")
	maxRequests := fs.Int("max-requests", 1000, "stop after about this many requests (0: no limit)")
	lifetime := fs.Duration("lifetime", 30*time.Minute, "stop after this long (0: no limit)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "modelmock: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *maxRequests < 0 || *lifetime < 0 {
		fmt.Fprintln(stderr, "modelmock: --max-requests and --lifetime must not be negative")
		return 2
	}

	var script modelmock.Script
	if *scriptPath != "" {
		var err error
		if script, err = modelmock.LoadScript(*scriptPath); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	var logw *bufio.Writer
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintf(stderr, "modelmock: %v\n", err)
			return 1
		}
		defer f.Close()
		logw = bufio.NewWriter(f)
	}

	s, err := modelmock.StartAddr(*addr, script)
	if err != nil {
		fmt.Fprintln(stderr, err) // names the refused address for a non-loopback one
		return 2
	}
	fmt.Fprintf(stdout, "modelmock listening on %s pid=%d\n", s.URL(), os.Getpid())

	var deadline <-chan time.Time
	if *lifetime > 0 {
		t := time.NewTimer(*lifetime)
		defer t.Stop()
		deadline = t.C
	}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()

	logged := 0 // requests written to the log so far, in arrival order
	writeLog := func(reqs []modelmock.Request, all bool) {
		for ; logged < len(reqs); logged++ {
			q := reqs[logged]
			if !all && q.Status == 0 {
				break // still being answered; keep arrival order
			}
			if logw != nil {
				b, err := json.Marshal(q)
				if err != nil {
					fmt.Fprintf(stderr, "modelmock: log: %v\n", err)
					continue
				}
				logw.Write(append(b, '\n'))
			}
		}
		if logw != nil {
			if err := logw.Flush(); err != nil {
				fmt.Fprintf(stderr, "modelmock: log: %v\n", err)
			}
		}
	}

	reason := ""
	var limitAt time.Time // when --max-requests was reached
	for reason == "" {
		select {
		case <-ctx.Done():
			reason = "signal"
		case <-deadline:
			reason = fmt.Sprintf("--lifetime %s reached", *lifetime)
		case <-tick.C:
			reqs := s.Requests()
			writeLog(reqs, false)
			if *maxRequests > 0 && len(reqs) >= *maxRequests {
				// Let the requests in flight finish (briefly) before
				// Close cuts them off.
				if limitAt.IsZero() {
					limitAt = time.Now()
				}
				if logged == len(reqs) || time.Since(limitAt) > 5*time.Second {
					reason = fmt.Sprintf("--max-requests %d reached", *maxRequests)
				}
			}
		}
	}
	s.Close()
	reqs := s.Requests()
	writeLog(reqs, true)
	fmt.Fprintf(stderr, "modelmock: stopped (%s) after %d requests\n", reason, len(reqs))
	return 0
}
