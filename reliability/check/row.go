package check

// Row is one scenario's figures, as the reliability suite reports them and
// RELIABILITY.md shows them (one JSON object per line).
type Row struct {
	Scenario      string  `json:"scenario"`
	Runs          int     `json:"runs"`           // injected faults
	Grants        int     `json:"grants"`         // fresh grants
	Verdict       string  `json:"verdict"`        // porcupine's
	DoubleGrants  int     `json:"double_grants"`  // definite (1 if only porcupine found one)
	StaleAccepted int     `json:"stale_accepted"` // stale writes the resource accepted
	Superseded    int     `json:"superseded_writes"`
	Ambiguous     int     `json:"ambiguous"` // store operations with unknown outcome
	Told          int     `json:"told"`      // running holders told by their deadline
	LeadMinMS     float64 `json:"lead_min_ms"`
	LeadP50MS     float64 `json:"lead_p50_ms"`
	Late          int     `json:"late"`          // holders told too late, unexplained
	LateExpected  int     `json:"late_expected"` // told late while stopped
	OverlapMS     float64 `json:"overlap_ms"`    // believed overlap
	Note          string  `json:"note"`
	Control       bool    `json:"control"` // a negative control
	Seed          uint64  `json:"seed"`
	Seconds       float64 `json:"seconds"`
}
