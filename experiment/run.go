package experiment

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agents-fleet/fleet/internal/proctree"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/worktree"
)

// The environment variables a sample's task and check get.
const (
	EnvID      = "FLEET_EXPERIMENT_ID"      // the experiment's id
	EnvVariant = "FLEET_EXPERIMENT_VARIANT" // the arm's name
	EnvSample  = "FLEET_EXPERIMENT_SAMPLE"  // 1..samples, per variant and task
	EnvTask    = "FLEET_EXPERIMENT_TASK"    // 1..len(tasks)
)

// MaxParallel bounds Options.Parallel.
const MaxParallel = 64

const (
	// cleanupTimeout bounds closing a sample's session's leftovers and
	// removing its worktree, which happen even after ctx ended.
	cleanupTimeout = time.Minute
	// inspectTimeout bounds the check that an agent provider's CLI exists.
	inspectTimeout = 30 * time.Second
	// errorChars bounds a sample's error text.
	errorChars = 600
	// tailLines is how many lines of a failed task's or check's output
	// its error text quotes.
	tailLines = 5
	// checkWaitDelay is how long a finished check's output may stay open
	// (a child that escaped its process group) before it is abandoned.
	checkWaitDelay = 2 * time.Second
)

// Options configure Run. Dir, FleetHome and Providers are required.
type Options struct {
	// Dir is a directory inside the git repository whose HEAD every
	// sample's worktree starts from.
	Dir string
	// FleetHome holds the worktrees: <FleetHome>/worktrees/exp-<run id>.
	FleetHome string
	// Providers are the providers by name (daemon.BuildProviders).
	Providers map[string]provider.Provider
	// Skills returns a skill's content and version. nil: a variant with a
	// skill is an error.
	Skills func(name string) (content string, version int, err error)
	// Parallel is how many samples run at once; 0 means 1.
	Parallel int
	// Keep leaves the worktrees (and their branches) for inspection.
	Keep bool
	// Env is the base environment of tasks and checks; nil is the
	// process's own.
	Env []string
	// Progress, when set, is called after each sample, from the goroutine
	// that ran it (calls may be concurrent when Parallel > 1).
	Progress func(Sample)
	// Warn, when set, gets notes worth telling the user (a dirty work
	// tree, a worktree that could not be removed).
	Warn func(string)
	// RunID names the run; "" makes a random one.
	RunID string
	// Now is the clock for StartedAt and CompletedAt; nil is time.Now.
	Now func() time.Time
}

// Sample is one run of one task by one variant.
type Sample struct {
	Worker  string `json:"worker"` // s<N>, the worktree's name
	Variant string `json:"variant"`
	Task    int    `json:"task"`   // 1-based
	Sample  int    `json:"sample"` // 1-based, per variant and task
	Pass    bool   `json:"pass"`
	// DurationMs is the task's turn plus the check.
	DurationMs int64  `json:"durationMs"`
	Tokens     int64  `json:"tokens"` // input + output, from the provider's Usage
	Error      string `json:"error,omitempty"`
	// SetupError: the sample could not be run at all (no worktree, the
	// provider did not start or take the turn). Such samples are not
	// counted.
	SetupError bool `json:"setupError,omitempty"`
	// Interrupted: the run was cancelled while the sample ran; not
	// counted.
	Interrupted bool   `json:"interrupted,omitempty"`
	Worktree    string `json:"worktree,omitempty"` // set when the worktree was kept
}

// Result is one run of an experiment.
type Result struct {
	ID           string         `json:"id"`
	ExperimentID string         `json:"experimentId"`
	StartedAt    int64          `json:"startedAt"`   // Unix ms
	CompletedAt  int64          `json:"completedAt"` // Unix ms
	Variants     []VariantStats `json:"variants"`    // one per arm, the control first
	Decision
	// SetupErrors counts the samples that could not be run.
	SetupErrors int      `json:"setupErrors"`
	Samples     []Sample `json:"samples"`
	// Worktrees is the directory of the kept worktrees (Options.Keep).
	Worktrees string `json:"worktrees,omitempty"`
}

// Session is the worktree session name of run id: worktrees are on
// branches fleet/exp-<id>/s<N>.
func Session(runID string) string { return "exp-" + runID }

// job is one sample to run.
type job struct {
	index   int // into Result.Samples
	variant int
	task    int // 0-based
	sample  int // 1-based
}

type runner struct {
	f        *File
	o        Options
	mgr      *worktree.Manager
	skills   []string // per variant: the skill's content, "" for none
	versions []int    // per variant: the skill's version
	timeout  time.Duration
}

// Run runs every sample of f and returns the figures and the decision.
// Samples run in a fresh worktree each, interleaved (task, then sample,
// then variant) so that no arm gets all the early or late ones, at most
// Options.Parallel at once. Run returns an error before any sample runs
// when the directory is not in a git repository, a provider or skill is
// missing, or an agent provider's CLI cannot be found; a sample that fails
// to set up is counted in Result.SetupErrors and the rest still run. When
// ctx ends, running samples' sessions are closed, worktrees are removed
// and Run returns ctx's error with the partial result.
func Run(ctx context.Context, f *File, o Options) (*Result, error) {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	if o.Parallel == 0 {
		o.Parallel = 1
	}
	if o.Parallel < 1 || o.Parallel > MaxParallel {
		return nil, fmt.Errorf("parallel %d: want 1..%d", o.Parallel, MaxParallel)
	}
	if o.Dir == "" || o.FleetHome == "" {
		return nil, errors.New("experiment: Options.Dir and Options.FleetHome are required")
	}
	if o.RunID == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		o.RunID = hex.EncodeToString(b[:])
	}
	if o.Env == nil {
		o.Env = os.Environ()
	}
	r := &runner{f: f, o: o, timeout: time.Duration(f.TimeoutMs) * time.Millisecond}
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	session := Session(o.RunID)
	mgr, err := worktree.Open(ctx, o.Dir, filepath.Join(o.FleetHome, "worktrees", session), session)
	if err != nil {
		if errors.Is(err, worktree.ErrNotRepo) {
			return nil, fmt.Errorf("an experiment runs each sample in a fresh worktree of the git repository containing %s: %w", o.Dir, err)
		}
		return nil, err
	}
	if mgr.Head() == "" {
		os.Remove(mgr.Root())
		return nil, fmt.Errorf("repository %s has no commits yet; commit something first so samples have a HEAD to start from", mgr.RepoRoot())
	}
	if mgr.Dirty() {
		r.warn(fmt.Sprintf("the work tree of %s has uncommitted changes; samples start from HEAD without them", mgr.RepoRoot()))
	}
	r.mgr = mgr

	res := &Result{ID: o.RunID, ExperimentID: f.ID, StartedAt: now().UnixMilli()}
	for i, v := range f.Variants {
		vs := VariantStats{Variant: v.Name, Provider: v.Provider, Model: v.Model, Skill: v.Skill}
		if v.Skill != "" {
			vs.SkillVersion = r.versions[i]
		}
		res.Variants = append(res.Variants, vs)
	}
	var jobs []job
	for t := range f.Tasks {
		for s := 1; s <= f.Samples; s++ {
			for v := range f.Variants {
				jobs = append(jobs, job{index: len(jobs), variant: v, task: t, sample: s})
			}
		}
	}
	res.Samples = make([]Sample, len(jobs))
	ran := make([]bool, len(jobs))

	queue := make(chan job)
	var wg sync.WaitGroup
	for range min(o.Parallel, len(jobs)) {
		wg.Go(func() {
			for j := range queue {
				if ctx.Err() != nil {
					continue // handed over as the run was cancelled: never started
				}
				s := r.runSample(ctx, j)
				res.Samples[j.index], ran[j.index] = s, true
				if o.Progress != nil {
					o.Progress(s)
				}
			}
		})
	}
feed:
	for _, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		select {
		case queue <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(queue)
	wg.Wait()

	res.CompletedAt = now().UnixMilli()
	// Samples never started (cancelled) are dropped; the others keep the
	// file's order.
	kept := res.Samples[:0]
	for i, s := range res.Samples {
		if ran[i] {
			kept = append(kept, s)
			if s.SetupError {
				res.SetupErrors++
			}
		}
	}
	res.Samples = kept
	Summarise(res.Variants, res.Samples)
	res.Decision = Decide(res.Variants)
	if o.Keep {
		res.Worktrees = mgr.Root()
	} else {
		os.Remove(mgr.Root()) // only if empty: a worktree that could not be removed stays
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("experiment interrupted: %w", context.Cause(ctx))
	}
	return res, nil
}

// prepare checks, before anything runs, that every variant's provider is
// there (and an agent CLI is installed), and reads every skill once: all
// samples of a variant use the same content.
func (r *runner) prepare(ctx context.Context) error {
	inspected := map[string]bool{}
	r.skills = make([]string, len(r.f.Variants))
	r.versions = make([]int, len(r.f.Variants))
	for i, v := range r.f.Variants {
		p := r.o.Providers[v.Provider]
		if p == nil {
			return fmt.Errorf("variants[%d] (%s): no %s provider in this build", i, v.Name, v.Provider)
		}
		if in, ok := p.(provider.Inspector); ok && !inspected[v.Provider] {
			inspected[v.Provider] = true
			ictx, cancel := context.WithTimeout(ctx, inspectTimeout)
			ins := in.Inspect(ictx, r.o.Env)
			cancel()
			if ins.Err != nil {
				return fmt.Errorf("variants[%d] (%s): %w", i, v.Name, ins.Err)
			}
		}
		if v.Skill == "" {
			continue
		}
		if r.o.Skills == nil {
			return fmt.Errorf("variants[%d] (%s): skill %s: skills are not available", i, v.Name, v.Skill)
		}
		content, version, err := r.o.Skills(v.Skill)
		if err != nil {
			return fmt.Errorf("variants[%d] (%s): skill %s: %w", i, v.Name, v.Skill, err)
		}
		if strings.TrimSpace(content) == "" {
			return fmt.Errorf("variants[%d] (%s): skill %s is empty", i, v.Name, v.Skill)
		}
		r.skills[i], r.versions[i] = content, version
	}
	return nil
}

func (r *runner) warn(msg string) {
	if r.o.Warn != nil {
		r.o.Warn(msg)
	}
}

// sampleEnv is the environment of a sample's task and check: the base
// environment without fleet markers it may have inherited (this may run
// inside a fleet worker), plus the experiment's variables and the markers
// of this sample's own session.
func (r *runner) sampleEnv(j job, worker string) []string {
	env := make([]string, 0, len(r.o.Env)+7)
	for _, kv := range r.o.Env {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "FLEET_EXPERIMENT_") || name == provider.SessionEnv ||
			name == "AGENTS_FLEET_TASK" || name == "AGENTS_FLEET_WORKER" || name == proctree.RunEnv {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		provider.SessionEnv+"="+Session(r.o.RunID),
		"AGENTS_FLEET_WORKER="+worker,
		EnvID+"="+r.f.ID,
		EnvVariant+"="+r.f.Variants[j.variant].Name,
		EnvSample+"="+strconv.Itoa(j.sample),
		EnvTask+"="+strconv.Itoa(j.task+1),
	)
}

// runSample runs one sample: a fresh worktree, a session of the variant's
// provider, one turn with the task text, the check, and the cleanup.
func (r *runner) runSample(ctx context.Context, j job) (s Sample) {
	v := r.f.Variants[j.variant]
	worker := "s" + strconv.Itoa(j.index+1)
	s = Sample{Worker: worker, Variant: v.Name, Task: j.task + 1, Sample: j.sample}
	if ctx.Err() != nil {
		s.Interrupted, s.Error = true, "interrupted before it started"
		return s
	}
	wt, err := r.mgr.Create(ctx, worker)
	if err != nil {
		if ctx.Err() != nil {
			s.Interrupted, s.Error = true, "interrupted while creating its worktree"
			r.remove(ctx, worker, &s)
			return s
		}
		s.SetupError, s.Error = true, clip(err.Error())
		r.remove(ctx, worker, &s)
		return s
	}
	defer r.remove(ctx, worker, &s)

	sctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	// failed records why the sample failed: the run's cancellation, the
	// sample's timeout, or err.
	failed := func(what string, err error) Sample {
		switch {
		case ctx.Err() != nil:
			s.Interrupted, s.Error = true, "interrupted during the "+what
		case sctx.Err() != nil:
			s.Error = fmt.Sprintf("timed out after %s during the %s", r.timeout, what)
		default:
			s.Error = clip(what + " failed: " + err.Error())
		}
		return s
	}
	env := r.sampleEnv(j, worker)
	h := newHost(r.f.Permissions == PermissionsAllow)
	sess, err := r.o.Providers[v.Provider].Start(sctx, provider.Spec{
		Agent: worker, Role: provider.RoleWorker, Dir: wt.Path, Env: env, Model: v.Model,
	}, h)
	if err != nil {
		if sctx.Err() == nil {
			s.SetupError, s.Error = true, clip("start "+v.Provider+": "+err.Error())
			return s
		}
		return failed("start", err)
	}
	defer sess.Close()

	text := v.TaskText(r.f.Tasks[j.task], r.skills[j.variant])
	turnStart := time.Now()
	if err := sess.Send(sctx, provider.Turn{Text: text}); err != nil {
		if sctx.Err() == nil {
			s.SetupError, s.Error = true, clip("send the task to "+v.Provider+": "+err.Error())
			return s
		}
		return failed("task", err)
	}
	var end provider.TurnEnded
	select {
	case end = <-h.ended:
	case <-sess.Done():
		select {
		case end = <-h.ended:
		default:
			msg := "the session ended before the turn did"
			if err := sess.Err(); err != nil {
				msg += ": " + err.Error()
			}
			end = provider.TurnEnded{Err: errors.New(msg), ExitCode: -1}
		}
	case <-sctx.Done():
		sess.Close() // interrupts the turn and ends its processes
		s.DurationMs = time.Since(turnStart).Milliseconds()
		s.Tokens = h.tokens()
		return failed("task", sctx.Err())
	}
	turn := time.Since(turnStart)
	s.Tokens = h.tokens()
	// The turn is over: nothing of the session may touch the worktree
	// while the check looks at it.
	sess.Close()
	if end.Err != nil || end.Interrupted {
		s.DurationMs = turn.Milliseconds()
		err := end.Err
		if err == nil {
			err = errors.New("interrupted")
		}
		if tail := h.tail(); tail != "" {
			err = fmt.Errorf("%w: %s", err, tail)
		}
		return failed("task", err)
	}
	checkStart := time.Now()
	out, err := r.check(sctx, wt.Path, env)
	s.DurationMs = (turn + time.Since(checkStart)).Milliseconds()
	if err != nil {
		if out != "" {
			err = fmt.Errorf("%w: %s", err, out)
		}
		return failed("check", err)
	}
	s.Pass = true
	return s
}

// check runs the file's check with `sh -c` in dir. Everything it starts is
// ended when it exits or ctx ends. out is the tail of what it printed.
func (r *runner) check(ctx context.Context, dir string, env []string) (out string, err error) {
	tree := proctree.New()
	cmd := exec.CommandContext(ctx, "sh", "-c", r.f.Check)
	cmd.Dir = dir
	cmd.Env = tree.Env(env)
	tree.Prepare(cmd)
	cmd.Cancel = func() error { tree.Kill(cmd); return nil }
	cmd.WaitDelay = checkWaitDelay
	var tail lineTail
	cmd.Stdout, cmd.Stderr = &tail, &tail
	err = cmd.Run()
	tree.Kill(cmd) // what it left running goes too
	return tail.String(), err
}

// remove removes worker's worktree and branch unless Options.Keep, even
// after ctx ended; a failure is a warning, and the sample says where the
// worktree stayed.
func (r *runner) remove(ctx context.Context, worker string, s *Sample) {
	if r.o.Keep {
		s.Worktree = r.mgr.Path(worker)
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	// Samples running in parallel remove their worktrees at once; git's
	// own lock retries can run out on a loaded machine, so try again.
	var err error
	for attempt, wait := 0, 200*time.Millisecond; attempt < 4; attempt, wait = attempt+1, wait*3 {
		err = r.mgr.Remove(cctx, worker, worktree.RemoveOptions{Force: true, DeleteBranch: true})
		if err == nil || errors.Is(err, os.ErrNotExist) || cctx.Err() != nil {
			break
		}
		select {
		case <-time.After(wait):
		case <-cctx.Done():
		}
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		s.Worktree = r.mgr.Path(worker)
		r.warn(fmt.Sprintf("could not remove the worktree of %s (%s): %v", worker, s.Worktree, err))
	}
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= errorChars {
		return s
	}
	cut := errorChars
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// host is a sample's provider.Host: no operator, so prompts are answered
// by the experiment's permissions setting or refused.
type host struct {
	allow bool
	ended chan provider.TurnEnded // the turn's end; buffered, the first one kept

	mu    sync.Mutex
	tok   int64
	lines []string // the last tailLines output lines
}

func newHost(allow bool) *host {
	return &host{allow: allow, ended: make(chan provider.TurnEnded, 1)}
}

func (h *host) Event(ev provider.Event) {
	switch ev := ev.(type) {
	case provider.Usage:
		h.mu.Lock()
		h.tok += ev.InputTokens + ev.OutputTokens
		h.mu.Unlock()
	case provider.Output:
		h.mu.Lock()
		for _, l := range ev.Lines {
			if strings.TrimSpace(l) == "" {
				continue
			}
			h.lines = append(h.lines, l)
		}
		if n := len(h.lines); n > tailLines {
			h.lines = slices.Clone(h.lines[n-tailLines:])
		}
		h.mu.Unlock()
	case provider.TurnEnded:
		select {
		case h.ended <- ev:
		default:
		}
	}
}

func (h *host) tokens() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tok
}

func (h *host) tail() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.lines, " | ")
}

// Permission answers by the experiment's permissions: "allow" takes the
// first allow option (or a plain allow), "deny" the first reject option
// (or a plain deny).
func (h *host) Permission(_ context.Context, r provider.PermissionRequest) (provider.Decision, error) {
	if h.allow {
		if len(r.Options) == 0 {
			return provider.Decision{Allow: true}, nil
		}
		for _, o := range r.Options {
			if o.Kind == provider.AllowOnce || o.Kind == provider.AllowAlways {
				return provider.Decision{Allow: true, OptionID: o.ID}, nil
			}
		}
	}
	d := provider.Decision{Message: `denied: the experiment's "permissions" setting is "deny"`}
	if h.allow {
		d.Message = "denied: the CLI offered no allow option"
	}
	for _, o := range r.Options {
		if o.Kind == provider.Reject {
			d.OptionID = o.ID
			break
		}
	}
	return d, nil
}

// Ask refuses: an experiment has no operator to answer.
func (h *host) Ask(context.Context, provider.Question) (string, error) {
	return "", fmt.Errorf("%w: an experiment has no operator to ask", provider.ErrNoAnswer)
}

// Confirm says no: an experiment has no operator to confirm.
func (h *host) Confirm(context.Context, string) (bool, error) { return false, nil }

// lineTail keeps the last tailLines non-empty lines written to it, each
// cut at a bound, so a check printing without end costs nothing.
type lineTail struct {
	mu    sync.Mutex
	lines []string
	cur   []byte
}

const maxTailLine = 300

func (t *lineTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range p {
		if b == '\n' {
			t.flushLocked()
			continue
		}
		if len(t.cur) < maxTailLine {
			t.cur = append(t.cur, b)
		}
	}
	return len(p), nil
}

// flushLocked ends the current line; t.mu must be held.
func (t *lineTail) flushLocked() {
	if l := strings.TrimSpace(string(t.cur)); l != "" {
		t.lines = append(t.lines, l)
		if len(t.lines) > tailLines {
			t.lines = t.lines[1:]
		}
	}
	t.cur = t.cur[:0]
}

func (t *lineTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flushLocked()
	return strings.Join(t.lines, " | ")
}
