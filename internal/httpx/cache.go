package httpx

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// CacheHeader marks an answer the Cache rebuilt from a 304 Not Modified; its
// value is CacheRevalidated.
const (
	CacheHeader      = "X-Coding-Agent-Cache"
	CacheRevalidated = "revalidated"
)

const (
	// defaultCacheEntries is the entry limit when NewCache is given none.
	defaultCacheEntries = 1024
	// maxCachedBody is the largest body stored; a larger answer passes
	// through unstored.
	maxCachedBody = 8 << 20
	// maxCachedBytes bounds the bodies of all entries together, so that
	// many large answers cannot pile up to maxEntries × maxCachedBody.
	maxCachedBytes = 64 << 20
)

// variantHeaders are the request headers an answer may depend on besides
// the URL: the credentials (Authorization for GitHub and GitLab OAuth,
// PRIVATE-TOKEN and JOB-TOKEN for GitLab tokens, Cookie) and content
// negotiation (go-github asks for preview media types with Accept). They
// enter the key only as a SHA-256 digest, so no token is ever kept.
var variantHeaders = []string{"Authorization", "Private-Token", "Job-Token", "Cookie", "Accept", "Accept-Encoding"}

// passHeaders make a GET the caller's own business: it already asks
// conditionally, or for a part of the resource.
var passHeaders = []string{"If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "If-Range", "Range"}

// keptHeaders are the stored header fields a 304 does not replace: they
// describe the stored body (RFC 9111 §3.2 names Content-Length) or the
// connection the 304 came on.
var keptHeaders = map[string]bool{
	"Content-Length": true, "Content-Encoding": true, "Content-Type": true, "Content-Range": true,
	"Transfer-Encoding": true, "Connection": true, "Keep-Alive": true,
}

// Cache is an http.RoundTripper that makes GET requests conditional: it
// remembers each answer's ETag (and Last-Modified), sends If-None-Match /
// If-Modified-Since on the next GET of the same URL with the same
// credentials, and turns a 304 into the remembered 200 answer (headers of
// the 304 — rate-limit headers, Date — merged over the stored ones), marked
// with the header "X-Coding-Agent-Cache: revalidated". GitHub does not
// count a 304 against its rate limit, so polling an unchanged issue or
// comment list costs nothing.
//
// The server stays the source of truth: the cache never answers without
// asking it. Only 200 answers to GET that carry a validator are stored,
// bodies up to 8 MiB, and never one that should be JSON and is not (cut
// short, or an HTML page): a truncated answer can carry the full one's
// ETag; the least recently used entry goes first once
// maxEntries (or 64 MiB of bodies) is exceeded. A request that already
// carries its own conditional or Range header passes through untouched.
//
// Writes invalidate: any request with another method than GET, HEAD,
// OPTIONS or TRACE drops the entries of the same origin whose path is the
// written path or lies below it, whatever the query (POST
// .../issues/1/comments drops GET .../issues/1/comments?page=2). Since
// every answer is revalidated this is not needed with a strong ETag; it
// protects read-your-writes where the validator is coarse: a Last-Modified
// has one-second resolution, so a comment posted in the same second as the
// stored list would otherwise be answered 304. The outcome of the write is
// not looked at: an ambiguous failure (a 502 after the server acted) may
// have changed the resource too, and dropping an entry only costs one full
// GET. A GET answered while a write was in flight is not stored, so an
// answer older than the write cannot slip in behind the invalidation.
// Writes to one resource that change another one listed elsewhere (PATCH
// .../issues/comments/5 changes .../issues/1/comments) are left to the
// server's validators.
//
// It is safe for concurrent use. Put it below the retrying transport
// (Options.Base), so that the retry rules see the 200 a 304 stands for,
// with the rate-limit headers the 304 brought.
type Cache struct {
	next       http.RoundTripper
	maxEntries int

	mu      sync.Mutex
	entries map[string]*list.Element // key → element holding *cacheEntry
	lru     *list.List               // front: most recently used
	bytes   int                      // bodies of all entries
	writes  uint64                   // writes begun; a GET started before one is not stored
	stats   CacheStats
}

// CacheStats counts what a Cache did, for logs and tests.
type CacheStats struct {
	// Revalidated is how many 304s were turned into 200s.
	Revalidated int64
	// Stored is how many answers were stored (a changed resource replacing
	// its entry counts again).
	Stored int64
	// Evicted is how many entries were dropped to stay within the limits.
	Evicted int64
	// Invalidated is how many entries writes dropped.
	Invalidated int64
	// Entries is how many entries are held now.
	Entries int
}

// cacheEntry is one stored answer. It is never changed once stored; an
// update replaces it.
type cacheEntry struct {
	key          string
	origin, path string // of the request URL, for invalidation
	status       string
	proto        string
	protoMajor   int
	protoMinor   int
	header       http.Header
	body         []byte
	etag         string
	lastModified string
}

// NewCache returns a Cache in front of next (nil → http.DefaultTransport)
// holding at most maxEntries answers (0 or less → 1024).
func NewCache(next http.RoundTripper, maxEntries int) *Cache {
	if next == nil {
		next = http.DefaultTransport
	}
	if maxEntries <= 0 {
		maxEntries = defaultCacheEntries
	}
	return &Cache{next: next, maxEntries: maxEntries, entries: map[string]*list.Element{}, lru: list.New()}
}

// Stats returns the counters so far.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries = c.lru.Len()
	return s
}

// RoundTrip sends req, conditionally when a GET's answer is stored.
func (c *Cache) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, "":
		if passThrough(req) {
			return c.next.RoundTrip(req)
		}
		return c.get(req)
	case http.MethodHead, http.MethodOptions, http.MethodTrace:
		return c.next.RoundTrip(req)
	}
	return c.write(req)
}

// passThrough reports whether a GET carries headers that make it the
// caller's own conditional or partial request.
func passThrough(req *http.Request) bool {
	for _, h := range passHeaders {
		if req.Header.Get(h) != "" {
			return true
		}
	}
	return false
}

// write sends a request that may change the server's state and drops the
// entries it may have made stale, before and after: before, so that a
// racing GET cannot revalidate into a stale answer while the write is in
// flight; after, to catch what such a GET stored meanwhile.
func (c *Cache) write(req *http.Request) (*http.Response, error) {
	c.invalidate(req.URL, true)
	resp, err := c.next.RoundTrip(req)
	c.invalidate(req.URL, false)
	return resp, err
}

// invalidate drops the entries of u's origin at or below u's path. begin
// counts a write as started.
func (c *Cache) invalidate(u *url.URL, begin bool) {
	origin, path := originOf(u), strings.TrimSuffix(u.EscapedPath(), "/")
	c.mu.Lock()
	defer c.mu.Unlock()
	if begin {
		c.writes++
	}
	for e := c.lru.Front(); e != nil; {
		next := e.Next()
		ent := e.Value.(*cacheEntry)
		if ent.origin == origin && (ent.path == path || strings.HasPrefix(ent.path, path+"/")) {
			c.removeLocked(e)
			c.stats.Invalidated++
		}
		e = next
	}
}

// get sends a GET, conditionally when its answer is stored, and stores or
// rebuilds the answer.
func (c *Cache) get(req *http.Request) (*http.Response, error) {
	key := cacheKey(req)
	c.mu.Lock()
	var ent *cacheEntry
	if e, ok := c.entries[key]; ok {
		ent = e.Value.(*cacheEntry)
		c.lru.MoveToFront(e)
	}
	writes := c.writes
	c.mu.Unlock()

	out := req
	if ent != nil {
		out = req.Clone(req.Context())
		if ent.etag != "" {
			out.Header.Set("If-None-Match", ent.etag)
		}
		if ent.lastModified != "" {
			out.Header.Set("If-Modified-Since", ent.lastModified)
		}
	}
	resp, err := c.next.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNotModified && ent != nil:
		return c.revalidated(req, ent, resp, writes), nil
	case resp.StatusCode == http.StatusOK:
		return c.store(req, key, resp, writes)
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		c.drop(key)
	}
	return resp, nil
}

// revalidated turns a 304 into the stored 200, with the 304's headers
// merged over the stored ones, and refreshes the entry with them.
func (c *Cache) revalidated(req *http.Request, ent *cacheEntry, notModified *http.Response, writes uint64) *http.Response {
	_, _ = io.Copy(io.Discard, io.LimitReader(notModified.Body, 64<<10))
	notModified.Body.Close()
	header := ent.header.Clone()
	for k, v := range notModified.Header {
		if !keptHeaders[k] {
			header[k] = append([]string(nil), v...)
		}
	}
	fresh := *ent
	fresh.header = header
	if v := header.Get("ETag"); v != "" {
		fresh.etag = v
	}
	if v := header.Get("Last-Modified"); v != "" {
		fresh.lastModified = v
	}
	c.mu.Lock()
	c.stats.Revalidated++
	if c.writes == writes {
		c.replaceLocked(&fresh, false)
	}
	c.mu.Unlock()
	resp := fresh.response(req, notModified)
	resp.Header.Set(CacheHeader, CacheRevalidated)
	return resp
}

// store reads a 200's body and keeps the answer when it carries a
// validator, is small enough and may be stored. The caller gets an answer
// with the body read.
func (c *Cache) store(req *http.Request, key string, resp *http.Response, writes uint64) (*http.Response, error) {
	etag, lastModified := resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	if (etag == "" && lastModified == "") || !storable(resp.Header) {
		c.drop(key)
		return resp, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCachedBody+1))
	if err != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("reading the answer to GET %s: %w", req.URL.Redacted(), err)
	}
	if len(body) > maxCachedBody {
		c.drop(key)
		resp.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(body), resp.Body), Closer: resp.Body}
		return resp, nil
	}
	resp.Body.Close()
	if want, lines := shouldBeJSON(req, resp, false); want && checkJSON(resp, body, lines) != nil {
		// Cut short or not JSON at all: not kept, or its validator would
		// turn the retry's 304 into the same bad answer. The retry layer
		// above judges it.
		c.drop(key)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return resp, nil
	}
	header := resp.Header.Clone()
	header.Del(CacheHeader)
	ent := &cacheEntry{
		key: key, origin: originOf(req.URL), path: strings.TrimSuffix(req.URL.EscapedPath(), "/"),
		status: resp.Status, proto: resp.Proto, protoMajor: resp.ProtoMajor, protoMinor: resp.ProtoMinor,
		header: header, body: body, etag: etag, lastModified: lastModified,
	}
	c.mu.Lock()
	if c.writes == writes {
		c.replaceLocked(ent, true)
	} else if e, ok := c.entries[key]; ok {
		c.removeLocked(e)
	}
	c.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp, nil
}

// storable reports whether the answer allows a private cache to keep it.
func storable(h http.Header) bool {
	for _, v := range h.Values("Cache-Control") {
		for d := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(d), "no-store") {
				return false
			}
		}
	}
	for _, v := range h.Values("Vary") {
		if strings.TrimSpace(v) == "*" {
			return false
		}
	}
	return true
}

// drop forgets key's entry, if any.
func (c *Cache) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		c.removeLocked(e)
	}
}

// replaceLocked stores ent in place of its key's entry, then evicts the
// least recently used entries beyond the limits. counted says whether to
// count it as stored.
func (c *Cache) replaceLocked(ent *cacheEntry, counted bool) {
	if e, ok := c.entries[ent.key]; ok {
		c.removeLocked(e)
	}
	c.entries[ent.key] = c.lru.PushFront(ent)
	c.bytes += len(ent.body)
	if counted {
		c.stats.Stored++
	}
	for c.lru.Len() > c.maxEntries || (c.bytes > maxCachedBytes && c.lru.Len() > 1) {
		c.removeLocked(c.lru.Back())
		c.stats.Evicted++
	}
}

func (c *Cache) removeLocked(e *list.Element) {
	ent := c.lru.Remove(e).(*cacheEntry)
	delete(c.entries, ent.key)
	c.bytes -= len(ent.body)
}

// response rebuilds the stored answer for req; from is the 304 it stands
// for (its TLS state is kept).
func (ent *cacheEntry) response(req *http.Request, from *http.Response) *http.Response {
	return &http.Response{
		Status: ent.status, StatusCode: http.StatusOK,
		Proto: ent.proto, ProtoMajor: ent.protoMajor, ProtoMinor: ent.protoMinor,
		Header: ent.header.Clone(), Body: io.NopCloser(bytes.NewReader(ent.body)),
		ContentLength: int64(len(ent.body)), Uncompressed: from.Uncompressed,
		Request: req, TLS: from.TLS,
	}
}

// cacheKey is the request's origin and path, then a digest of what else
// its answer may depend on: the query, any user info and the variant
// headers. Only the digest holds credentials (a token in a header, a
// password in the URL, a token a query might carry), so no key reveals
// one. Each part is length-prefixed so that no two requests share a digest
// by concatenation.
func cacheKey(req *http.Request) string {
	h := sha256.New()
	part := func(name, v string) { fmt.Fprintf(h, "%d:%s=%d:%s\n", len(name), name, len(v), v) }
	part("query", req.URL.RawQuery)
	if req.URL.User != nil {
		part("user", req.URL.User.String())
	}
	for _, name := range variantHeaders {
		for _, v := range req.Header.Values(name) {
			part(name, v)
		}
	}
	return originOf(req.URL) + req.URL.EscapedPath() + " " + hex.EncodeToString(h.Sum(nil))
}

// originOf is u's scheme and host, lower-cased.
func originOf(u *url.URL) string {
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

type readCloser struct {
	io.Reader
	io.Closer
}
