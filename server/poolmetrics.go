package server

// registerPools reports the warm pools' hits, misses, hook failures and
// member boots (count and seconds, by result), read at each scrape.
func (m *metrics) registerPools(p Background) {
	claims := m.reg.NewCounter("sbx_pool_claims_total",
		"Creates and claims of a warm pool's key, by pool and result (hit: a member was claimed, miss: none was idle, hook_failed: the claim's completion failed and the member was removed).", "pool", "result")
	boots := m.reg.NewCounter("sbx_pool_member_boots_total",
		"Pool members that booted their main command (started and ready), by pool and result (ok, error).", "pool", "result")
	bootSeconds := m.reg.NewCounter("sbx_pool_member_boot_seconds_total",
		"Time spent booting pool members' main commands until ready, by pool.", "pool")
	lastBoot := m.reg.NewGauge("sbx_pool_member_last_boot_seconds",
		"The latest successful boot of a pool member's main command, by pool.", "pool")
	m.reg.OnScrape(func() {
		for name, s := range p.PoolStats() {
			claims.Set(float64(s.Hits), name, "hit")
			claims.Set(float64(s.Misses), name, "miss")
			claims.Set(float64(s.HookFailures), name, "hook_failed")
			boots.Set(float64(s.Boots), name, "ok")
			boots.Set(float64(s.BootFailures), name, "error")
			bootSeconds.Set(s.BootSeconds, name)
			lastBoot.Set(s.LastBootS, name)
		}
	})
}
