package simulate

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/bouncerhq/bouncer"
)

// writeText writes one aligned table per outcome, then a summary. The
// delay columns appear only for a limit that shapes: no other algorithm
// delays.
func writeText(w io.Writer, sim *Simulation, outcomes []outcome) error {
	ew := &errWriter{w: w}
	c := sim.clock
	fmt.Fprintf(ew, "clock: %v from %s, rows of %v\n", c.duration, time.Unix(0, c.start).UTC().Format(time.RFC3339), c.step)
	fmt.Fprintf(ew, "traffic: %s\n", sim.describe)
	shapes := false
	for _, o := range outcomes {
		shapes = shapes || o.limit.Shape
		if sim.summaryOnly {
			continue
		}
		name := stateName(o.limit.Algorithm)
		fmt.Fprintf(ew, "\n%s\n", describeLimit(o.limit))
		tw := newTable(ew)
		fmt.Fprintf(tw, "time\t%s before\trequests\tadmitted\trejected\t", name)
		if o.limit.Shape {
			fmt.Fprintf(tw, "max delay\t")
		}
		fmt.Fprintf(tw, "%s after\t\n", name)
		for _, r := range o.rows {
			fmt.Fprintf(tw, "%v\t%d\t%d\t%d\t%d\t", r.at, r.before, r.requests, r.admitted, r.rejected)
			if o.limit.Shape {
				fmt.Fprintf(tw, "%v\t", r.maxDelay)
			}
			fmt.Fprintf(tw, "%d\t\n", r.after)
		}
		tw.Flush()
		if o.never {
			fmt.Fprintf(ew, "note: requests costing more than the capacity %d are denied with retry-after never\n", o.limit.Capacity())
		}
	}

	// The limits are padded to one width so that they read left-aligned
	// in a right-aligned table.
	width := len("limit")
	for _, o := range outcomes {
		width = max(width, len(describeLimit(o.limit)))
	}
	fmt.Fprintf(ew, "\nsummary\n")
	tw := newTable(ew)
	fmt.Fprintf(tw, "%-*s\trequests\tadmitted\trejected\tmax admitted in any %v\t", width, "limit", outcomes[0].limit.Period)
	if shapes {
		fmt.Fprintf(tw, "max delay\t")
	}
	fmt.Fprintf(tw, "\n")
	for _, o := range outcomes {
		fmt.Fprintf(tw, "%-*s\t%d\t%d\t%d\t%d\t", width, describeLimit(o.limit), o.requests, o.admitted, o.rejected, o.maxInWindow)
		if shapes {
			fmt.Fprintf(tw, "%v\t", o.maxDelay)
		}
		fmt.Fprintf(tw, "\n")
	}
	tw.Flush()
	return ew.err
}

// describeLimit is l.String, which names a leaky bucket's mode only when it
// shapes, naming police too.
func describeLimit(l bouncer.Limit) string {
	if l.Algorithm == bouncer.LeakyBucket && !l.Shape {
		return l.String() + " police"
	}
	return l.String()
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
}

// writeCSV writes every outcome's rows as one CSV table, times in seconds.
func writeCSV(w io.Writer, outcomes []outcome) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"algorithm", "time_s", "state", "before", "requests", "admitted", "rejected", "max_delay_s", "after"})
	for _, o := range outcomes {
		label, name := limitLabel(o.limit), stateName(o.limit.Algorithm)
		for _, r := range o.rows {
			cw.Write([]string{
				label, seconds(r.at), name,
				strconv.FormatInt(r.before, 10),
				strconv.FormatInt(r.requests, 10),
				strconv.FormatInt(r.admitted, 10),
				strconv.FormatInt(r.rejected, 10),
				seconds(r.maxDelay),
				strconv.FormatInt(r.after, 10),
			})
		}
	}
	cw.Flush()
	return cw.Error()
}

// seconds formats d as exact decimal seconds, such as "0.15".
func seconds(d time.Duration) string {
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	s := fmt.Sprintf("%s%d.%09d", sign, d/time.Second, d%time.Second)
	for s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return s
}

// errWriter keeps the first write error, so that a report is written with
// plain Fprintf calls and checked once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
