package agentcli

import (
	"context"
	"sync"
)

// MaxPrompts bounds the prompts a session keeps open at once (each waits
// on the operator on a goroutine of its own). A CLI that asks more gets an
// answer at once from its adapter instead.
const MaxPrompts = 256

// Prompts runs a session's prompts for the operator (permission prompts,
// questions): each on a goroutine of its own, so that the reader keeps
// reading, with a context that ends with its parent (the turn, or the
// session) or when the CLI withdraws the prompt; the answer is written
// unless the CLI withdrew it meanwhile. The zero value is ready to use;
// A is what an answer is (a line to write, a result to send).
type Prompts[A any] struct {
	mu   sync.Mutex
	open map[string]*prompt // by the CLI's request id; withdrawable
	n    int                // prompts running, keyed or not
	wg   sync.WaitGroup
}

type prompt struct {
	cancel    context.CancelFunc
	withdrawn bool // guarded by Prompts.mu
}

// Go runs ask and then answer with what it returned, on a goroutine of its
// own. key, when not "", is the CLI's id for the prompt, which Withdraw
// takes. It reports false, running nothing, when MaxPrompts are running.
func (p *Prompts[A]) Go(key string, parent context.Context, ask func(ctx context.Context) A, answer func(A)) bool {
	ctx, cancel := context.WithCancel(parent)
	pr := &prompt{cancel: cancel}
	p.mu.Lock()
	if p.n >= MaxPrompts {
		p.mu.Unlock()
		cancel()
		return false
	}
	p.n++
	if key != "" {
		if p.open == nil {
			p.open = map[string]*prompt{}
		}
		p.open[key] = pr
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		a := ask(ctx)
		cancel()
		p.mu.Lock()
		p.n--
		if key != "" && p.open[key] == pr {
			delete(p.open, key)
		}
		withdrawn := pr.withdrawn
		p.mu.Unlock()
		if !withdrawn {
			answer(a)
		}
	}()
	return true
}

// Withdraw ends the prompt the CLI no longer waits on: its context ends
// and its answer is dropped.
func (p *Prompts[A]) Withdraw(key string) {
	p.mu.Lock()
	pr := p.open[key]
	delete(p.open, key)
	if pr != nil {
		pr.withdrawn = true
	}
	p.mu.Unlock()
	if pr != nil {
		pr.cancel()
	}
}

// Wait waits for every prompt's goroutine to finish. The prompts end
// when their parent contexts do.
func (p *Prompts[A]) Wait() { p.wg.Wait() }
