package sanitize

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Redacted replaces a secret wherever it would have appeared.
const Redacted = "[REDACTED]"

const (
	// MinSecretLen is the shortest secret that is redacted; shorter strings
	// would blank out ordinary words.
	MinSecretLen = 4
	// FragmentLen is the shortest run of a secret's form that is redacted
	// on its own: 12 letters and digits of a random token carry about 60
	// bits, too many to turn up by chance in a tool's output, and the 28 or
	// more characters of a GitHub token left unknown are too many to guess.
	// A form shorter than this is redacted only whole.
	FragmentLen = 12
	// minFormLen is the shortest encoded form looked for: the base64 or hex
	// of a very short secret would match ordinary text.
	minFormLen = 8
)

// Redactor removes secrets from text: the configured ones in every form
// listed at NewRedactor, and tokens of well-known shapes whatever their
// value. It is safe for concurrent use.
type Redactor struct {
	passes []*pass           // one per window length
	exact  *strings.Replacer // secrets with too few letters and digits to fold
}

// NewRedactor prepares the redaction of secrets (shorter than MinSecretLen:
// ignored). Each secret is looked for in these forms: itself, its base64
// (standard and URL alphabets, padded or not, and at each of the three
// byte offsets it can have inside a longer base64 text), its base32
// (standard and hex alphabets, padded or not, at each of the five byte
// offsets), its hex, and its URL encodings. Every form is compared folded:
// ASCII letters in either case, and anything that is not a letter or a
// digit skipped, so a secret upper-cased, split by spaces, dashes or line
// breaks, or quoted in pieces is still found. The text is read with its
// escapes decoded (see unescape): a secret written character by character
// as JSON \u escapes or HTML character references, all or some of them,
// is found too. Any run of at least FragmentLen characters of a form is
// redacted (the secret less its last character, a line-wrapped base64
// blob cut short); a form shorter than that is redacted whole.
func NewRedactor(secrets []string) *Redactor {
	r := &Redactor{}
	byLen := map[int]*pass{}
	var exact []string
	for _, s := range secrets {
		if len(s) < MinSecretLen {
			continue
		}
		forms := secretForms(s)
		if len(forms[0]) < MinSecretLen {
			// Mostly punctuation: folded, it would match anything.
			exact = append(exact, s)
			continue
		}
		for i, f := range forms {
			if i > 0 && len(f) < minFormLen {
				continue
			}
			n := min(len(f), FragmentLen)
			p := byLen[n]
			if p == nil {
				p = newPass(n)
				byLen[n] = p
				r.passes = append(r.passes, p)
			}
			for j := 0; j+n <= len(f); j++ {
				p.add(f[j : j+n])
			}
		}
	}
	if len(exact) > 0 {
		slices.SortFunc(exact, func(a, b string) int { return len(b) - len(a) })
		pairs := make([]string, 0, 2*len(exact))
		for _, s := range slices.Compact(exact) {
			pairs = append(pairs, s, Redacted)
		}
		r.exact = strings.NewReplacer(pairs...)
	}
	return r
}

// secretForms are the folded forms of s: s itself first, then its
// encodings, each once.
func secretForms(s string) []string {
	raw := []byte(s)
	forms := []string{s, hex.EncodeToString(raw), url.QueryEscape(s), url.PathEscape(s)}
	for off := range 3 {
		forms = append(forms, base64Core(raw, off))
	}
	for off := range 5 {
		forms = append(forms, base32Core(raw, off, base32.StdEncoding), base32Core(raw, off, base32.HexEncoding))
	}
	out := make([]string, 0, len(forms))
	for _, f := range forms {
		if f = fold(f); !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// base64Core is the part of the base64 encoding of secret that is the same
// wherever the secret sits in a longer text whose length before it is off
// (mod 3): the characters whose six bits all come from the secret. The
// standard and URL alphabets differ only in '+' and '/' against '-' and
// '_', which folding drops, as it drops the padding.
func base64Core(secret []byte, off int) string {
	buf := make([]byte, off+len(secret))
	copy(buf[off:], secret)
	enc := base64.RawStdEncoding.EncodeToString(buf)
	first := (8*off + 5) / 6 // the first character not touched by the bytes before
	last := 8 * len(buf) / 6 // the characters whose bits all lie in buf
	return enc[first:last]
}

// base32Core is base64Core for base32 in the alphabet of enc: a character
// carries five bits, so the secret's place in a longer text matters modulo
// five bytes. The padding, which folding drops, does not matter.
func base32Core(secret []byte, off int, enc *base32.Encoding) string {
	buf := make([]byte, off+len(secret))
	copy(buf[off:], secret)
	s := enc.WithPadding(base32.NoPadding).EncodeToString(buf)
	first := (8*off + 4) / 5 // the first character not touched by the bytes before
	last := 8 * len(buf) / 5 // the characters whose bits all lie in buf
	return s[first:last]
}

// fold keeps the ASCII letters (lower-cased) and digits of s.
func fold(s string) string {
	b := make([]byte, 0, len(s))
	for i := range len(s) {
		if c, ok := foldByte(s[i]); ok {
			b = append(b, c)
		}
	}
	return string(b)
}

func foldByte(c byte) (byte, bool) {
	f := folded[c]
	return f, f != 0
}

// folded maps a letter to its lower case and a digit to itself; anything
// else to 0.
var folded = func() (t [256]byte) {
	for c := range 256 {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			t[c] = byte(c)
		case c >= 'A' && c <= 'Z':
			t[c] = byte(c) + 'a' - 'A'
		}
	}
	return t
}()

// Redact returns s with every secret replaced by Redacted. Text that holds
// none comes back as it is.
func (r *Redactor) Redact(s string) string {
	if r == nil || s == "" {
		return s
	}
	if r.exact != nil {
		s = r.exact.Replace(s)
	}
	b := scratch.Get().(*buffers)
	defer b.release()
	b.spans = shapeSpans(s, b.spans[:0])
	if len(r.passes) > 0 {
		b.fold(s)
		for _, p := range r.passes {
			b.spans = p.find(s, b.norm, b.pos, b.spans)
		}
	}
	if len(b.spans) == 0 {
		return s
	}
	return replaceSpans(s, b.spans)
}

// buffers are the scratch space of one Redact call, pooled: Redact runs on
// every tool result, comment and log line.
type buffers struct {
	norm  []byte
	pos   []int32 // pos[i] is the byte offset in s where norm[i] is written (see endOf)
	spans []span
}

// fold fills norm with the folded text of s, its escapes decoded, and pos
// with where each folded byte is written in s.
func (b *buffers) fold(s string) {
	b.norm, b.pos = b.norm[:0], b.pos[:0]
	for i := 0; i < len(s); i++ {
		f, n := folded[s[i]], 1
		if f == 0 && (s[i] == '\\' || s[i] == '&') {
			// Only a byte that folds to nothing can start an escape, so
			// the letters and digits of ordinary text take one lookup.
			if c, m := unescape(s[i:]); m > 0 {
				f, n = folded[c], m
			}
		}
		if f != 0 {
			b.norm = append(b.norm, f)
			b.pos = append(b.pos, int32(i))
		}
		i += n - 1
	}
}

// endOf is the offset just past the folded byte written at p in s: past
// its escape when it is one.
func endOf(s string, p int32) int {
	if c := s[p]; c == '\\' || c == '&' {
		_, n := unescape(s[p:])
		return int(p) + n
	}
	return int(p) + 1
}

// unescape reads the escape at the start of s and returns the ASCII
// character it stands for (0 for any other character) and its length; n is
// 0 when s starts with no escape. The escapes are JSON's \uXXXX (either
// case of hex, as JavaScript and many languages write it too), HTML's
// numeric references &#103; and &#x67; (the semicolon optional, as
// browsers read them, leading zeros allowed) and the named references of
// XML's five punctuation characters (&amp; &lt; &gt; &quot; &apos;), which
// stand for characters folding drops.
func unescape(s string) (c byte, n int) {
	if len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
		v, ok := hexValue(s[2:6])
		if !ok {
			return 0, 0
		}
		return ascii(v), 6
	}
	if len(s) < 3 || s[0] != '&' {
		return 0, 0
	}
	if s[1] != '#' {
		for _, name := range []string{"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"} {
			if strings.HasPrefix(s, name) {
				return 0, len(name)
			}
		}
		return 0, 0
	}
	base, i := 10, 2
	if s[2] == 'x' || s[2] == 'X' {
		base, i = 16, 3
	}
	start, v := i, 0
	for ; i < len(s); i++ {
		d, ok := digitValue(s[i], base)
		if !ok {
			break
		}
		v = min(v*base+d, 0x110000) // past Unicode: no ASCII character, and no overflow
	}
	if i == start {
		return 0, 0
	}
	if i < len(s) && s[i] == ';' {
		i++
	}
	return ascii(v), i
}

// ascii is v as a byte when it is an ASCII character, else 0.
func ascii(v int) byte {
	if v > 0 && v < 0x80 {
		return byte(v)
	}
	return 0
}

func hexValue(s string) (int, bool) {
	v := 0
	for i := range len(s) {
		d, ok := digitValue(s[i], 16)
		if !ok {
			return 0, false
		}
		v = v*16 + d
	}
	return v, true
}

func digitValue(c byte, base int) (int, bool) {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0'), true
	case base == 16 && c >= 'a' && c <= 'f':
		return int(c-'a') + 10, true
	case base == 16 && c >= 'A' && c <= 'F':
		return int(c-'A') + 10, true
	}
	return 0, false
}

var scratch = sync.Pool{New: func() any { return new(buffers) }}

// maxPooled is the most folded bytes a pooled buffer keeps: the scratch of
// a rare huge tool result is left to the collector.
const maxPooled = 1 << 20

func (b *buffers) release() {
	if cap(b.norm) <= maxPooled {
		scratch.Put(b)
	}
}

// span is a byte range [start, end) of the text to redact.
type span struct{ start, end int }

// replaceSpans replaces the union of spans in s by Redacted, once for each
// stretch where spans overlap or touch.
func replaceSpans(s string, spans []span) string {
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var out strings.Builder
	out.Grow(len(s))
	at := 0
	for i := 0; i < len(spans); {
		start, end := spans[i].start, spans[i].end
		for i++; i < len(spans) && spans[i].start <= end; i++ {
			end = max(end, spans[i].end)
		}
		out.WriteString(s[at:start])
		out.WriteString(Redacted)
		at = end
	}
	out.WriteString(s[at:])
	return out.String()
}

// pass finds the folded windows of one length n that are part of a
// secret's form, by a rolling hash: one multiplication a byte, and a
// bitmap that turns away nearly every window before the map is asked.
type pass struct {
	n     int
	out   uint64 // hashBase^(n-1): the weight of the byte leaving the window
	bits  [bitmapWords]uint64
	grams map[uint64][]string
}

const (
	hashBase    = 0x100000001b3 // the 64-bit FNV prime: odd, with spread-out bits
	bitmapBits  = 16
	bitmapWords = 1 << bitmapBits / 64
)

func newPass(n int) *pass {
	p := &pass{n: n, out: 1, grams: map[uint64][]string{}}
	for range n - 1 {
		p.out *= hashBase
	}
	return p
}

func (p *pass) add(gram string) {
	h := uint64(0)
	for i := range len(gram) {
		h = h*hashBase + uint64(gram[i])
	}
	if !slices.Contains(p.grams[h], gram) {
		p.grams[h] = append(p.grams[h], gram)
	}
	k := h >> (64 - bitmapBits)
	p.bits[k/64] |= 1 << (k % 64)
}

// has reports whether window, of hash h, is one of the pass's.
func (p *pass) has(h uint64, window []byte) bool {
	for _, g := range p.grams[h] {
		if g == string(window) {
			return true
		}
	}
	return false
}

// find appends the spans of s (through pos) whose folded text norm holds a
// window of the pass; windows that overlap make one span.
func (p *pass) find(s string, norm []byte, pos []int32, spans []span) []span {
	n := p.n
	if len(norm) < n {
		return spans
	}
	h := uint64(0)
	for i := range n {
		h = h*hashBase + uint64(norm[i])
	}
	last := -1 // the end (in norm) of the span being built, -1 for none
	for i := 0; ; i++ {
		k := h >> (64 - bitmapBits)
		if p.bits[k/64]&(1<<(k%64)) != 0 && p.has(h, norm[i:i+n]) {
			from, to := int(pos[i]), endOf(s, pos[i+n-1])
			if last >= 0 && i < last {
				spans[len(spans)-1].end = to
			} else {
				spans = append(spans, span{from, to})
			}
			last = i + n
		}
		if i+n >= len(norm) {
			return spans
		}
		h = (h-uint64(norm[i])*p.out)*hashBase + uint64(norm[i+n])
	}
}

// Holds reports whether s holds a secret Redact would replace.
func (r *Redactor) Holds(s string) bool { return r.Redact(s) != s }
