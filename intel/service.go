package intel

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/agents-fleet/fleet/intel/record"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/skill"
)

// Publisher is where a Service sends the snapshots (the fleet's journal).
type Publisher interface {
	Broadcast(m protocol.Message)
}

// ServiceConfig is what a Service runs with. Session and Publisher are
// required.
type ServiceConfig struct {
	Session   record.Session // the fleet session it records
	Publisher Publisher
	Logger    *slog.Logger
	SkillDirs []string          // where skills are found, first wins (skill.Dirs)
	Cwd       string            // where /learn SKILL --from FILE reads a relative FILE
	Drafter   provider.Provider // drafts /learn patches; nil: the operator writes them
	Retention time.Duration     // sessions older than this are pruned at start; 0 keeps all
}

// Service is a fleet's intelligence (docs/intel.md), the engine's Intel: it
// records into the store through its Recorder, resolves skills and their
// A/B shadows, answers /fleet-intel and /learn, and publishes the four
// intelligence snapshots at start, after a command and when the store
// changed.
type Service struct {
	st      *Store
	rec     *Recorder
	pub     Publisher
	log     *slog.Logger
	dirs    []string
	cwd     string
	session record.Session
	drafter provider.Provider

	refreshCh chan struct{} // cap 1: publish the snapshots again
	stop      chan struct{}
	done      chan struct{}

	closeOnce sync.Once
	mu        sync.Mutex
	ab        map[string]int // per skill: tasks started since start-up, to alternate a shadow with the current version
}

// snapshotDebounce bounds how often store changes republish the snapshots.
const snapshotDebounce = time.Second

// StartService starts recording cfg.Session into st and publishing its
// snapshots. The Service owns st from now on: Close closes it.
func StartService(st *Store, cfg ServiceConfig) *Service {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{
		st: st, rec: st.NewRecorder(log), pub: cfg.Publisher, log: log, dirs: cfg.SkillDirs, cwd: cfg.Cwd,
		session: cfg.Session, drafter: cfg.Drafter,
		refreshCh: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), ab: map[string]int{},
	}
	s.rec.Session(cfg.Session)
	// Published before the fleet serves anyone, so every console's replay
	// has the four snapshots.
	s.publish()
	go s.loop(cfg.Retention)
	return s
}

// Close records the session's end and flushes, bounded by ctx, and closes
// the store. Later calls do nothing.
func (s *Service) Close(ctx context.Context) {
	s.closeOnce.Do(func() { s.close(ctx) })
}

func (s *Service) close(ctx context.Context) {
	close(s.stop)
	<-s.done
	s.session.EndedAt = time.Now().UnixMilli()
	s.rec.Session(s.session)
	if err := s.rec.Close(ctx); err != nil {
		s.log.Warn("intel store: not everything was written", "err", err)
	}
	if n := s.rec.Dropped(); n > 0 {
		s.log.Warn("intel store: records dropped while the store was slow", "count", n)
	}
	s.st.Close()
}

// Record queues a settled run; it never blocks.
func (s *Service) Record(r record.Run) { s.rec.Run(r) }

// Steer queues an operator's steering; it never blocks.
func (s *Service) Steer(st record.Steering) { s.rec.Steering(st) }

// Refresh asks for the snapshots to be published again.
func (s *Service) Refresh() {
	select {
	case s.refreshCh <- struct{}{}:
	default:
	}
}

// loop publishes the snapshots when asked, and after the store changed
// (at most once per snapshotDebounce).
func (s *Service) loop(retention time.Duration) {
	defer close(s.done)
	if retention > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if res, err := s.st.Prune(ctx, time.Now().Add(-retention)); err != nil {
			s.log.Warn("intel store: prune by intel.retentionDays", "err", err)
		} else if res.Sessions > 0 {
			s.log.Info("intel store: pruned old sessions", "sessions", res.Sessions, "runs", res.Runs)
		}
		cancel()
	}
	var debounce <-chan time.Time
	for {
		select {
		case <-s.stop:
			return
		case <-s.refreshCh:
			s.publish()
		case <-s.rec.Changed():
			if debounce == nil {
				debounce = time.After(snapshotDebounce)
			}
		case <-debounce:
			debounce = nil
			s.publish()
		}
	}
}

// publish computes and broadcasts the snapshots; the control server caches
// them for late consoles. One that cannot be computed is left out.
func (s *Service) publish() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	snap, err := s.st.Snapshots(ctx, time.Now())
	if err != nil {
		s.log.Warn("intel snapshots", "err", err)
	}
	for _, m := range snap.Messages() {
		s.pub.Broadcast(m)
	}
}

// Skill resolves name for a new task. While the skill has a shadow being
// evaluated, tasks alternate between the current version and the shadow
// (the first one gets the current version), so both are tried on real
// work.
func (s *Service) Skill(ctx context.Context, name string) (record.SkillUse, error) {
	sk, err := skill.Find(s.dirs, name)
	if err != nil {
		return record.SkillUse{}, err
	}
	v, err := s.st.RegisterSkill(ctx, name, sk.Content)
	if err != nil {
		return record.SkillUse{}, err
	}
	use := record.SkillUse{Name: name, Version: v.Version, Text: sk.Content}
	shadows, err := s.st.Shadows(ctx, name)
	if err != nil {
		return record.SkillUse{}, err
	}
	for _, sh := range shadows {
		if sh.Status != "evaluating" {
			continue
		}
		s.mu.Lock()
		n := s.ab[name]
		s.ab[name]++
		s.mu.Unlock()
		if n%2 == 1 {
			use.Shadow, use.Text = sh.ID, sh.Content
		}
		break
	}
	return use, nil
}

// Command answers /fleet-intel and /learn.
func (s *Service) Command(ctx context.Context, name, args string) (string, error) {
	f := strings.Fields(args)
	switch name {
	case "/fleet-intel":
		return s.fleetIntel(ctx, f)
	case "/learn":
		return s.learn(ctx, f)
	}
	return "", fmt.Errorf("unknown intel command %s", name)
}

func (s *Service) fleetIntel(ctx context.Context, f []string) (string, error) {
	const usage = "Usage: /fleet-intel, /fleet-intel accept ID, /fleet-intel dismiss ID"
	if len(f) == 2 && (f[0] == "accept" || f[0] == "dismiss") {
		if err := s.st.SetSuggestionState(ctx, f[1], f[0]+"ed"); err != nil {
			return "", err
		}
		s.Refresh()
		if f[0] == "accept" {
			return fmt.Sprintf("Accepted %s: it is no longer pending (acting on it is up to you).", f[1]), nil
		}
		return fmt.Sprintf("Dismissed %s: it will not be suggested again.", f[1]), nil
	}
	if len(f) != 0 {
		return usage, nil
	}
	// Make what this session did so far count.
	_ = s.rec.Flush(ctx)
	now := time.Now()
	in, err := s.st.Intel(ctx, now)
	if err != nil {
		return "", err
	}
	sugg, err := s.st.Suggestions(ctx, now)
	if err != nil {
		return "", err
	}
	s.Refresh()
	sum := in.Summary
	var b strings.Builder
	fmt.Fprintf(&b, "%d session(s), %d agent run(s), %d failed (success rate %.0f%%), %d tokens",
		sum.SessionCount, sum.TotalAgentRuns, sum.FailedRuns, sum.SuccessRate*100, sum.TotalTokens)
	if sum.AvgSessionDurationMs > 0 {
		fmt.Fprintf(&b, ", sessions last %s on average", time.Duration(sum.AvgSessionDurationMs*float64(time.Millisecond)).Round(time.Second))
	}
	if len(sum.TopErrors) > 0 {
		b.WriteString("\nTop errors:")
		for _, e := range sum.TopErrors {
			fmt.Fprintf(&b, "\n  %d× %s", e.Count, e.Message)
		}
	}
	pending := 0
	for _, sg := range sugg {
		if sg.State != StatePending {
			continue
		}
		if pending == 0 {
			b.WriteString("\nSuggestions (/fleet-intel accept|dismiss ID):")
		}
		pending++
		fmt.Fprintf(&b, "\n  %s [%s, confidence %.2f] %s\n      evidence: %s", sg.ID, sg.Rule, sg.Confidence, sg.Title, sg.Evidence)
	}
	if pending == 0 {
		b.WriteString("\nNo suggestions: no rule fires on the data so far (docs/intel.md lists the rules).")
	}
	return b.String(), nil
}
