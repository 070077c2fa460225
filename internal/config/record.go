package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// validateRecord checks llm.record: "" (off), or a file the recording can
// be. A relative path is relative to the working directory, like
// state_dir. The file need not exist, nor its folder: what is in the way
// is a problem here (a folder where the file should be, a file where a
// folder should be); whether this user may write there is said when the
// file is opened, before the first task.
func validateRecord(k *checker, p string) {
	const key = "llm.record"
	switch {
	case p == "":
		return
	case strings.TrimSpace(p) == "":
		k.add(key, "must name a file (or be left out: no recording)")
		return
	case strings.HasPrefix(p, "~"):
		k.add(key, "~ is not expanded: write ${HOME}/...")
		return
	case strings.HasSuffix(p, "/") || filepath.Base(p) == "." || filepath.Base(p) == "..":
		k.add(key, "must name a file, not a folder, such as "+filepath.Join(p, "model.jsonl"))
		return
	}
	if fi, err := os.Stat(p); err == nil {
		switch {
		case fi.IsDir():
			k.add(key, "is a folder: name a file in it, such as "+filepath.Join(p, "model.jsonl"))
		case !fi.Mode().IsRegular():
			k.add(key, "is not a regular file: "+p)
		}
		return
	}
	for dir := filepath.Dir(p); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		switch {
		case err == nil && fi.IsDir():
			return // the folders below it can be made
		case err == nil:
			k.add(key, "its folder cannot be made: "+dir+" is a file")
			return
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR): // a file further up says so
			k.add(key, "its folder cannot be reached: "+err.Error())
			return
		case dir == filepath.Dir(dir):
			return
		}
	}
}
