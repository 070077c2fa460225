package builtin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The bounds of list_files and search.
const (
	defaultMaxEntries = 500
	maxMaxEntries     = 5000
	defaultMaxResults = 100
	maxMaxResults     = 1000
	// maxLineShown: search cuts a longer matching line.
	maxLineShown = 200
)

type listInput struct {
	Path       string `json:"path,omitempty" jsonschema:"the directory, relative to the checkout root (default: the root)"`
	Recursive  bool   `json:"recursive,omitempty" jsonschema:"list the subdirectories' contents too"`
	MaxEntries int    `json:"max_entries,omitempty" jsonschema:"the most entries to list (default 500)"`
}

type searchInput struct {
	Pattern    string `json:"pattern" jsonschema:"the text to find; a Go regular expression when regex is true"`
	Path       string `json:"path,omitempty" jsonschema:"the directory or file to search, relative to the checkout root (default: the root)"`
	Regex      bool   `json:"regex,omitempty" jsonschema:"treat pattern as a Go (RE2) regular expression instead of plain text"`
	Glob       string `json:"glob,omitempty" jsonschema:"search only files whose name matches this glob, such as *.go (a glob with / matches the path)"`
	MaxResults int    `json:"max_results,omitempty" jsonschema:"the most matching lines to return (default 100)"`
}

const (
	listDesc = "List the files and directories of a directory of the checkout, sorted by name; directories end with /. " +
		"Skips .git."
	searchDesc = "Search the text files of the checkout for a pattern (plain text, case-sensitive; a Go regular expression when regex is true). " +
		"Answers path:line: text for each matching line. Skips .git, binary files, files over 1 MiB and symbolic links."
)

// addFindTools adds list_files and search to srv.
func (s *server) addFindTools(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{Name: "list_files", Description: listDesc, Annotations: readOnly},
		func(_ context.Context, _ *mcp.CallToolRequest, in listInput) (*mcp.CallToolResult, any, error) {
			out, err := s.listFiles(in)
			return text(out), nil, err
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "search", Description: searchDesc, Annotations: readOnly},
		func(ctx context.Context, _ *mcp.CallToolRequest, in searchInput) (*mcp.CallToolResult, any, error) {
			out, err := s.search(ctx, in)
			return text(out), nil, err
		})
}

// locateDir resolves the directory (or file) p, "" meaning the root, for
// list_files and search.
func (s *server) locateDir(root *os.Root, p string) (string, fs.FileInfo, error) {
	if p == "" {
		p = "."
	}
	loc, err := s.co.locate(root, p)
	if err != nil {
		return "", nil, err
	}
	fi, err := root.Stat(loc)
	if err != nil {
		return "", nil, describe(p, err)
	}
	return loc, fi, nil
}

// listFiles answers list_files.
func (s *server) listFiles(in listInput) (string, error) {
	root, err := s.co.open()
	if err != nil {
		return "", err
	}
	defer func() { _ = root.Close() }()
	dir, fi, err := s.locateDir(root, in.Path)
	if err != nil {
		return "", fmt.Errorf("listing %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("listing %s: it is a file, not a directory; read_file reads it", in.Path)
	}
	limit := bounded(in.MaxEntries, defaultMaxEntries, maxMaxEntries)
	var lines []string
	more := false
	err = fs.WalkDir(root.FS(), dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case p == dir:
			return err // the directory itself: not listed, and an error stops the walk
		case err != nil:
			return fs.SkipDir // a subdirectory, listed already, that cannot be read
		case isGitName(d.Name()):
			return skipDir(d)
		case len(lines) == limit:
			more = true
			return fs.SkipAll
		}
		lines = append(lines, entry(root, p, d))
		if d.IsDir() && !in.Recursive {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("listing %w", describe(in.Path, err))
	}
	if len(lines) == 0 {
		return fmt.Sprintf("(%s is empty)", orRoot(in.Path)), nil
	}
	if more {
		lines = append(lines, fmt.Sprintf("[stopped at %d entries; more exist: list a subdirectory, or raise max_entries (at most %d)]", limit, maxMaxEntries))
	}
	return strings.Join(lines, "\n"), nil
}

// entry is one line of a listing: the path relative to the checkout, with
// a / for a directory and the target of a symbolic link.
func entry(root *os.Root, p string, d fs.DirEntry) string {
	switch {
	case d.IsDir():
		return p + "/"
	case d.Type()&fs.ModeSymlink != 0:
		if t, err := root.Readlink(p); err == nil {
			return p + " -> " + t
		}
	}
	return p
}

// skipDir skips d: the whole tree when it is a directory.
func skipDir(d fs.DirEntry) error {
	if d.IsDir() {
		return fs.SkipDir
	}
	return nil
}

func orRoot(p string) string {
	if p == "" || p == "." {
		return "the checkout"
	}
	return p
}

// bounded is n, or def when n is not positive, and at most most.
func bounded(n, def, most int) int {
	if n <= 0 {
		return def
	}
	return min(n, most)
}

// matcher finds pattern in a line.
type matcher func(line []byte) bool

func newMatcher(in searchInput) (matcher, error) {
	if in.Pattern == "" {
		return nil, errors.New("searching: the pattern is empty")
	}
	if !in.Regex {
		pat := []byte(in.Pattern)
		return func(line []byte) bool { return bytes.Contains(line, pat) }, nil
	}
	re, err := regexp.Compile(in.Pattern)
	if err != nil {
		return nil, fmt.Errorf("searching: the pattern is not a valid Go regular expression: %w", err)
	}
	return re.Match, nil
}

// searchState is one search under way.
type searchState struct {
	root    *os.Root
	match   matcher
	glob    string
	limit   int
	out     []string
	more    bool
	skipped int // files over MaxSearchFileBytes
}

// search answers search.
func (s *server) search(ctx context.Context, in searchInput) (string, error) {
	m, err := newMatcher(in)
	if err != nil {
		return "", err
	}
	if _, err := path.Match(in.Glob, ""); err != nil {
		return "", fmt.Errorf("searching: the glob %q is malformed: %w", in.Glob, err)
	}
	root, err := s.co.open()
	if err != nil {
		return "", err
	}
	defer func() { _ = root.Close() }()
	start, _, err := s.locateDir(root, in.Path)
	if err != nil {
		return "", fmt.Errorf("searching %w", err)
	}
	st := &searchState{root: root, match: m, glob: in.Glob, limit: bounded(in.MaxResults, defaultMaxResults, maxMaxResults)}
	err = fs.WalkDir(root.FS(), start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable directory is passed over
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if p != start && isGitName(d.Name()) {
			return skipDir(d)
		}
		if d.Type().IsRegular() && st.wants(p) {
			return st.file(p)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.SkipAll) {
		return "", fmt.Errorf("searching %w", describe(orRoot(in.Path), err))
	}
	return st.answer(in), nil
}

// wants reports whether the file p passes the glob.
func (st *searchState) wants(p string) bool {
	if st.glob == "" {
		return true
	}
	name := path.Base(p)
	if strings.Contains(st.glob, "/") {
		name = p
	}
	ok, _ := path.Match(st.glob, name)
	return ok
}

// file searches the file p, and stops the walk once the limit is reached.
func (st *searchState) file(p string) error {
	f, fi, err := openRegular(st.root, p, p)
	if err != nil {
		return nil // gone, or changed into something else, since it was listed
	}
	defer func() { _ = f.Close() }()
	if fi.Size() > MaxSearchFileBytes {
		st.skipped++
		return nil
	}
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(sniffBytes); bytes.IndexByte(head, 0) >= 0 {
		return nil
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 64<<10), MaxSearchFileBytes+1)
	for n := 1; sc.Scan(); n++ {
		if !st.match(sc.Bytes()) {
			continue
		}
		if len(st.out) == st.limit {
			st.more = true
			return fs.SkipAll
		}
		st.out = append(st.out, fmt.Sprintf("%s:%d: %s", p, n, shorten(sc.Text())))
	}
	return nil
}

// answer is the text of a finished search.
func (st *searchState) answer(in searchInput) string {
	var b strings.Builder
	if len(st.out) == 0 {
		fmt.Fprintf(&b, "no matches for %q in %s", in.Pattern, orRoot(in.Path))
	}
	b.WriteString(strings.Join(st.out, "\n"))
	if st.more {
		fmt.Fprintf(&b, "\n[stopped at %d matching lines; more exist: narrow path, glob or pattern, or raise max_results (at most %d)]", st.limit, maxMaxResults)
	}
	if st.skipped > 0 {
		fmt.Fprintf(&b, "\n[%d files over 1 MiB were not searched]", st.skipped)
	}
	return b.String()
}

// shorten cuts a line longer than maxLineShown, on a character boundary.
func shorten(line string) string {
	line = strings.TrimRight(line, "\r")
	if len(line) <= maxLineShown {
		return line
	}
	keep := maxLineShown
	for keep > 0 && !isRuneStart(line[keep]) {
		keep--
	}
	return line[:keep] + fmt.Sprintf(" [... %d more bytes]", len(line)-keep)
}
