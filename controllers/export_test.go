package controllers

import "time"

// LastLoadTook is how long the newest controller's state rebuild took; 0 before it
// has run.
func LastLoadTook() time.Duration {
	a := serviceIPs.state.Load()
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.loadTook
}
