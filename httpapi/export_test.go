package httpapi

// WorkOrderReadsOf is how many of org's work-order bodies (orders and previews) this server is reading now: a test
// waits on it to know that a body it is sending holds the org's one slot, or has given it back.
func (s *Server) WorkOrderReadsOf(org string) int {
	s.workOrderReads.mu.Lock()
	defer s.workOrderReads.mu.Unlock()
	return s.workOrderReads.inFlight[org]
}
