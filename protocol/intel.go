package protocol

// This file holds the set-once intelligence snapshots: fleetIntel,
// fleetEvolution, fleetStore and fleetExperiment. The page names their
// nested types but leaves most of their fields open; the fields chosen here
// are recorded in docs/protocol-decisions.md. Rates are fractions in [0, 1].

// FleetIntel is the fleet-intelligence snapshot for the Intel dashboard.
type FleetIntel struct {
	Ts          int64                  `json:"ts"`
	Summary     FleetIntelSummary      `json:"summary"`
	Suggestions []FleetIntelSuggestion `json:"suggestions"`
	Skills      []FleetIntelSkill      `json:"skills"`
}

// MessageType returns TypeFleetIntel.
func (FleetIntel) MessageType() string { return TypeFleetIntel }

// MarshalJSON encodes nil required arrays as [].
func (m FleetIntel) MarshalJSON() ([]byte, error) {
	type plain FleetIntel
	p := plain(m)
	p.Suggestions = nonNil(p.Suggestions)
	p.Skills = nonNil(p.Skills)
	return marshalPlain(p)
}

// FleetIntelSummary is the aggregate of the intelligence store.
type FleetIntelSummary struct {
	SessionCount   int64 `json:"sessionCount"`
	TotalAgentRuns int64 `json:"totalAgentRuns"`
	FailedRuns     int64 `json:"failedRuns"`
	// SuccessRate is (TotalAgentRuns-FailedRuns)/TotalAgentRuns, 0 when
	// there were no runs.
	SuccessRate float64 `json:"successRate"`
	TotalTokens int64   `json:"totalTokens"`
	// AvgSessionDurationMs is a mean, so it may be fractional.
	AvgSessionDurationMs float64 `json:"avgSessionDurationMs"`
	// TopErrors is the most frequent failure messages, most frequent first.
	TopErrors []FleetIntelError `json:"topErrors"`
}

// MarshalJSON encodes a nil TopErrors as [].
func (m FleetIntelSummary) MarshalJSON() ([]byte, error) {
	type plain FleetIntelSummary
	p := plain(m)
	p.TopErrors = nonNil(p.TopErrors)
	return marshalPlain(p)
}

// FleetIntelError is one entry of FleetIntelSummary.TopErrors.
type FleetIntelError struct {
	Message string `json:"message"`
	Count   int64  `json:"count"`
}

// FleetIntelSuggestion is one pending suggestion.
type FleetIntelSuggestion struct {
	ID             string `json:"id"`
	SuggestionType string `json:"suggestionType"`
	Title          string `json:"title"`
	// Confidence is in [0, 1].
	Confidence float64 `json:"confidence"`
	CreatedAt  int64   `json:"createdAt"`
}

// FleetIntelSkill is the usage of one skill.
type FleetIntelSkill struct {
	Name       string `json:"name"`
	Uses       int64  `json:"uses"`
	LastUsedAt int64  `json:"lastUsedAt"`
	// Crew is the crew (role group) the skill belongs to, when it has one.
	Crew string `json:"crew,omitempty"`
}

// FleetEvolution is the role/skill evolution snapshot for /learn.
type FleetEvolution struct {
	Ts       int64                  `json:"ts"`
	Shadows  []FleetEvolutionShadow `json:"shadows"`
	Timeline []FleetEvolutionRecord `json:"timeline"`
	Skills   []FleetEvolutionSkill  `json:"skills"`
}

// MessageType returns TypeFleetEvolution.
func (FleetEvolution) MessageType() string { return TypeFleetEvolution }

// MarshalJSON encodes nil required arrays as [].
func (m FleetEvolution) MarshalJSON() ([]byte, error) {
	type plain FleetEvolution
	p := plain(m)
	p.Shadows = nonNil(p.Shadows)
	p.Timeline = nonNil(p.Timeline)
	p.Skills = nonNil(p.Skills)
	return marshalPlain(p)
}

// FleetEvolutionShadow is a proposed, not yet applied, skill patch being
// evaluated against the current skill (an A/B candidate).
type FleetEvolutionShadow struct {
	ID    string `json:"id"`
	Skill string `json:"skill"`
	// Summary says what the patch changes.
	Summary   string `json:"summary"`
	CreatedAt int64  `json:"createdAt"`
	// Status is an open string: "pending", "evaluating", "rejected".
	Status string `json:"status,omitempty"`
	// Trials is how many runs used the candidate so far.
	Trials *int64 `json:"trials,omitempty"`
	// BaselineSuccessRate and CandidateSuccessRate compare the current skill
	// with the candidate over the evaluation runs.
	BaselineSuccessRate  *float64 `json:"baselineSuccessRate,omitempty"`
	CandidateSuccessRate *float64 `json:"candidateSuccessRate,omitempty"`
}

// FleetEvolutionRecord is one applied evolution.
type FleetEvolutionRecord struct {
	ID        string `json:"id"`
	Skill     string `json:"skill"`
	Summary   string `json:"summary"`
	AppliedAt int64  `json:"appliedAt"`
	// Version is the skill version the evolution produced.
	Version           *int64   `json:"version,omitempty"`
	SuccessRateBefore *float64 `json:"successRateBefore,omitempty"`
	SuccessRateAfter  *float64 `json:"successRateAfter,omitempty"`
}

// FleetEvolutionSkill is per-skill evolution telemetry.
type FleetEvolutionSkill struct {
	Name           string  `json:"name"`
	Uses           int64   `json:"uses"`
	SuccessRate    float64 `json:"successRate"`
	EvolutionCount int64   `json:"evolutionCount"`
	LastEvolvedAt  int64   `json:"lastEvolvedAt,omitempty"`
}

// FleetStore is the read-only intelligence-store explorer snapshot.
type FleetStore struct {
	Ts       int64                `json:"ts"`
	Counts   []FleetStoreCount    `json:"counts"`
	Sessions []FleetStoreSession  `json:"sessions"`
	Steering []FleetStoreSteering `json:"steering"`
}

// MessageType returns TypeFleetStore.
func (FleetStore) MessageType() string { return TypeFleetStore }

// MarshalJSON encodes nil required arrays as [].
func (m FleetStore) MarshalJSON() ([]byte, error) {
	type plain FleetStore
	p := plain(m)
	p.Counts = nonNil(p.Counts)
	p.Sessions = nonNil(p.Sessions)
	p.Steering = nonNil(p.Steering)
	return marshalPlain(p)
}

// FleetStoreCount is the row count of one store entity (table).
type FleetStoreCount struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

// FleetStoreSession is one session of the top-by-token-spend list.
type FleetStoreSession struct {
	ID          string `json:"id"`
	StartedAt   int64  `json:"startedAt"`
	TotalTokens int64  `json:"totalTokens"`
	AgentRuns   int64  `json:"agentRuns"`
	Name        string `json:"name,omitempty"`
	DurationMs  *int64 `json:"durationMs,omitempty"`
	FailedRuns  *int64 `json:"failedRuns,omitempty"`
}

// FleetStoreSteering is one recent steering insight: an operator correction
// the store learned from.
type FleetStoreSteering struct {
	ID        string `json:"id"`
	Text      string `json:"text"`
	CreatedAt int64  `json:"createdAt"`
	// Source says where the insight came from (e.g. "prompt", "deny").
	Source    string `json:"source,omitempty"`
	SessionID string `json:"sessionId,omitempty"`
}

// FleetExperiment is the experiment-framework snapshot.
type FleetExperiment struct {
	Ts          int64                  `json:"ts"`
	Experiments []FleetExperimentEntry `json:"experiments"`
}

// MessageType returns TypeFleetExperiment.
func (FleetExperiment) MessageType() string { return TypeFleetExperiment }

// MarshalJSON encodes a nil Experiments as [].
func (m FleetExperiment) MarshalJSON() ([]byte, error) {
	type plain FleetExperiment
	p := plain(m)
	p.Experiments = nonNil(p.Experiments)
	return marshalPlain(p)
}

// FleetExperimentEntry is one experiment.
type FleetExperimentEntry struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Status is an open string: "draft", "running", "completed".
	Status string `json:"status"`
	// Variants names the arms; the first is the control.
	Variants   []string `json:"variants"`
	CreatedAt  int64    `json:"createdAt"`
	Hypothesis string   `json:"hypothesis,omitempty"`
	// LatestRun is nil until the experiment has run.
	LatestRun *FleetExperimentRun `json:"latestRun,omitempty"`
}

// MarshalJSON encodes a nil Variants as [].
func (m FleetExperimentEntry) MarshalJSON() ([]byte, error) {
	type plain FleetExperimentEntry
	p := plain(m)
	p.Variants = nonNil(p.Variants)
	return marshalPlain(p)
}

// FleetExperimentRun aggregates an experiment's latest run.
type FleetExperimentRun struct {
	ID          string                   `json:"id"`
	StartedAt   int64                    `json:"startedAt"`
	Variants    []FleetExperimentVariant `json:"variants"`
	CompletedAt int64                    `json:"completedAt,omitempty"`
	// Winner is the winning variant's name; empty while inconclusive.
	Winner string `json:"winner,omitempty"`
}

// MarshalJSON encodes a nil Variants as [].
func (m FleetExperimentRun) MarshalJSON() ([]byte, error) {
	type plain FleetExperimentRun
	p := plain(m)
	p.Variants = nonNil(p.Variants)
	return marshalPlain(p)
}

// FleetExperimentVariant is one arm's aggregate in a run.
type FleetExperimentVariant struct {
	Variant string `json:"variant"`
	Samples int64  `json:"samples"`
	// Mean is the mean score of the arm's samples.
	Mean float64 `json:"mean"`
	// PassRate is the fraction of samples that passed, in [0, 1].
	PassRate float64 `json:"passRate"`
	// Lift is the relative change of Mean against the control arm
	// ((mean-control)/control); nil for the control itself.
	Lift *float64 `json:"lift,omitempty"`
}
