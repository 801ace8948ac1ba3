package fetch

import "sync"

// Cache remembers the last document fetched with a 200 for each URL, so
// Fetcher.Get can ask the origin whether it changed (If-None-Match,
// If-Modified-Since) and, on a 304, return it again.
//
// The key is the URL exactly as passed to Get, without the request headers:
// do not share one Cache between callers that send different credentials
// for the same URL, or one caller's 304 hands it the other's document. Get
// stores a Document of its own and never modifies one it loads, so
// implementations need not copy. They must be safe for concurrent use.
type Cache interface {
	// Load returns the document stored for url, if any.
	Load(url string) (*Document, bool)
	// Store records doc as the latest document for url.
	Store(url string, doc *Document)
}

// MemoryCache is a map-backed Cache, safe for concurrent use. It keeps one
// document per URL and never evicts: give it a lifetime that suits the set
// of URLs fetched, or call Delete. A cached document keeps its body
// reachable (with Get's default sink, the bytes themselves).
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
