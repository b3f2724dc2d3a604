package daemon

import (
	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/engine"
)

// engineBudgets maps config.json's budgets to the engine's (absent: 0, none).
func engineBudgets(b config.Budgets) engine.Budgets {
	var out engine.Budgets
	if b.WorkerTokens != nil {
		out.WorkerTokens = *b.WorkerTokens
	}
	if b.SessionTokens != nil {
		out.SessionTokens = *b.SessionTokens
	}
	return out
}

// enginePrices maps config.json's prices to the engine's; nil when none.
func enginePrices(ps map[string]config.Price) map[string]engine.Price {
	if len(ps) == 0 {
		return nil
	}
	out := make(map[string]engine.Price, len(ps))
	for model, p := range ps {
		out[model] = engine.Price{InputPerMTok: p.InputPerMTok, OutputPerMTok: p.OutputPerMTok,
			CacheReadPerMTok: p.CacheReadPerMTok, CacheWritePerMTok: p.CacheWritePerMTok}
	}
	return out
}
