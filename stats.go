package sbx

import (
	"context"
	"time"
)

// WatchStats calls fn with a sandbox's usage now and, unless once, again
// every interval until ctx ends, as docker stats does; first is set for
// the first reading. It returns nil when ctx ends after a first reading,
// else the first error of Stats or fn.
func WatchStats(ctx context.Context, s Sandboxes, ref string, interval time.Duration, once bool, fn func(u *Usage, first bool) error) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for first := true; ; first = false {
		u, err := s.Stats(ctx, ref)
		if err != nil {
			if !first && ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := fn(u, first); err != nil {
			return err
		}
		if once {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// StatsRow is one sandbox's usage in a WatchStatsOf reading: its ID and
// name, and the share of one CPU it used since the previous reading
// (CPUPercent, 100 is one CPU busy), as docker stats shows it.
type StatsRow struct {
	ID         string  `json:"id"`
	Name       string  `json:"name,omitempty"`
	CPUPercent float64 `json:"cpu_percent"`
	*Usage
}

// WatchStatsOf is docker stats over several sandboxes: refs, or with none
// every running one (listed once, at the start). It reads their usage
// every interval until ctx ends and calls fn with a row for each sandbox
// that still answers; CPUPercent needs two readings, so the first call
// comes one interval after the start (once: that call only). A sandbox
// named in refs that cannot be read fails it; one that goes away later
// drops out.
func WatchStatsOf(ctx context.Context, s Sandboxes, refs []string, interval time.Duration, once bool, fn func(rows []StatsRow) error) error {
	type target struct{ id, name string }
	var targets []target
	if len(refs) == 0 {
		list, err := s.List(ctx, Filter{Running: true})
		if err != nil {
			return err
		}
		for _, sb := range list {
			targets = append(targets, target{sb.ID, sb.Name})
		}
	} else {
		for _, ref := range refs {
			sb, err := s.Get(ctx, ref)
			if err != nil {
				return err
			}
			targets = append(targets, target{sb.ID, sb.Name})
		}
	}
	prev := map[string]float64{} // CPU seconds at the previous reading
	last := time.Now()
	read := func(first bool) ([]StatsRow, error) {
		now := time.Now()
		wall := now.Sub(last).Seconds()
		last = now
		var rows []StatsRow
		for _, t := range targets {
			u, err := s.Stats(ctx, t.id)
			if err != nil {
				if first && len(refs) > 0 && ctx.Err() == nil {
					return nil, err
				}
				continue // gone since
			}
			row := StatsRow{ID: t.id, Name: t.name, Usage: u}
			if p, ok := prev[t.id]; ok && wall > 0 {
				row.CPUPercent = max(0, (u.CPUTimeS-p)/wall*100)
			}
			prev[t.id] = u.CPUTimeS
			rows = append(rows, row)
		}
		return rows, nil
	}
	if _, err := read(true); err != nil {
		return err
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		rows, err := read(false)
		if err != nil {
			return err
		}
		if err := fn(rows); err != nil {
			return err
		}
		if once {
			return nil
		}
	}
}
