//go:build linux

package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
)

// svgDoc is what a test needs of a written SVG: the root's name, every
// element id, the text inside each id'd element and all character data.
type svgDoc struct {
	root    string
	ids     map[string]string // id → its element's name
	idText  map[string]string
	text    string
	markers map[string]int // circles and squares per enclosing id'd group
}

// parseSVG decodes the whole document, failing the test on any XML error.
func parseSVG(t *testing.T, data []byte) svgDoc {
	t.Helper()
	doc := svgDoc{ids: map[string]string{}, idText: map[string]string{}, markers: map[string]int{}}
	dec := xml.NewDecoder(bytes.NewReader(data))
	var stack []string // ids of the open elements, "" for none
	var all strings.Builder
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, data)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if doc.root == "" {
				doc.root = tok.Name.Local
				if tok.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("root namespace %q, want the SVG namespace", tok.Name.Space)
				}
			}
			id := ""
			for _, a := range tok.Attr {
				if a.Name.Local == "id" {
					id = a.Value
					if _, dup := doc.ids[id]; dup {
						t.Errorf("id %q used twice", id)
					}
					doc.ids[id] = tok.Name.Local
				}
			}
			if tok.Name.Local == "circle" || tok.Name.Local == "rect" {
				for _, open := range stack {
					if open != "" {
						doc.markers[open]++
					}
				}
			}
			stack = append(stack, id)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			all.Write(tok)
			for _, open := range stack {
				if open != "" {
					doc.idText[open] += string(tok)
				}
			}
		}
	}
	doc.text = all.String()
	return doc
}

func samplePlot() lbPlot {
	return lbPlot{
		title: "latency-bound: every response 500ms after its request, 1000 hosts",
		note:  "one run <shared machine> & noisy",
		points: []lbPlotPoint{
			{concurrency: 16, ideal: 32, worker: 31.5, bare: 31.9, workerRSS: 20 << 20, bareRSS: 12 << 20},
			{concurrency: 256, ideal: 512, worker: 505, bare: 509, workerRSS: 40 << 20, bareRSS: 25 << 20},
			{concurrency: 1024, ideal: 2048, worker: 1990, bare: 2030, workerRSS: 95 << 20, bareRSS: 60 << 20},
		},
	}
}

func TestWriteLatencyPlot(t *testing.T) {
	var buf bytes.Buffer
	if err := writeLatencyPlot(&buf, samplePlot()); err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, buf.Bytes())
	if doc.root != "svg" {
		t.Fatalf("root element %q, want svg", doc.root)
	}
	for _, id := range []string{"throughput-worker", "throughput-bare", "ideal", "rss-worker", "rss-bare", "legend"} {
		if doc.ids[id] != "g" {
			t.Errorf("no group %q (ids: %v)", id, doc.ids)
		}
	}
	for _, id := range []string{"throughput-worker", "throughput-bare", "rss-worker", "rss-bare"} {
		if got := doc.markers[id]; got != 3 {
			t.Errorf("%s has %d markers, want one per point (3)", id, got)
		}
	}
	for id, want := range map[string]string{
		"x-label-throughput": "fetches in flight",
		"y-label-throughput": "commands per second",
		"x-label-rss":        "fetches in flight",
		"y-label-rss":        "peak RSS (MiB)",
	} {
		if !strings.Contains(doc.idText[id], want) {
			t.Errorf("%s = %q, want it to contain %q", id, doc.idText[id], want)
		}
	}
	for _, want := range []string{
		samplePlot().title,
		"one run <shared machine> & noisy", // escaped on the way out, whole on the way in
		"worker", "bare loop", "ideal: concurrency ÷ delay",
		"1024 in flight: worker 97%, bare 99%",
		"peak RSS at 16 / 256 / 1024 in flight: worker 20 / 40 / 95 MiB; bare loop 12 / 25 / 60 MiB",
		"worker, 1024 in flight: 1,990 commands/s, 97.2% of 2,048",
		"bare loop, 16 in flight: peak RSS 12.0 MiB",
		"10", "100", "1,000", "10,000", // the log ticks from 16 to 2,048
		"ideal, 256 in flight: 512 commands/s",
	} {
		if !strings.Contains(doc.text, want) {
			t.Errorf("text %q missing", want)
		}
	}
	if n := buf.Len(); n > 20<<10 {
		t.Errorf("SVG is %d bytes; keep it small", n)
	}
}

func TestWriteLatencyPlotEdges(t *testing.T) {
	if err := writeLatencyPlot(io.Discard, lbPlot{}); err == nil {
		t.Error("no points: want an error")
	}
	// A side with no figures (zero) is left out, not drawn at log(0).
	p := samplePlot()
	for i := range p.points {
		p.points[i].bare, p.points[i].bareRSS = 0, 0
	}
	var buf bytes.Buffer
	if err := writeLatencyPlot(&buf, p); err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, buf.Bytes())
	if got := doc.markers["throughput-bare"]; got != 0 {
		t.Errorf("bare markers %d, want 0", got)
	}
	if strings.Contains(buf.String(), "NaN") || strings.Contains(buf.String(), "Inf") {
		t.Errorf("non-finite coordinate in:\n%s", buf.String())
	}
}

func TestPlotScales(t *testing.T) {
	d := logDomain(32, 2048)
	if d.lo != 10 || d.hi != 10000 {
		t.Errorf("logDomain(32, 2048) = %v, want 10..10000", d)
	}
	if got := d.ticks(); len(got) != 4 {
		t.Errorf("ticks %v, want 4 decades' bounds", got)
	}
	if d := logDomain(100, 100); d.lo != 100 || d.hi != 1000 {
		t.Errorf("logDomain(100, 100) = %v, want 100..1000", d)
	}
	if got := d.scale(100, 0, 300); got != 100 {
		t.Errorf("scale(100) over 10..10000 onto 0..300 = %v, want 100", got)
	}
	for _, tt := range []struct{ mx, step, top float64 }{
		{95, 50, 100}, {40, 10, 50}, {7, 2, 8}, {0, 1, 4},
	} {
		step, top := niceScale(tt.mx)
		if step != tt.step || top != tt.top {
			t.Errorf("niceScale(%v) = %v, %v, want %v, %v", tt.mx, step, top, tt.step, tt.top)
		}
	}
	for v, want := range map[float64]string{0: "0", 999.6: "1,000", 2048: "2,048", 1234567: "1,234,567", -1500: "-1,500"} {
		if got := thousands(v); got != want {
			t.Errorf("thousands(%v) = %q, want %q", v, got, want)
		}
	}
}
