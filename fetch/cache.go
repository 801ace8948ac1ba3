package fetch

import "sync"

// Cache remembers the last document fetched with a 200 for each URL, so
// Fetcher.Get can ask the origin whether it changed (If-None-Match from its
// ETag, If-Modified-Since from its Last-Modified) and, on a 304, return it
// again instead of downloading the body.
//
// The key is the URL exactly as passed to Get; request headers are not part
// of it. Do not share one Cache between callers that send different
// credentials for the same URL: one caller's 304 would hand it the document
// fetched with the other's credentials.
//
// Get stores a Document of its own (never the one it returns) and never
// modifies a Document it loads, so implementations need not copy.
// Implementations must be safe for concurrent use.
type Cache interface {
	// Load returns the document stored for url, if any.
	Load(url string) (*Document, bool)
	// Store records doc as the latest document for url.
	Store(url string, doc *Document)
}

// MemoryCache is a map-backed Cache. It keeps one document per URL and
// never evicts: give it a lifetime that suits the set of URLs fetched, or
// call Delete. A cached document keeps its body reachable (with Get's
// default sink, the bytes themselves).
//
// Create one with NewMemoryCache. A MemoryCache is safe for concurrent use.
type MemoryCache struct {
	mu   sync.Mutex
	docs map[string]*Document
}

var _ Cache = (*MemoryCache)(nil)

// NewMemoryCache returns an empty MemoryCache.
func NewMemoryCache() *MemoryCache {
	return &MemoryCache{docs: make(map[string]*Document)}
}

// Load implements Cache.
func (c *MemoryCache) Load(url string) (*Document, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.docs[url]
	return d, ok
}

// Store implements Cache.
func (c *MemoryCache) Store(url string, doc *Document) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.docs[url] = doc
}

// Delete forgets the document stored for url.
func (c *MemoryCache) Delete(url string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.docs, url)
}

// Len returns how many URLs have a document stored.
func (c *MemoryCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.docs)
}
