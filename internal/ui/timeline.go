package ui

import (
	"fmt"
	"time"

	"github.com/coding-agent/coding-agent/internal/store"
)

// view is a task's page.
type view struct {
	store.Record
	Ref, Title, URL, Provider string
	Took                      time.Duration
	Steps                     []step
	Chart                     chart
	Requests, Calls, Ignored  int
	Outcome                   string
}

// step is an event on the timeline.
type step struct {
	store.Event
	Offset time.Duration // since the first event
	N      int           // the model request's number in the task
	Took   time.Duration
	Index  int // its place among the task's events: ?event= shows its whole text
}

// chart is the small chart of tokens and time per model request: two rows
// of bars, scaled to the largest of each.
type chart struct {
	Bars           []bar
	Width          int
	MaxTokens      int
	MaxTook        time.Duration
	TokensH, TimeH int
}

type bar struct {
	X, W, TokensH, TokensY, TimeH, TimeY int
	Title                                string
}

// Chart geometry, in the SVG's own units.
const (
	barStep  = 12
	barWidth = 9
	rowH     = 60
)

func timeline(rec store.Record, events []store.Event) view {
	v := view{Record: rec, Ref: rec.Ref.String(), Took: rec.UpdatedAt.Sub(rec.CreatedAt)}
	if rec.Provider != "" || rec.Model != "" {
		v.Provider = rec.Provider + " · " + rec.Model
	}
	var first time.Time
	for _, e := range events {
		if first.IsZero() {
			first = e.At
		}
		s := step{Event: e, Offset: e.At.Sub(first), Took: time.Duration(e.Millis) * time.Millisecond, Index: len(v.Steps)}
		switch e.Kind {
		case store.EventRound:
			v.Title, v.URL = e.Text, e.URL
		case store.EventRequest:
			v.Requests++
			s.N = v.Requests
			v.Chart.add(v.Requests, e)
		case store.EventCall:
			v.Calls++
		case store.EventHeard:
			v.Ignored += e.Count
		case store.EventEnd:
			v.Outcome = e.Title
		}
		v.Steps = append(v.Steps, s)
	}
	v.Chart.layout()
	return v
}

func (c *chart) add(n int, e store.Event) {
	c.Bars = append(c.Bars, bar{Title: fmt.Sprintf("request %d: %d tokens in, %d out, %s", n, e.TokensIn, e.TokensOut,
		duration(time.Duration(e.Millis)*time.Millisecond)), TokensH: e.TokensIn + e.TokensOut, TimeH: int(e.Millis)})
	c.MaxTokens = max(c.MaxTokens, e.TokensIn+e.TokensOut)
	c.MaxTook = max(c.MaxTook, time.Duration(e.Millis)*time.Millisecond)
}

// layout turns the raw figures into bar heights.
func (c *chart) layout() {
	c.Width = max(len(c.Bars)*barStep, 120)
	c.TokensH, c.TimeH = rowH, rowH
	maxMs := int(c.MaxTook.Milliseconds())
	for i := range c.Bars {
		b := &c.Bars[i]
		b.X, b.W = i*barStep, barWidth
		b.TokensH = scale(b.TokensH, c.MaxTokens)
		b.TimeH = scale(b.TimeH, maxMs)
		b.TokensY = rowH - b.TokensH
		b.TimeY = rowH - b.TimeH
	}
}

// scale is v of most as a bar height: at least 1 for anything above 0.
func scale(v, most int) int {
	if most <= 0 || v <= 0 {
		return 0
	}
	return max(1, v*(rowH-4)/most)
}
