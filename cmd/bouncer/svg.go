package main

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
	svgLeft    = 70  // room for the y-axis labels
	svgRight   = 20  // margin right of the plots
	svgPlotH   = 200 // height of each of the two plots
	svgTop1    = 50  // top of the requests plot
	svgTop2    = 320 // top of the remaining plot
	svgLegendY = 580 // first legend row
	svgRowH    = 18  // height of a legend row
	svgXTicks  = 6   // about this many time labels
)

// svgColors are the algorithms' colours, in --compare order.
var svgColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"}

// writeSVG writes the run as an SVG chart: on top, the requests of every
// row (grey) and, per limit, the units admitted (a solid line) and the
// requests rejected (a dashed line); below, per limit, what is left of its
// capacity over time. The same traffic reaches every limit, so that
// overlaid lines compare the algorithms: a fixed window's two full windows
// on either side of a boundary show as a peak the sliding ones do not have.
// Every number comes from the virtual clock: the same run writes the same
// bytes.
func writeSVG(w io.Writer, sim *simulation, outcomes []outcome) error {
	ew := &errWriter{w: w}
	p := newSVGPlot(sim.clock, outcomes)
	height := svgLegendY + svgRowH*(len(outcomes)+2)
	fmt.Fprintf(ew, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, height, svgWidth, height)
	title := "bouncer simulate: " + sim.describe
	fmt.Fprintf(ew, "<title>%s</title>\n", svgEscape(title))
	fmt.Fprintf(ew, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgWidth, height)
	fmt.Fprintf(ew, `<text x="%d" y="20" font-size="14">%s</text>`+"\n", svgLeft, svgEscape(title))

	svgAxes(ew, p.c, p.x, svgTop1, p.reqMax, p.y1, "requests per "+p.c.step.String())
	svgAxes(ew, p.c, p.x, svgTop2, p.capMax, p.y2, "remaining of the capacity")
	p.traffic(ew, outcomes[0].rows)
	for i, o := range outcomes {
		p.lines(ew, svgColors[i%len(svgColors)], o)
	}
	svgLegend(ew, outcomes)
	fmt.Fprintf(ew, "</svg>\n")
	return ew.err
}

// svgPlot maps a run's times and values to the chart's coordinates: the
// requests plot's scale is the most requests of a row, the remaining
// plot's the largest capacity, each rounded up.
type svgPlot struct {
	c              clock
	reqMax, capMax int64
}

func newSVGPlot(c clock, outcomes []outcome) svgPlot {
	p := svgPlot{c: c, reqMax: 1, capMax: 1}
	for _, o := range outcomes {
		p.capMax = max(p.capMax, o.limit.Capacity())
		for _, r := range o.rows {
			p.reqMax = max(p.reqMax, r.requests, r.admitted, r.rejected)
		}
	}
	p.reqMax, p.capMax = svgCeil(p.reqMax), svgCeil(p.capMax)
	return p
}

func (p svgPlot) x(at time.Duration) string {
	plotW := float64(svgWidth - svgLeft - svgRight)
	return svgNum(svgLeft + plotW*float64(at)/float64(p.c.duration))
}

func (p svgPlot) y1(v int64) string { return svgY(svgTop1, p.reqMax, v) }
func (p svgPlot) y2(v int64) string { return svgY(svgTop2, p.capMax, v) }

// svgY is v's height in the plot whose top is at top and stands for
// topV.
func svgY(top int, topV, v int64) string {
	return svgNum(float64(top+svgPlotH) - svgPlotH*float64(v)/float64(topV))
}

// steps is the points of a step line through the rows' values.
func (p svgPlot) steps(rows []row, y func(row) (from, to string)) string {
	pts := make([]string, 0, 2*len(rows))
	for _, r := range rows {
		from, to := y(r)
		pts = append(pts, p.x(r.at)+","+from, p.x(min(r.at+p.c.step, p.c.duration))+","+to)
	}
	return strings.Join(pts, " ")
}

// traffic draws the requests, the same for every limit, as a filled step
// area.
func (p svgPlot) traffic(w io.Writer, rows []row) {
	pts := p.steps(rows, func(r row) (string, string) { return p.y1(r.requests), p.y1(r.requests) })
	fmt.Fprintf(w, `<polygon class="requests" fill="#dddddd" points="%s"/>`+"\n",
		p.x(0)+","+p.y1(0)+" "+pts+" "+p.x(p.c.duration)+","+p.y1(0))
}

// lines draws one limit's lines: the units it admitted and the requests
// it rejected on top, what is left of its capacity below.
func (p svgPlot) lines(w io.Writer, color string, o outcome) {
	label := svgEscape(limitLabel(o.limit))
	admitted := p.steps(o.rows, func(r row) (string, string) { return p.y1(r.admitted), p.y1(r.admitted) })
	rejected := p.steps(o.rows, func(r row) (string, string) { return p.y1(r.rejected), p.y1(r.rejected) })
	left := p.steps(o.rows, func(r row) (string, string) {
		return p.y2(remaining(o.limit, r.before)), p.y2(remaining(o.limit, r.after))
	})
	fmt.Fprintf(w, `<polyline class="admitted" data-limit="%s" fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n",
		label, color, admitted)
	fmt.Fprintf(w, `<polyline class="rejected" data-limit="%s" fill="none" stroke="%s" stroke-width="1.5" stroke-dasharray="5,3" points="%s"/>`+"\n",
		label, color, rejected)
	fmt.Fprintf(w, `<polyline class="remaining" data-limit="%s" fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n",
		label, color, left)
}

// svgLegend draws a row per limit, then the key to the line styles.
func svgLegend(w io.Writer, outcomes []outcome) {
	fmt.Fprintf(w, `<g class="legend">`+"\n")
	for i, o := range outcomes {
		yy := svgLegendY + svgRowH*i
		fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n",
			svgLeft, yy-4, svgLeft+30, yy-4, svgColors[i%len(svgColors)])
		fmt.Fprintf(w, `<text x="%d" y="%d">%s</text>`+"\n", svgLeft+40, yy, svgEscape(describeLimit(o.limit)))
	}
	yy := svgLegendY + svgRowH*len(outcomes)
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="30" height="10" fill="#dddddd"/>`+"\n", svgLeft, yy-10)
	fmt.Fprintf(w, `<text x="%d" y="%d">requests; solid: admitted; dashed: rejected; below: remaining</text>`+"\n", svgLeft+40, yy)
	fmt.Fprintf(w, "</g>\n")
}

// svgAxes draws one plot's frame, its y labels (0, half, top) and its time
// labels, at whole rows.
func svgAxes(w io.Writer, c clock, x func(time.Duration) string, top int, topV int64, y func(int64) string, label string) {
	bottom := top + svgPlotH
	fmt.Fprintf(w, `<g class="axes">`+"\n")
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888888"/>`+"\n",
		svgLeft, top, svgWidth-svgLeft-svgRight, svgPlotH)
	fmt.Fprintf(w, `<text class="axis-label" x="%d" y="%d">%s</text>`+"\n", svgLeft, top-8, svgEscape(label))
	for _, v := range []int64{0, topV / 2, topV} {
		fmt.Fprintf(w, `<text x="%d" y="%s" text-anchor="end" dominant-baseline="middle">%d</text>`+"\n", svgLeft-6, y(v), v)
	}
	rows := (c.duration + c.step - 1) / c.step
	every := max((rows+svgXTicks-1)/svgXTicks, 1)
	for i := time.Duration(0); i <= rows; i += every {
		at := min(i*c.step, c.duration)
		fmt.Fprintf(w, `<line x1="%s" y1="%d" x2="%s" y2="%d" stroke="#888888"/>`+"\n", x(at), bottom, x(at), bottom+4)
		fmt.Fprintf(w, `<text x="%s" y="%d" text-anchor="middle">%v</text>`+"\n", x(at), bottom+16, at)
	}
	fmt.Fprintf(w, `<text class="axis-label" x="%d" y="%d" text-anchor="middle">time from %s</text>`+"\n",
		svgLeft+(svgWidth-svgLeft-svgRight)/2, bottom+32, time.Unix(0, c.start).UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "</g>\n")
}

// remaining turns stateOf's number into what is left of l's capacity, so
// that every algorithm's line reads the same way up.
func remaining(l bouncer.Limit, state int64) int64 {
	switch l.Algorithm {
	case bouncer.TokenBucket, bouncer.GCRA:
		return state
	}
	return l.Capacity() - state
}

// svgCeil rounds v up to an even number, so that the half-way label is
// whole.
func svgCeil(v int64) int64 { return v + v%2 }

// svgNum formats a coordinate to one decimal place, the same on every
// platform.
func svgNum(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

func svgEscape(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
