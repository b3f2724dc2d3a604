package config

import (
	"strings"
	"testing"
)

func TestBudgetsAndPrices(t *testing.T) {
	home := t.TempDir()
	write(t, home, `{"budgets": {"workerTokens": 200000, "sessionTokens": 2000000},
		"prices": {"claude-sonnet-4-5": {"inputPerMTok": 3.0, "outputPerMTok": 15.0, "cacheReadPerMTok": 0.3, "cacheWritePerMTok": 3.75},
			"gpt-5": {"inputPerMTok": 1.25, "outputPerMTok": 10}}}`)
	f, err := Load(home)
	if err != nil {
		t.Fatal(err)
	}
	if *f.Budgets.WorkerTokens != 200000 || *f.Budgets.SessionTokens != 2000000 {
		t.Fatalf("budgets %+v", f.Budgets)
	}
	if p := f.Prices["claude-sonnet-4-5"]; p != (Price{3, 15, 0.3, 3.75}) {
		t.Fatalf("price %+v", p)
	}
	if p := f.Prices["gpt-5"]; p != (Price{InputPerMTok: 1.25, OutputPerMTok: 10}) {
		t.Fatalf("price without cache prices %+v", p)
	}
	// 0 is no budget, like leaving it out.
	write(t, home, `{"budgets": {"workerTokens": 0}}`)
	if f, err := Load(home); err != nil || *f.Budgets.WorkerTokens != 0 || f.Budgets.SessionTokens != nil {
		t.Fatalf("zero budget: %+v %v", f.Budgets, err)
	}
	for cfg, want := range map[string]string{
		`{"budgets": {"workerTokens": -5}}`:                         `field "budgets.workerTokens" must be a positive number of tokens (0 or absent: no budget), got -5`,
		`{"budgets": {"sessionTokens": -1}}`:                        `field "budgets.sessionTokens" must be a positive number of tokens`,
		`{"budgets": {"workerTokens": 1.5}}`:                        `field "budgets.workerTokens" must be an integer, got number 1.5`,
		`{"budgets": {"sessionTokens": "10k"}}`:                     `field "budgets.sessionTokens" must be an integer, got string`,
		`{"budgets": 100}`:                                          `field "budgets" must be an object, got number`,
		`{"prices": {"m": {"inputPerMTok": -3}}}`:                   `field "prices.m.inputPerMTok" must not be negative, got -3`,
		`{"prices": {"m": {"cacheWritePerMTok": -0.5}}}`:            `field "prices.m.cacheWritePerMTok" must not be negative, got -0.5`,
		`{"prices": {"m": {"outputPerMTok": "15"}}}`:                `must be a number, got string`,
		`{"prices": {"m": 3}}`:                                      `must be an object, got number`,
		`{"prices": {" ": {"inputPerMTok": 1}}}`:                    `field "prices": a model name is empty`,
		`{"prices": [{"model": "m", "inputPerMTok": 1}]}`:           `field "prices" must be an object, got array`,
		`{"budgets": {"workerTokens": 99999999999999999999999999}}`: `field "budgets.workerTokens" must be an integer`,
	} {
		write(t, home, cfg)
		if _, err := Load(home); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "config.json") {
			t.Errorf("%s: %v\nwant %q", cfg, err, want)
		}
	}
}
