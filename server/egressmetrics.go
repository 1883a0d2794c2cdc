package server

// registerEgress reports the egress daemon's decisions by kind (dns,
// connection, request) and decision (allow, deny, audit), read at each
// scrape.
func (m *metrics) registerEgress(b Background) {
	decisions := m.reg.NewCounter("sbx_egress_decisions_total",
		"Decisions of the egress daemon the server runs, by kind (dns, connection, request) and decision (allow, deny, audit).", "kind", "decision")
	m.reg.OnScrape(func() {
		for _, c := range b.EgressCounts() {
			decisions.Set(float64(c.N), c.Kind, c.Decision)
		}
	})
}
