package builtin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxLinks bounds the symbolic links one path may go through, as the
// kernel's ELOOP does.
const maxLinks = 40

// checkout is the directory the tools work in.
type checkout struct {
	dir  string // absolute, as given
	real string // absolute, symbolic links resolved
}

// open opens the checkout for one call. The caller closes it.
func (c checkout) open() (*os.Root, error) {
	r, err := os.OpenRoot(c.real)
	if err != nil {
		return nil, fmt.Errorf("opening the checkout: %w", err)
	}
	return r, nil
}

// rel turns the model's path into a clean path relative to the checkout
// ("." for the checkout itself), or says why it is refused. It looks at the
// text alone; resolve follows the links.
func (c checkout) rel(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New(`"": the path is empty; give a path relative to the checkout root, such as README.md`)
	case strings.ContainsRune(p, 0):
		return "", fmt.Errorf("%q: the path contains a NUL byte", p)
	case filepath.IsAbs(p):
		clean := filepath.Clean(p)
		for _, base := range []string{c.dir, c.real} {
			if clean == base {
				return ".", nil
			}
			if r, ok := strings.CutPrefix(clean, base+string(filepath.Separator)); ok {
				return r, nil
			}
		}
		return "", fmt.Errorf("%s: the path is outside the checkout; give a path relative to the checkout root", p)
	}
	clean := filepath.Clean(p)
	if clean != "." && !filepath.IsLocal(clean) {
		return "", fmt.Errorf("%s: the path leads out of the checkout; give a path inside it", p)
	}
	return clean, nil
}

// resolve follows the symbolic links along rel inside root and returns the
// same file's path with no link in it; components that do not exist yet
// are kept as they are. A link to an absolute path, or one that leads out
// of the checkout, is refused. root refuses the same again when the file is
// opened, so a link changed in between cannot lead out either.
func resolve(root *os.Root, shown, rel string) (string, error) {
	todo := splitPath(rel)
	var done []string
	links := 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case ".", "":
			continue
		case "..":
			if len(done) == 0 {
				return "", fmt.Errorf("%s: the path leads out of the checkout through a symbolic link", shown)
			}
			done = done[:len(done)-1]
			continue
		}
		cur := filepath.Join(append(done, name)...)
		fi, err := root.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			done = append(done, name)
			continue
		case err != nil:
			return "", describe(shown, err)
		case fi.Mode()&fs.ModeSymlink == 0:
			done = append(done, name)
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%s: the path goes through too many symbolic links", shown)
		}
		target, err := root.Readlink(cur)
		if err != nil {
			return "", describe(shown, err)
		}
		if filepath.IsAbs(target) {
			return "", fmt.Errorf("%s: the path goes through a symbolic link (%s) to an absolute path; the workspace tools follow only relative links that stay in the checkout", shown, cur)
		}
		todo = append(splitPath(target), todo...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return filepath.Join(done...), nil
}

// splitPath splits a slash-separated path into its components.
func splitPath(p string) []string {
	return strings.Split(filepath.ToSlash(p), "/")
}

// locate resolves the model's path p in root: the path to open, with no
// symbolic link in it.
func (c checkout) locate(root *os.Root, p string) (string, error) {
	rel, err := c.rel(p)
	if err != nil {
		return "", err
	}
	return resolve(root, p, rel)
}

// locateForWrite is locate for a file about to be written: a path with a
// ".git" component, as the model wrote it or once its links are followed,
// is refused.
func (c checkout) locateForWrite(root *os.Root, p string) (string, error) {
	rel, err := c.rel(p)
	if err != nil {
		return "", err
	}
	if inGit(rel) {
		return "", fmt.Errorf("%s: the path is inside a .git directory (or is a .git file); the workspace tools do not write there", p)
	}
	res, err := resolve(root, p, rel)
	if err != nil {
		return "", err
	}
	if inGit(res) {
		return "", fmt.Errorf("%s: the path leads into a .git directory through a symbolic link (to %s); the workspace tools do not write there", p, res)
	}
	return res, nil
}

// inGit reports whether a component of the relative path rel names a
// ".git": in any case, and with what file systems that fold names ignore
// (trailing dots and spaces, the characters HFS+ drops, the 8.3 name).
func inGit(rel string) bool {
	for _, name := range splitPath(rel) {
		if isGitName(name) {
			return true
		}
	}
	return false
}

// isGitName reports whether name may name a ".git" on some file system.
func isGitName(name string) bool {
	name = strings.Map(func(r rune) rune {
		if hfsIgnored(r) {
			return -1
		}
		return r
	}, name)
	name = strings.TrimRight(name, ". ")
	return strings.EqualFold(name, ".git") || strings.EqualFold(name, "git~1")
}

// hfsIgnored reports the code points HFS+ ignores in names (as git's
// is_hfs_dotgit does).
func hfsIgnored(r rune) bool {
	switch {
	case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
		return true
	}
	return false
}

// describe rewrites an error from the file system for the model: what went
// wrong with the path it gave, without the paths the system names.
func describe(p string, err error) error {
	var why string
	switch {
	case errors.Is(err, fs.ErrNotExist):
		why = "no such file or directory (list_files shows what exists)"
	case errors.Is(err, syscall.ENOTDIR):
		why = "a component of the path is not a directory"
	case errors.Is(err, syscall.EISDIR):
		why = "it is a directory (list_files lists it)"
	case errors.Is(err, syscall.ELOOP):
		why = "too many symbolic links"
	case errors.Is(err, fs.ErrPermission):
		why = "permission denied"
	case strings.Contains(err.Error(), "escapes from parent"):
		why = "it leads out of the checkout"
	default:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		why = err.Error()
	}
	return fmt.Errorf("%s: %s", p, why)
}
