//go:build linux

package main

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// lbPlot is what the latency-bound plot shows.
type lbPlot struct {
	title  string
	note   string // a second line under the title: runs, date, machine
	points []lbPlotPoint
}

// lbPlotPoint is one point of the sweep.
type lbPlotPoint struct {
	concurrency        int
	ideal              float64 // concurrency ÷ delay, commands/s
	worker, bare       float64 // commands/s
	workerRSS, bareRSS int64   // bytes
	marked             bool    // the worker's commands were fetched again (lbPoint.marked)
}

// The plot's geometry, in SVG user units (pixels at 100 %).
const (
	plotW      = 720
	plotH      = 610
	plotLeft   = 84
	plotRight  = plotW - 44
	tpTop      = 88  // throughput panel
	tpBottom   = 358 //
	rssTop     = 438 // peak RSS panel
	rssBottom  = 548 //
	colorWork  = "#1f77b4"
	colorBare  = "#d95f02"
	colorIdeal = "#777777"
)

// writeLatencyPlot writes p as a standalone SVG: commands/s against the
// fetches in flight on log-log axes, with the ideal (concurrency ÷ delay)
// as its own series since the delay may grow with the concurrency, and
// below it peak RSS against the same x. Only elements any browser and GitHub's
// image view render: no script, no CSS, no external font.
func writeLatencyPlot(w io.Writer, p lbPlot) error {
	if len(p.points) == 0 {
		return fmt.Errorf("no points to plot")
	}
	bw := bufio.NewWriter(w)
	s := &svg{w: bw}

	lo, hi := math.Inf(1), 0.0
	cLo, cHi := math.Inf(1), 0.0
	for _, pt := range p.points {
		for _, v := range []float64{pt.ideal, pt.worker, pt.bare} {
			if v > 0 {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
		if c := float64(pt.concurrency); c > 0 {
			cLo, cHi = min(cLo, c), max(cHi, c)
		}
	}
	if hi == 0 || cHi == 0 {
		return fmt.Errorf("no positive rate or concurrency to plot")
	}
	dom, xDom := logDomain(lo, hi), logDomain(cLo, cHi)
	x := func(v float64) float64 { return xDom.scale(v, plotLeft, plotRight) }
	yTP := func(v float64) float64 { return dom.scale(v, tpBottom, tpTop) }

	s.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		plotW, plotH, plotW, plotH)
	s.f(`<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", plotW, plotH)
	s.text(plotW/2, 24, `text-anchor="middle" font-size="15" font-weight="bold"`, p.title)
	if p.note != "" {
		s.text(plotW/2, 42, `text-anchor="middle" fill="#555555"`, p.note)
	}
	// Legend.
	s.f(`<g id="legend">` + "\n")
	lx := float64(plotLeft + 10)
	for _, e := range []struct{ label, color, dash, marker string }{
		{"worker", colorWork, "", "circle"},
		{"bare loop (read, GET, ack)", colorBare, "6 3", "square"},
		{"ideal: concurrency ÷ delay", colorIdeal, "2 3", ""},
	} {
		s.line(lx, 62, lx+28, 62, e.color, e.dash, 2)
		s.marker(e.marker, lx+14, 62, e.color)
		s.text(lx+34, 66, "", e.label)
		lx += 46 + 7*float64(len(e.label))
	}
	s.f("</g>\n")

	// Throughput panel.
	s.f(`<g id="panel-throughput">` + "\n")
	s.logGridX(xDom, x, tpTop, tpBottom)
	for _, v := range dom.ticks() {
		y := yTP(v)
		s.line(plotLeft, y, plotRight, y, "#dddddd", "", 1)
		s.text(plotLeft-6, y+4, `text-anchor="end"`, thousands(v))
	}
	s.frame(tpTop, tpBottom)
	s.series("ideal", colorIdeal, "2 3", "", p.points, x, yTP,
		func(pt lbPlotPoint) float64 { return pt.ideal },
		func(pt lbPlotPoint) string {
			return fmt.Sprintf("ideal, %d in flight: %s commands/s", pt.concurrency, thousands(pt.ideal))
		})
	// The bare loop first, so the worker's markers stay visible on top.
	s.series("throughput-bare", colorBare, "6 3", "square", p.points, x, yTP,
		func(pt lbPlotPoint) float64 { return pt.bare },
		func(pt lbPlotPoint) string {
			return fmt.Sprintf("bare loop, %d in flight: %s commands/s, %.1f%% of %s", pt.concurrency, thousands(pt.bare), 100*pt.bare/pt.ideal, thousands(pt.ideal))
		})
	s.series("throughput-worker", colorWork, "", "circle", p.points, x, yTP,
		func(pt lbPlotPoint) float64 { return pt.worker },
		func(pt lbPlotPoint) string {
			return fmt.Sprintf("worker, %d in flight: %s commands/s, %.1f%% of %s", pt.concurrency, thousands(pt.worker), 100*pt.worker/pt.ideal, thousands(pt.ideal))
		})
	for _, pt := range p.points {
		if pt.worker > 0 {
			label := fmt.Sprintf("%d in flight: worker %.0f%%", pt.concurrency, 100*pt.worker/pt.ideal)
			if pt.bare > 0 {
				label += fmt.Sprintf(", bare %.0f%%", 100*pt.bare/pt.ideal)
			}
			if pt.marked {
				label += " (marked: commands fetched again)"
			}
			lo, hi := pt.worker, pt.worker
			if pt.bare > 0 {
				lo, hi = min(lo, pt.bare), max(hi, pt.bare)
			}
			s.label(x(float64(pt.concurrency)), yTP(hi), yTP(lo), label)
		}
	}
	s.axisLabels("throughput", tpTop, tpBottom, "commands per second (log scale)")
	s.f("</g>\n")

	// Peak RSS panel, on the same x.
	maxRSS := 0.0
	for _, pt := range p.points {
		maxRSS = max(maxRSS, mibf(pt.workerRSS), mibf(pt.bareRSS))
	}
	step, top := niceScale(maxRSS)
	yRSS := func(v float64) float64 { return rssBottom - v/top*(rssBottom-rssTop) }
	s.f(`<g id="panel-rss">` + "\n")
	s.logGridX(xDom, x, rssTop, rssBottom)
	for v := 0.0; v <= top+step/2; v += step {
		y := yRSS(v)
		s.line(plotLeft, y, plotRight, y, "#dddddd", "", 1)
		s.text(plotLeft-6, y+4, `text-anchor="end"`, strconv.FormatFloat(v, 'f', -1, 64))
	}
	s.frame(rssTop, rssBottom)
	s.series("rss-bare", colorBare, "6 3", "square", p.points, x, yRSS,
		func(pt lbPlotPoint) float64 { return mibf(pt.bareRSS) },
		func(pt lbPlotPoint) string {
			return fmt.Sprintf("bare loop, %d in flight: peak RSS %.1f MiB", pt.concurrency, mibf(pt.bareRSS))
		})
	s.series("rss-worker", colorWork, "", "circle", p.points, x, yRSS,
		func(pt lbPlotPoint) float64 { return mibf(pt.workerRSS) },
		func(pt lbPlotPoint) string {
			return fmt.Sprintf("worker, %d in flight: peak RSS %.1f MiB", pt.concurrency, mibf(pt.workerRSS))
		})
	// The figures in a caption above the panel: labels at the points
	// would cross the lines.
	var wr, br, cs []string
	for _, pt := range p.points {
		wr = append(wr, fmt.Sprintf("%.0f", mibf(pt.workerRSS)))
		br = append(br, fmt.Sprintf("%.0f", mibf(pt.bareRSS)))
		cs = append(cs, strconv.Itoa(pt.concurrency))
	}
	s.text(plotLeft, rssTop-10, `id="rss-caption" fill="#333333"`, fmt.Sprintf("peak RSS at %s in flight: worker %s MiB; bare loop %s MiB",
		strings.Join(cs, " / "), strings.Join(wr, " / "), strings.Join(br, " / ")))
	s.axisLabels("rss", rssTop, rssBottom, "peak RSS (MiB)")
	s.f("</g>\n</svg>\n")
	if s.err != nil {
		return s.err
	}
	return bw.Flush()
}

// xLabel is both panels' x-axis label.
const xLabel = "fetches in flight (log scale)"

// svg writes SVG elements and keeps the first write error.
type svg struct {
	w   io.Writer
	err error
}

func (s *svg) f(format string, args ...any) {
	if s.err == nil {
		_, s.err = fmt.Fprintf(s.w, format, args...)
	}
}

// text writes a <text> element with attrs (raw, trusted) and escaped body.
func (s *svg) text(x, y float64, attrs, body string) {
	var b strings.Builder
	xml.EscapeText(&b, []byte(body)) // writes to a Builder cannot fail
	if attrs != "" {
		attrs = " " + attrs
	}
	s.f(`<text x="%.1f" y="%.1f"%s>%s</text>`+"\n", x, y, attrs, b.String())
}

// label annotates the markers at x, the highest at top and the lowest
// at bottom, of rising lines: above and to the left in the right half of
// the plot, below and to the right in the left half, so it neither leaves
// the image nor crosses the lines.
func (s *svg) label(x, top, bottom float64, body string) {
	if x > (plotLeft+plotRight)/2 {
		s.text(x-10, top-10, `text-anchor="end" fill="#333333"`, body)
	} else {
		s.text(x+10, bottom+20, `fill="#333333"`, body)
	}
}

func (s *svg) line(x1, y1, x2, y2 float64, color, dash string, width float64) {
	d := ""
	if dash != "" {
		d = ` stroke-dasharray="` + dash + `"`
	}
	s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%g"%s/>`+"\n", x1, y1, x2, y2, color, width, d)
}

// marker draws a circle or a square centred on x, y.
func (s *svg) marker(kind string, x, y float64, color string) {
	switch kind {
	case "circle":
		s.f(`<circle cx="%.1f" cy="%.1f" r="4.5" fill="%s" stroke="#ffffff" stroke-width="1"/>`+"\n", x, y, color)
	case "square":
		s.f(`<rect x="%.1f" y="%.1f" width="8" height="8" fill="%s"/>`+"\n", x-4, y-4, color)
	}
}

func (s *svg) frame(top, bottom float64) {
	s.f(`<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="none" stroke="#333333"/>`+"\n",
		plotLeft, top, plotRight-plotLeft, bottom-top)
}

// logGridX draws the vertical grid lines and labels of a log x axis.
func (s *svg) logGridX(dom logDom, x func(float64) float64, top, bottom float64) {
	for _, v := range dom.ticks() {
		s.line(x(v), top, x(v), bottom, "#dddddd", "", 1)
		s.text(x(v), bottom+16, `text-anchor="middle"`, thousands(v))
	}
}

// axisLabels writes a panel's x label under it and its y label turned
// along its left edge; each has an id for the tests.
func (s *svg) axisLabels(panel string, top, bottom float64, yLabel string) {
	s.text((plotLeft+plotRight)/2, bottom+36, `id="x-label-`+panel+`" text-anchor="middle"`, xLabel)
	cy := (top + bottom) / 2
	s.text(20, cy, fmt.Sprintf(`id="y-label-%s" text-anchor="middle" transform="rotate(-90 20 %.1f)"`, panel, cy), yLabel)
}

// series draws one series as a line through its positive points, with a
// marker and a tooltip (<title>) at each.
func (s *svg) series(id, color, dash, marker string, pts []lbPlotPoint, x, y func(float64) float64,
	val func(lbPlotPoint) float64, tip func(lbPlotPoint) string) {
	s.f(`<g id="%s">`+"\n", id)
	var coords []string
	for _, pt := range pts {
		if v := val(pt); v > 0 {
			coords = append(coords, fmt.Sprintf("%.1f,%.1f", x(float64(pt.concurrency)), y(v)))
		}
	}
	d := ""
	if dash != "" {
		d = ` stroke-dasharray="` + dash + `"`
	}
	s.f(`<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(coords, " "), color, d)
	for _, pt := range pts {
		v := val(pt)
		if v <= 0 {
			continue
		}
		var b strings.Builder
		xml.EscapeText(&b, []byte(tip(pt)))
		s.f(`<g><title>%s</title>`, b.String())
		s.marker(marker, x(float64(pt.concurrency)), y(v), color)
		s.f("</g>\n")
	}
	s.f("</g>\n")
}

// logDom is a log-scale domain from one power of ten to another.
type logDom struct{ lo, hi float64 }

// logDomain is the smallest span of whole decades holding lo..hi.
func logDomain(lo, hi float64) logDom {
	d := logDom{math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))}
	if d.hi <= d.lo {
		d.hi = d.lo * 10
	}
	return d
}

// scale maps v in the domain onto a..b.
func (d logDom) scale(v, a, b float64) float64 {
	f := (math.Log10(v) - math.Log10(d.lo)) / (math.Log10(d.hi) - math.Log10(d.lo))
	return a + f*(b-a)
}

// ticks are the domain's powers of ten.
func (d logDom) ticks() []float64 {
	var out []float64
	for v := d.lo; v <= d.hi*1.0001; v *= 10 {
		out = append(out, v)
	}
	return out
}

// niceScale picks a step of 1, 2 or 5 × 10^k giving four or five ticks
// from 0 past mx, and the top of the axis.
func niceScale(mx float64) (step, top float64) {
	if mx <= 0 {
		return 1, 4
	}
	raw := mx / 4
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if step = m * mag; step >= raw {
			break
		}
	}
	return step, math.Ceil(mx*1.05/step) * step
}

func mibf(n int64) float64 { return float64(n) / (1 << 20) }

// thousands formats v rounded to a whole number with comma separators.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
