package simulate

import (
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/bouncerhq/bouncer"
)

// The chart's geometry, in SVG user units.
const (
	svgWidth   = 900
	svgLeft    = 80 // room for the y-axis label and numbers
	svgRight   = 20 // margin right of the plots
	svgPlotW   = svgWidth - svgLeft - svgRight
	svgLegendY = 52  // the first legend row's baseline
	svgRowH    = 20  // height of a legend row
	svgMarksY  = 104 // baseline of the window boundaries' labels
	svgTop     = 112 // top of the first panel
	svgHeaderH = 22  // a panel's header: its limit and its figure
	svgPlotH   = 110 // height of a panel's plot
	svgPanelH  = svgHeaderH + svgPlotH + 16
	svgAxisH   = 52 // the time labels below the last panel
	svgTicks   = 8  // at most this many time intervals
	// svgMaxBoundaries bounds the window boundaries drawn: more would
	// be a grey wash, not marks.
	svgMaxBoundaries = 60
)

// The chart's colours: one per algorithm, in --compare order, and the
// neutral marks.
var svgColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"}

const (
	svgOffered  = "#dddddd" // the offered units, under the admitted line
	svgFrame    = "#bbbbbb"
	svgLimit    = "#333333"
	svgBoundary = "#555555"
)

// writeSVG writes the run as an SVG chart of small multiples: one panel
// per limit, stacked on one time axis, each with the units offered in each
// row (a faint area), the units it admitted (a step line in its colour),
// its rate as a dotted reference, and the window boundaries as dashed
// lines through every panel. A panel's header gives the most units
// admitted within any one period, the summary's figure. Panels never
// overlap, so that no limit's line hides another's. Every number comes
// from the virtual clock: the same run writes the same bytes.
func writeSVG(w io.Writer, sim *Simulation, outcomes []outcome) error {
	ew := &errWriter{w: w}
	ch := newSVGChart(sim, outcomes)
	height := plotTop(len(outcomes)-1) + svgPlotH + svgAxisH
	fmt.Fprintf(ew, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, height, svgWidth, height)
	title := "bouncer simulate: " + sim.describe
	fmt.Fprintf(ew, "<title>%s</title>\n", svgEscape(title))
	fmt.Fprintf(ew, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgWidth, height)
	fmt.Fprintf(ew, `<text x="%d" y="24" font-size="15">%s</text>`+"\n", svgLeft, svgEscape(title))
	ch.legend(ew)
	for i, o := range outcomes {
		ch.panel(ew, i, o, i == len(outcomes)-1)
	}
	ch.boundaryLines(ew, len(outcomes))
	for i, o := range outcomes {
		ch.series(ew, i, o)
	}
	fmt.Fprintf(ew, "</svg>\n")
	return ew.err
}

// svgChart maps a run's times and units to the chart's coordinates. Every
// panel has the same scale, so that their heights compare.
type svgChart struct {
	c      clock
	period time.Duration
	rate   int64
	unit   string // what the y axis counts: requests, or units when some cost is not 1
	yMax   int64
	// limited is whether some panel draws its rate: all but concurrency,
	// whose rate bounds the units in flight, not those admitted.
	limited bool
	// windowed is whether some limit counts in windows aligned to the
	// epoch; boundaries are those windows' starts within the run, or nil
	// when there are more than svgMaxBoundaries (tooMany).
	windowed   bool
	boundaries []time.Duration
	tooMany    bool
}

func newSVGChart(sim *Simulation, outcomes []outcome) *svgChart {
	l := outcomes[0].limit
	ch := &svgChart{c: sim.clock, period: l.Period, rate: l.Rate, unit: "requests"}
	for _, a := range sim.traffic {
		if a.cost != 1 {
			ch.unit = "units"
			break
		}
	}
	var top int64
	for _, o := range outcomes {
		if o.limit.Algorithm != bouncer.Concurrency {
			ch.limited = true
			top = max(top, o.limit.Rate)
		}
		switch o.limit.Algorithm {
		case bouncer.FixedWindow, bouncer.SlidingWindowCounter:
			ch.windowed = true
		}
		for _, r := range o.rows {
			top = max(top, r.offeredUnits, r.admittedUnits)
		}
	}
	ch.yMax = svgNice(top)
	if ch.windowed {
		ch.boundaries, ch.tooMany = windowBoundaries(ch.c, ch.period)
	}
	return ch
}

// windowBoundaries returns the offsets from the run's start, strictly
// inside the run, at which windows of period begin: the multiples of
// period since the Unix epoch, as in every store. It returns nil and true
// when there are more than svgMaxBoundaries.
func windowBoundaries(c clock, period time.Duration) ([]time.Duration, bool) {
	p := int64(period)
	first := time.Duration((c.start/p+1)*p - c.start) // the first after the start
	if n := (c.duration - first + period - 1) / period; n > svgMaxBoundaries {
		return nil, true
	}
	var out []time.Duration
	for b := first; b < c.duration; b += period {
		out = append(out, b)
	}
	return out, false
}

func (ch *svgChart) x(at time.Duration) string {
	return svgNum(svgLeft + svgPlotW*float64(at)/float64(ch.c.duration))
}

// plotTop is the top of panel i's plot.
func plotTop(i int) int { return svgTop + svgPanelH*i + svgHeaderH }

// y is v's height in the plot whose top is top.
func (ch *svgChart) y(top int, v int64) string {
	return svgNum(float64(top+svgPlotH) - svgPlotH*float64(v)/float64(ch.yMax))
}

// steps is a step line through the rows' values, from the left edge to the
// right: a horizontal run per row and a vertical jump between rows, never
// a diagonal, since a row's value holds for the whole row.
func (ch *svgChart) steps(top int, rows []row, v func(row) int64) string {
	var b strings.Builder
	for i, r := range rows {
		if i == 0 {
			fmt.Fprintf(&b, "M%s,%s", ch.x(r.at), ch.y(top, v(r)))
		} else {
			fmt.Fprintf(&b, " V%s", ch.y(top, v(r)))
		}
		fmt.Fprintf(&b, " H%s", ch.x(min(r.at+ch.c.step, ch.c.duration)))
	}
	return b.String()
}

// legend says once what each mark means, in words.
func (ch *svgChart) legend(w io.Writer) {
	col2 := svgLeft + svgPlotW/2
	y1, y2 := svgLegendY, svgLegendY+svgRowH
	step := svgDuration(ch.c.step)
	fmt.Fprintf(w, `<g class="legend">`+"\n")
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="24" height="12" fill="%s"/>`+"\n", svgLeft, y1-10, svgOffered)
	fmt.Fprintf(w, `<text x="%d" y="%d">offered: %s arriving in each %s step</text>`+"\n", svgLeft+32, y1, ch.unit, step)
	fmt.Fprintf(w, `<path d="M%d,%d H%d V%d H%d" fill="none" stroke="%s" stroke-width="2"/>`+"\n",
		col2, y1-2, col2+12, y1-10, col2+24, svgColors[0])
	fmt.Fprintf(w, `<text x="%d" y="%d">admitted in each step (the grey above it was rejected)</text>`+"\n", col2+32, y1)
	if ch.limited {
		fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5" stroke-dasharray="2,3"/>`+"\n",
			svgLeft, y2-4, svgLeft+24, y2-4, svgLimit)
		fmt.Fprintf(w, `<text x="%d" y="%d">limit: %d per %s</text>`+"\n", svgLeft+32, y2, ch.rate, svgDuration(ch.period))
	}
	if ch.windowed {
		fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5" stroke-dasharray="4,3"/>`+"\n",
			col2+12, y2-13, col2+12, y2+3, svgBoundary)
		text := "window boundary: a new " + svgDuration(ch.period) + " window starts"
		if ch.tooMany {
			text = "window boundaries every " + svgDuration(ch.period) + ": too many to draw"
		}
		fmt.Fprintf(w, `<text x="%d" y="%d">%s</text>`+"\n", col2+32, y2, text)
	}
	fmt.Fprintf(w, "</g>\n")
}

// panel draws panel i's frame, offered units and axes; the time labels
// only under the last.
func (ch *svgChart) panel(w io.Writer, i int, o outcome, last bool) {
	top := plotTop(i)
	bottom := top + svgPlotH
	fmt.Fprintf(w, `<g class="panel" data-limit="%s">`+"\n", svgEscape(limitLabel(o.limit)))
	fmt.Fprintf(w, `<rect class="plot" data-limit="%s" x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n",
		svgEscape(limitLabel(o.limit)), svgLeft, top, svgPlotW, svgPlotH, svgFrame)
	fmt.Fprintf(w, `<path class="offered" d="%s V%d H%d Z" fill="%s"/>`+"\n",
		ch.steps(top, o.rows, func(r row) int64 { return r.offeredUnits }), bottom, svgLeft, svgOffered)
	fmt.Fprintf(w, `<text x="%d" y="%d" transform="rotate(-90 %d %d)" text-anchor="middle">%s per %s</text>`+"\n",
		18, top+svgPlotH/2, 18, top+svgPlotH/2, ch.unit, svgDuration(ch.c.step))
	for _, v := range []int64{0, ch.yMax / 2, ch.yMax} {
		fmt.Fprintf(w, `<text x="%d" y="%s" text-anchor="end" dominant-baseline="middle">%d</text>`+"\n", svgLeft-6, ch.y(top, v), v)
	}
	tick := svgTick(ch.c.duration)
	for at := time.Duration(0); at <= ch.c.duration; at += tick {
		fmt.Fprintf(w, `<line x1="%s" y1="%d" x2="%s" y2="%d" stroke="%s"/>`+"\n", ch.x(at), bottom, ch.x(at), bottom+4, svgFrame)
		if last {
			fmt.Fprintf(w, `<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", ch.x(at), bottom+17, svgDuration(at))
		}
	}
	if last {
		fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="middle">time from %s</text>`+"\n",
			svgLeft+svgPlotW/2, bottom+36, time.Unix(0, ch.c.start).UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "</g>\n")
}

// boundaryLines draws each window boundary once, through every panel, and
// labels those that have room.
func (ch *svgChart) boundaryLines(w io.Writer, panels int) {
	if len(ch.boundaries) == 0 {
		return
	}
	const labelW = 96 // "window boundary" at 11 units, with a margin
	fmt.Fprintf(w, `<g class="boundaries">`+"\n")
	lastLabel := -labelW
	for _, b := range ch.boundaries {
		x := ch.x(b)
		fmt.Fprintf(w, `<line class="boundary" data-at="%s" x1="%s" y1="%d" x2="%s" y2="%d" stroke="%s" stroke-width="1.5" stroke-dasharray="6,4"/>`+"\n",
			svgDuration(b), x, svgMarksY+4, x, plotTop(panels-1)+svgPlotH, svgBoundary)
		lx := min(max(int(svgLeft+svgPlotW*float64(b)/float64(ch.c.duration)), svgLeft+labelW/2), svgWidth-svgRight-labelW/2)
		if lx-lastLabel >= labelW {
			fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="middle" font-size="11" fill="%s">window boundary</text>`+"\n",
				lx, svgMarksY, svgBoundary)
			lastLabel = lx
		}
	}
	fmt.Fprintf(w, "</g>\n")
}

// series draws panel i's limit line, its admitted units and its header,
// over the boundaries; the header's white halo keeps it legible where a
// boundary crosses it.
func (ch *svgChart) series(w io.Writer, i int, o outcome) {
	top := plotTop(i)
	color := svgColors[i%len(svgColors)]
	label := svgEscape(limitLabel(o.limit))
	fmt.Fprintf(w, `<g class="series" data-limit="%s">`+"\n", label)
	if o.limit.Algorithm != bouncer.Concurrency {
		fmt.Fprintf(w, `<line class="limit" x1="%d" y1="%s" x2="%d" y2="%s" stroke="%s" stroke-width="1.5" stroke-dasharray="2,3"/>`+"\n",
			svgLeft, ch.y(top, o.limit.Rate), svgLeft+svgPlotW, ch.y(top, o.limit.Rate), svgLimit)
	}
	fmt.Fprintf(w, `<path class="admitted" data-limit="%s" d="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n",
		label, ch.steps(top, o.rows, func(r row) int64 { return r.admittedUnits }), color)
	halo := `stroke="white" stroke-width="4" paint-order="stroke"`
	fmt.Fprintf(w, `<text x="%d" y="%d" font-weight="bold" fill="%s" %s>%s</text>`+"\n",
		svgLeft, top-7, color, halo, svgEscape(describeLimit(o.limit)))
	most := fmt.Sprintf("most admitted in any %s window: %d", svgDuration(o.limit.Period), o.maxInWindow)
	if overLimit(o) {
		most += ", over the limit"
	}
	fmt.Fprintf(w, `<text class="most" x="%d" y="%d" text-anchor="end" %s>%s</text>`+"\n",
		svgLeft+svgPlotW, top-7, halo, most)
	fmt.Fprintf(w, "</g>\n")
}

// overLimit reports whether o admitted more than its rate within one
// period, for the algorithms that promise not to: the windows. A bucket may
// by design, by its burst; concurrency bounds units in flight instead.
func overLimit(o outcome) bool {
	switch o.limit.Algorithm {
	case bouncer.FixedWindow, bouncer.SlidingWindowLog, bouncer.SlidingWindowCounter:
		return o.maxInWindow > o.limit.Rate
	}
	return false
}

// svgTickSteps are the intervals the time axis may be marked at.
var svgTickSteps = func() []time.Duration {
	var out []time.Duration
	for m := time.Duration(1); m < time.Second; m *= 10 {
		out = append(out, m, 2*m, 5*m)
	}
	for _, unit := range []time.Duration{time.Second, time.Minute} {
		for _, n := range []time.Duration{1, 2, 5, 10, 15, 30} {
			out = append(out, n*unit)
		}
	}
	for _, n := range []time.Duration{1, 2, 3, 6, 12, 24, 48, 7 * 24, 14 * 24, 30 * 24, 90 * 24, 365 * 24, 2 * 365 * 24, 5 * 365 * 24} {
		out = append(out, n*time.Hour)
	}
	return out
}()

// svgTick is the shortest interval of svgTickSteps that marks d with at
// most svgTicks intervals, or d itself.
func svgTick(d time.Duration) time.Duration {
	for _, s := range svgTickSteps {
		if d/s <= svgTicks {
			return s
		}
	}
	return d
}

// svgNice rounds v up, leaving a tenth as headroom, to a number whose half
// is whole and that reads well on an axis: an even number up to 10, then
// 1, 1.2, 1.6, 2, 3, 4, 5, 6 or 8 times a power of ten.
func svgNice(v int64) int64 {
	v = max(v+v/10, 1)
	if v <= 10 || v > 1<<60 {
		return v + v%2
	}
	for pow := int64(1); ; pow *= 10 {
		for _, m := range []int64{10, 12, 16, 20, 30, 40, 50, 60, 80, 100} {
			if m*pow >= v {
				return m * pow
			}
		}
	}
}

// svgDuration is d as Go writes it, without the zero minutes and seconds
// that follow a larger unit: 1m, 1h, 1m30s.
func svgDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// svgNum formats a coordinate to one decimal place, the same on every
// platform.
func svgNum(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

func svgEscape(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
