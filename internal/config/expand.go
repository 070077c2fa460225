package config

import (
	"errors"
	"strings"
)

// errBadReference reports a "${" without a valid "NAME}" or "NAME:-default}"
// after it. Its text never includes the value.
var errBadReference = errors.New(`malformed ${...} reference (want ${NAME} or ${NAME:-default}; write $${ for a literal "${")`)

// expansion is the result of expanding one scalar.
type expansion struct {
	value   string   // the expanded text
	refs    bool     // at least one ${...} reference was expanded
	missing []string // unset variables referenced without a default
}

// expand replaces ${NAME} and ${NAME:-default} in s using lookup, and $${
// with a literal "${". ":-" takes the default when NAME is unset or empty.
func expand(s string, lookup func(string) (string, bool)) (expansion, error) {
	var (
		b   strings.Builder
		res expansion
	)
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		s = s[i:]
		switch {
		case strings.HasPrefix(s, "$${"):
			b.WriteString("${")
			s = s[3:]
		case strings.HasPrefix(s, "${"):
			end := strings.IndexByte(s, '}')
			if end < 0 {
				return expansion{}, errBadReference
			}
			name, def, hasDef := strings.Cut(s[2:end], ":-")
			if !validEnvName(name) {
				return expansion{}, errBadReference
			}
			val, ok := lookup(name)
			switch {
			case hasDef && val == "":
				val = def
			case !ok:
				res.missing = append(res.missing, name)
			}
			b.WriteString(val)
			res.refs = true
			s = s[end+1:]
		default:
			b.WriteByte('$')
			s = s[1:]
		}
	}
	res.value = b.String()
	return res, nil
}

// validEnvName reports whether name is [A-Za-z_][A-Za-z0-9_]*.
func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
