package server

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Readiness is what /readyz asks: the store answers a read, and the forge
// answered within the last poll interval.
type Readiness struct {
	// Store makes a cheap read of the state store.
	Store func(ctx context.Context) error
	// ForgeSeen is when the forge last answered; zero: never.
	ForgeSeen func() time.Time
	// Within is how recent that answer must be: the poll interval, and
	// the time a pass may take to reach the forge.
	Within time.Duration
	Now    func() time.Time
}

// Check says why the process is not ready; nil when it is.
func (r Readiness) Check(ctx context.Context) error {
	if err := r.Store(ctx); err != nil {
		return fmt.Errorf("the state store cannot be read: %w", err)
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	seen := r.ForgeSeen()
	if seen.IsZero() {
		return errors.New("the forge has not answered yet")
	}
	if ago := now().Sub(seen); ago > r.Within {
		return fmt.Errorf("the forge last answered %s ago, longer than %s", ago.Round(time.Second), r.Within)
	}
	return nil
}
