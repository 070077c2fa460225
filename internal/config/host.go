package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// hostProblems are what this machine would refuse at start, as far as
// `config check` can tell without creating anything the daemon keeps:
// a logging.file this process cannot write.
func (c *Config) hostProblems() Problems {
	var ps Problems
	if c.Logging.File != "" {
		if msg := unwritable(c.Logging.File); msg != "" {
			ps = append(ps, Problem{Path: "logging.file", Msg: msg})
		}
	}
	return ps
}

// unwritable says why the file at path cannot be appended to by this
// process, or "" when it can or that cannot be told: an existing file is
// opened for appending (and closed, unchanged); a new one needs its
// nearest existing folder to take new files, which a file made there and
// removed at once tells. The message never repeats the path, which is a
// configured value.
func unwritable(path string) string {
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return "cannot be written: it is a directory"
	case err == nil && !fi.Mode().IsRegular():
		return "" // a device or a pipe: writing to it is its own business
	case err == nil:
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return "cannot be written: " + reason(err)
		}
		f.Close()
		return ""
	case !errors.Is(err, fs.ErrNotExist):
		return "cannot be written: " + reason(err) // a file on its path, a folder it may not enter
	}
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		switch {
		case err == nil && !fi.IsDir():
			return "cannot be written: not a directory"
		case err == nil:
			f, err := os.CreateTemp(dir, ".coding-agent-check-*")
			if err != nil {
				return "cannot be created: " + reason(err)
			}
			f.Close()
			os.Remove(f.Name())
			return ""
		case !errors.Is(err, fs.ErrNotExist):
			return "cannot be written: " + reason(err)
		case filepath.Dir(dir) == dir:
			return ""
		}
	}
}

// reason is the system's reason of a path error, without the operation
// and the path.
func reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
