package hybrid

// Owed returns how many keys h owes charges to each other region, by
// region name.
func (h *Limiter) Owed() map[string]int {
	out := map[string]int{}
	for _, p := range h.peers {
		p.mu.Lock()
		out[p.name] = len(p.owed)
		p.mu.Unlock()
	}
	return out
}
