package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ", ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// parseHeaders turns repeated -H 'Name: value' flags into a map. The
// sanitizer judges names and values later; this only splits them.
func parseHeaders(raw []string) (map[string]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	h := make(map[string]string, len(raw))
	for _, line := range raw {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			// The line is not echoed: it may be a bare secret.
			return nil, fmt.Errorf("-H: want 'Name: value', found no colon")
		}
		if _, dup := h[name]; dup {
			return nil, fmt.Errorf("-H: header %q given twice", name)
		}
		h[name] = strings.TrimSpace(value)
	}
	return h, nil
}

// newFlagSet returns a flag set that reports errors instead of exiting, with
// a usage text of synopsis + description + the flags.
func newFlagSet(name, synopsis, description string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: replicator %s\n\n%s\n", synopsis, description)
		var any bool
		fs.VisitAll(func(*flag.Flag) { any = true })
		if any {
			fmt.Fprintln(stderr, "\nFlags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args. code is the exit status when ok is false: 0
// after --help, 2 on a usage error (which fs has reported).
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}

// parseNoArgs is parseFlags for a subcommand that takes no positional
// argument: one given is a usage error, named on stderr.
func parseNoArgs(fs *flag.FlagSet, args []string, stderr io.Writer) (code int, ok bool) {
	if code, ok := parseFlags(fs, args); !ok {
		return code, false
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "replicator %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, false
	}
	return 0, true
}

// parseInterspersed parses args with flags allowed before, between and after
// the positional arguments, which it returns. code is the exit status when
// ok is false: 0 after --help, 2 on a usage error.
func parseInterspersed(fs *flag.FlagSet, args []string) (positional []string, code int, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, 0, false
			}
			return nil, 2, false
		}
		if fs.NArg() == 0 {
			return positional, 0, true
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
