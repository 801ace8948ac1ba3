package fetch_test

import (
	"fmt"

	"github.com/replicator-go/replicator/fetch"
)

func ExampleDetectKind() {
	fmt.Println(fetch.DetectKind("application/atom+xml; charset=utf-8", nil))
	// Hosts often serve feeds as text/plain or application/octet-stream:
	// then the body decides.
	fmt.Println(fetch.DetectKind("text/plain", []byte("\ufeff<?xml version=\"1.0\"?>\n<!-- generated -->\n<rss version=\"2.0\"/>")))
	fmt.Println(fetch.DetectKind("application/octet-stream", []byte(`<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"/>`)))
	fmt.Println(fetch.DetectKind("application/json", []byte(`{"version": "https://jsonfeed.org/version/1.1", "items": []}`)))
	fmt.Println(fetch.DetectKind("text/plain", []byte("NWF1\n")))
	fmt.Println(fetch.DetectKind("text/html", []byte("<!DOCTYPE html><html></html>")))
	// Output:
	// atom
	// rss
	// rdf
	// jsonfeed
	// nwf
	// html
}
