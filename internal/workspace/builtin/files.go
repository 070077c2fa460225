package builtin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sniffBytes is how much of a file is looked at for a NUL byte, as git
// does, to tell a binary file.
const sniffBytes = 8000

type readInput struct {
	Path       string `json:"path" jsonschema:"the file, relative to the checkout root"`
	OffsetLine int    `json:"offset_line,omitempty" jsonschema:"the first line to show, counting from 1 (default 1)"`
	MaxLines   int    `json:"max_lines,omitempty" jsonschema:"the most lines to show (default: as many as fit)"`
}

type writeInput struct {
	Path    string `json:"path" jsonschema:"the file, relative to the checkout root; missing directories are created"`
	Content string `json:"content" jsonschema:"the whole new content of the file"`
}

type editInput struct {
	Path       string `json:"path" jsonschema:"the file, relative to the checkout root"`
	OldText    string `json:"old_text" jsonschema:"the exact text to replace, whitespace and indentation included"`
	NewText    string `json:"new_text" jsonschema:"the text to put in its place"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence (default: old_text must occur exactly once)"`
}

const (
	readDesc = "Read a text file of the checkout. Returns its text as it is, without line numbers. " +
		"A long file is cut; the note at the end gives the offset_line to read on from."
	writeDesc = "Create or overwrite a file of the checkout with content, creating missing directories. " +
		"For a small change to an existing file, prefer edit_file."
	editDesc = "Replace exact text in a file of the checkout. old_text must match the file exactly, " +
		"whitespace and indentation included, and occur once (or set replace_all). Read the file first."
)

// addFileTools adds read_file, write_file and edit_file to srv.
func (s *server) addFileTools(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{Name: "read_file", Description: readDesc, Annotations: readOnly},
		func(_ context.Context, _ *mcp.CallToolRequest, in readInput) (*mcp.CallToolResult, any, error) {
			out, err := s.readFile(in)
			return text(out), nil, err
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "write_file", Description: writeDesc, Annotations: writes},
		func(_ context.Context, _ *mcp.CallToolRequest, in writeInput) (*mcp.CallToolResult, any, error) {
			out, err := s.writeFile(in)
			return text(out), nil, err
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "edit_file", Description: editDesc, Annotations: writes},
		func(_ context.Context, _ *mcp.CallToolRequest, in editInput) (*mcp.CallToolResult, any, error) {
			out, err := s.editFile(in)
			return text(out), nil, err
		})
}

// openRegular opens the regular file p (already located) for reading. A
// FIFO or device is refused without blocking on it.
func openRegular(root *os.Root, shown, p string) (*os.File, fs.FileInfo, error) {
	f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, describe(shown, err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, describe(shown, err)
	}
	if fi.IsDir() {
		_ = f.Close()
		return nil, nil, fmt.Errorf("%s is a directory: list_files lists it", shown)
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, nil, fmt.Errorf("%s is not a regular file (%v)", shown, fi.Mode().Type())
	}
	return f, fi, nil
}

// readFile answers read_file.
func (s *server) readFile(in readInput) (string, error) {
	root, err := s.co.open()
	if err != nil {
		return "", err
	}
	defer func() { _ = root.Close() }()
	p, err := s.co.locate(root, in.Path)
	if err != nil {
		return "", fmt.Errorf("reading %w", err)
	}
	f, fi, err := openRegular(root, in.Path, p)
	if err != nil {
		return "", fmt.Errorf("reading %w", err)
	}
	defer func() { _ = f.Close() }()
	br := bufio.NewReaderSize(f, int(min(max(fi.Size()+1, sniffBytes), 32<<10)))
	head, _ := br.Peek(sniffBytes)
	if bytes.IndexByte(head, 0) >= 0 {
		return fmt.Sprintf("%s is a binary file (%d bytes); read_file shows text files only.", in.Path, fi.Size()), nil
	}
	if fi.Size() == 0 {
		return fmt.Sprintf("(%s is empty)", in.Path), nil
	}
	return readLines(br, in, s.maxRead, fi.Size())
}

// readLines reads the lines in asks for from br, at most limit bytes of
// them, and notes where the answer stops short of the end.
func readLines(br *bufio.Reader, in readInput, limit int, size int64) (string, error) {
	first := max(in.OffsetLine, 1)
	if err := skipLines(br, first-1); err != nil {
		return "", fmt.Errorf("reading %s: %w", in.Path, err)
	}
	out := make([]byte, 0, min(size, int64(limit))+1)
	line, lineStart := first, 0
	for in.MaxLines <= 0 || line < first+in.MaxLines {
		chunk, err := br.ReadSlice('\n')
		if len(out)+len(chunk) > limit {
			return cut(append(out, chunk...), lineStart, in.Path, first, line, limit, size), nil
		}
		out = append(out, chunk...)
		switch {
		case err == nil:
			line, lineStart = line+1, len(out)
		case errors.Is(err, bufio.ErrBufferFull): // the same line goes on
		case errors.Is(err, io.EOF):
			return string(out), nil
		default:
			return "", fmt.Errorf("reading %s: %w", in.Path, err)
		}
	}
	if _, err := br.Peek(1); err != nil {
		return string(out), nil // the file ends with the last line asked for
	}
	return string(out) + fmt.Sprintf("\n[showed lines %d-%d of %s; the file goes on: call read_file with offset_line=%d to read on]",
		first, line-1, in.Path, line), nil
}

// cut ends an answer out that line, starting at lineStart, takes past
// limit: the lines before it, or the start of it when it is the first.
func cut(out []byte, lineStart int, p string, first, line, limit int, size int64) string {
	if line > first {
		return string(out[:lineStart]) + fmt.Sprintf("\n[showed lines %d-%d of %s (%d bytes in all): the answer is limited to %d bytes; call read_file with offset_line=%d to read on]",
			first, line-1, p, size, limit, line)
	}
	keep := limit
	for keep > 0 && !isRuneStart(out[keep]) {
		keep--
	}
	return string(out[:keep]) + fmt.Sprintf("\n[line %d of %s is longer than the %d bytes read_file shows; only its start is shown. Use search, or run_command with head -c/cut, to see more of it]",
		line, p, limit)
}

// skipLines reads past n lines of br, and says so when the file has
// fewer, or no more after them.
func skipLines(br *bufio.Reader, n int) error {
	done, partial := 0, false
	for done < n {
		chunk, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			done, partial = done+1, false
		case errors.Is(err, bufio.ErrBufferFull):
			partial = true // the same line goes on
		case errors.Is(err, io.EOF):
			if partial || len(chunk) > 0 {
				done++
			}
			return fmt.Errorf("offset_line %d is past the end: the file has %d lines", n+1, done)
		default:
			return err
		}
	}
	if _, err := br.Peek(1); n > 0 && errors.Is(err, io.EOF) {
		return fmt.Errorf("offset_line %d is past the end: the file has %d lines", n+1, n)
	}
	return nil
}

func isRuneStart(b byte) bool { return b&0xc0 != 0x80 }

// writeFile answers write_file.
func (s *server) writeFile(in writeInput) (string, error) {
	if len(in.Content) > MaxWriteBytes {
		return "", fmt.Errorf("writing %s: the content is %d bytes, more than the %d bytes write_file takes; write the file in parts with run_command, or make it smaller",
			in.Path, len(in.Content), MaxWriteBytes)
	}
	root, err := s.co.open()
	if err != nil {
		return "", err
	}
	defer func() { _ = root.Close() }()
	p, err := s.co.locateForWrite(root, in.Path)
	if err != nil {
		return "", fmt.Errorf("writing %w", err)
	}
	verb := "overwrote"
	if _, err := root.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		verb = "created"
	}
	if dir := filepath.Dir(p); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return "", fmt.Errorf("writing %w", describe(in.Path, err))
		}
	}
	if err := writeRegular(root, in.Path, p, []byte(in.Content)); err != nil {
		return "", fmt.Errorf("writing %w", err)
	}
	return fmt.Sprintf("%s %s (%d bytes written)", verb, in.Path, len(in.Content)), nil
}

// writeRegular writes data to the file p (already located), which is a
// regular file or does not exist, keeping its mode.
func writeRegular(root *os.Root, shown, p string, data []byte) error {
	f, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return describe(shown, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", shown)
	} else if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return describe(shown, err)
	}
	return nil
}

// editFile answers edit_file.
func (s *server) editFile(in editInput) (string, error) {
	if in.OldText == "" {
		return "", fmt.Errorf("editing %s: old_text is empty; to write a whole file use write_file", in.Path)
	}
	if in.OldText == in.NewText {
		return "", fmt.Errorf("editing %s: old_text and new_text are the same; nothing to change", in.Path)
	}
	root, err := s.co.open()
	if err != nil {
		return "", err
	}
	defer func() { _ = root.Close() }()
	p, err := s.co.locateForWrite(root, in.Path)
	if err != nil {
		return "", fmt.Errorf("editing %w", err)
	}
	old, err := readAll(root, in.Path, p)
	if err != nil {
		return "", fmt.Errorf("editing %w", err)
	}
	n := strings.Count(old, in.OldText)
	switch {
	case n == 0:
		return "", fmt.Errorf("editing %s: old_text was not found in the file. It must match exactly, whitespace and indentation included: read_file the part to change and copy the text from it", in.Path)
	case n > 1 && !in.ReplaceAll:
		return "", fmt.Errorf("editing %s: old_text occurs %d times in the file; include more of the surrounding lines so it occurs once, or set replace_all to replace all %d", in.Path, n, n)
	}
	count := 1
	if in.ReplaceAll {
		count = -1
	}
	updated := strings.Replace(old, in.OldText, in.NewText, count)
	if len(updated) > MaxWriteBytes {
		return "", fmt.Errorf("editing %s: the file would be %d bytes, more than the %d bytes edit_file writes", in.Path, len(updated), MaxWriteBytes)
	}
	if err := writeRegular(root, in.Path, p, []byte(updated)); err != nil {
		return "", fmt.Errorf("editing %w", err)
	}
	if n == 1 {
		return fmt.Sprintf("replaced 1 occurrence in %s", in.Path), nil
	}
	return fmt.Sprintf("replaced %d occurrences in %s", n, in.Path), nil
}

// readAll reads the whole regular text file p, of at most MaxWriteBytes.
func readAll(root *os.Root, shown, p string) (string, error) {
	f, fi, err := openRegular(root, shown, p)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	if fi.Size() > MaxWriteBytes {
		return "", fmt.Errorf("%s is %d bytes, more than the %d bytes edit_file edits; use run_command (sed, a script) for it", shown, fi.Size(), MaxWriteBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxWriteBytes+1))
	if err != nil {
		return "", describe(shown, err)
	}
	if bytes.IndexByte(b[:min(len(b), sniffBytes)], 0) >= 0 {
		return "", fmt.Errorf("%s is a binary file; edit_file edits text files only", shown)
	}
	return string(b), nil
}
